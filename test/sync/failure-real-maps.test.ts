// A sync failing between phases on the real BPF maps of each family: maps loaded in the
// kernel from the compiled objects (a pin directory of the test's own), the
// real MapsAdapter behind a layer that fails the chosen batch
// (failing-maps.ts). For every phase boundary of one update (grow a Service,
// remove one, add one, change source ranges), the update fails there; then:
// what a datapath reader finds in the kernel maps after each phase is whole
// (every master's slots and backends exist, no frontend below both its old
// and new backend count), the tracked state equals a fresh read of the
// kernel maps, and the retry of the failed Services alone brings the maps to
// the desired state with nothing left over.
import t from 'tap';
import { claimPinDir, ensureBpffs } from '../../lab/pins.ts';
import { compileBpf } from '../../src/bpf/compile.ts';
import { loadPinned } from '../../src/bpf/loader.ts';
import type { BpfObject } from '../../src/bpf/object.ts';
import { DatapathMaps } from '../../src/maps/datapath-maps.ts';
import { ApplyError } from '../../src/sync/apply.ts';
import { MapsAdapter } from '../../src/sync/maps-adapter.ts';
import { Syncer } from '../../src/sync/syncer.ts';
import type { FrontendTarget } from '../../src/sync/targets.ts';
import { FailingMaps, InjectedFailure } from './failing-maps.ts';
import { FAMILIES, MemoryMaps, kernelView as familyView, normState, target } from './helpers.ts';

ensureBpffs();
const pins = claimPinDir('syncfail');
const objects: BpfObject[] = [];
let dp: DatapathMaps | undefined;
t.teardown(() => {
  dp?.close();
  for (const o of objects) o.close();
  pins.release();
});
for (const program of ['sock', 'tc'] as const) {
  objects.push(loadPinned({ objectPath: compileBpf({ program }).path, pinDir: pins.dir, maxEntries: () => 4096 }).object);
}
const maps = (dp = DatapathMaps.fromObjects(objects));

for (const family of [4, 6] as const) {
  const fm = maps.family(family)!;
  const { vip, pod } = FAMILIES[family];
  const kernelView = () => familyView(fm);
  const counts = (view: Map<string, string[] | string>) => new Map([...view].map(([k, v]) => [k, typeof v === 'string' ? -1 : v.length]));
  const kernelSizes = () => ({
    services: fm.services.entries().length,
    backends: fm.backends.entries().length,
    revNat: fm.revNat.entries().length,
    srcRanges: fm.srcRange?.entries().length ?? 0,
  });

  // Source ranges (tc's): each family's frontends get the ranges of their family (svcmap_srcrng, svcmap_srcrng6).
  const svc = (owner: string, n: number, backends: number[], sourceRanges: string[] = []): FrontendTarget => ({
    ...target(vip(n), 80, backends.map(pod)),
    owner,
    sourceRanges: sourceRanges.filter((r) => r.includes(':') === (family === 6)),
  });
  const BASE = new Map([
    ['web', [svc('web', 10, [1, 2, 3])]],
    ['api', [svc('api', 11, [4, 5])]],
    ['lb', [svc('lb', 12, [2], ['10.0.0.0/8', 'fd00::/8'])]],
  ]);
  const CHANGE = new Map([
    ['web', [svc('web', 10, [1, 6, 7, 8])]],
    ['api', []],
    ['db', [svc('db', 13, [9])]],
    ['lb', [svc('lb', 12, [2], ['192.168.0.0/16', 'fd00:192:168::/48'])]],
  ]);
  const all = (m: ReadonlyMap<string, FrontendTarget[]>) => [...m.values()].flat();
  const desiredAfter = new Map([...BASE, ...CHANGE]);
  const expected = (() => {
    const m = new MemoryMaps();
    new Syncer(m).sync(all(desiredAfter));
    return {
      view: [...m.resolve()].map(([k, v]) => [k, [...(v as string[])].sort()]).sort(),
      sizes: { services: m.services.size, backends: m.backends.size, revNat: m.revNat.size, srcRanges: m.srcRanges.size },
    };
  })();
  const sortedView = () => [...kernelView()].map(([k, v]) => [k, Array.isArray(v) ? [...v].sort() : v]).sort();

  t.test(`IPv${family}: an update failing at each phase boundary, then at part of a batch, on the kernel maps`, async (t) => {
    const f = new FailingMaps(new MapsAdapter(fm));
    const s = new Syncer(f);
    let boundaries = 0;
    // k: the failing batch of the update; written: how much of it the kernel got.
    for (const [k, written] of [[4, 1] as const, ...Array.from({ length: 12 }, (_, i) => [i + 1, 0] as const)]) {
      s.sync(all(BASE));
      const before = counts(kernelView());
      const after = new Map(all(desiredAfter).map((x) => [x.id, x.backends.length]));
      const problems: string[] = [];
      f.afterBatch = (b) => {
        for (const [fid, res] of kernelView()) {
          if (typeof res === 'string') problems.push(`after ${b.name}: ${res}`);
          else if (after.has(fid) && before.has(fid) && res.length < Math.min(before.get(fid)!, after.get(fid)!))
            problems.push(`after ${b.name}: ${fid} has ${res.length} backends`);
        }
      };
      const first = f.batches + 1;
      f.fail = (b) => (b.n === first + k - 1 ? written : undefined);
      let err: unknown;
      try {
        s.syncOwners(CHANGE);
      } catch (e) {
        err = e;
      }
      f.fail = () => undefined;
      if (err === undefined) {
        // Past the update's last batch: nothing failed.
        f.afterBatch = () => {};
        t.same(problems, [], `no failure at batch ${k}: every phase left the kernel maps whole`);
        continue;
      }
      boundaries++;
      t.ok(
        err instanceof ApplyError && err.cause instanceof InjectedFailure,
        `failed in ${(err as ApplyError).phase} (batch ${k}, ${written} written)`,
      );
      t.same(problems, [], 'every phase written before the failure left the kernel maps whole for a reader');
      t.same(normState(s.state), normState(new MapsAdapter(fm).readState()), 'the tracked state is what the kernel maps hold');
      // The retry: the same Services, nothing else.
      s.syncOwners(CHANGE);
      f.afterBatch = () => {};
      t.same(problems, [], 'and so did every phase of the retry');
      t.same(sortedView(), expected.view, 'after the retry readers find the desired state');
      t.same(kernelSizes(), expected.sizes, 'nothing left over in any map');
      const batches = f.batches;
      s.sync(all(desiredAfter));
      t.equal(f.batches, batches, 'a full sync afterwards writes nothing');
    }
    // Both families have every phase, the source ranges' upserts and deletes among them.
    t.equal(boundaries, 11, "a failure after each of the 10 phases' batches, and one inside a batch");
  });
}
