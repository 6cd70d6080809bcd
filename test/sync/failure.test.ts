// Syncs whose map writes fail, on in-memory maps that apply one element at a
// time (helpers.ts) behind a layer that fails on purpose (failing-maps.ts).
// Checked: after every single write, before and after the failure and
// through the retry, each frontend resolves to backends that exist, never
// to fewer than both its old and its new count; after a failure the tracked
// state is exactly what the maps hold (read back, not re-read, when the
// plan was small); the retry of the failed Services alone converges to the
// desired state with nothing left over (no orphan backend, reverse NAT or
// stray slot: a full sync afterwards writes nothing).
import t from 'tap';
import { ApplyError } from '../../src/sync/apply.ts';
import { svcSlotId } from '../../src/sync/plan.ts';
import { type MapState, countEntries } from '../../src/sync/state.ts';
import { Syncer } from '../../src/sync/syncer.ts';
import type { FrontendTarget } from '../../src/sync/targets.ts';
import { FailingMaps, InjectedFailure } from './failing-maps.ts';
import { MemoryMaps, normState as norm, target } from './helpers.ts';

function rng(seed: number) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

const OWNERS = ['a', 'b', 'c', 'd', 'e'];
const RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'];

/** An owner's frontends: zero to two VIPs, backends drawn from a small shared pool (so owners share backend ids), sometimes source ranges. */
function randomOwner(r: () => number, owner: string): FrontendTarget[] {
  if (r() < 0.2) return [];
  const i = OWNERS.indexOf(owner);
  const vips = [`10.96.${i}.1`, ...(r() < 0.5 ? [`10.96.${i}.2`] : [])];
  const backends = [...new Set(Array.from({ length: Math.floor(r() * 6) }, () => `10.244.0.${1 + Math.floor(r() * 10)}`))];
  const sourceRanges = r() < 0.3 ? RANGES.filter(() => r() < 0.6) : [];
  return vips.map((v) => ({ ...target(v, 80, backends), owner, sourceRanges }));
}

/** Backends per frontend as a reader resolves them (-1: broken). */
function resolvedCounts(m: MemoryMaps): Map<string, number> {
  return new Map([...m.resolve()].map(([k, v]) => [k, typeof v === 'string' ? -1 : v.length]));
}

function wantCounts(desired: ReadonlyMap<string, FrontendTarget[]>): Map<string, number> {
  return new Map([...desired.values()].flat().map((x) => [x.id, x.backends.length]));
}

/** The per-frontend minimum a reader may see while the maps go from `a` to `b`. */
function floorOf(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, v] of a) if (b.has(k)) out.set(k, Math.min(v, b.get(k)!));
  return out;
}

/** Checks the reader's view after every element written; returns the complaints. */
function watchReaders(m: MemoryMaps, floor: ReadonlyMap<string, number>, label: string): string[] {
  const problems: string[] = [];
  m.onWrite = (what) => {
    for (const [fid, res] of m.resolve()) {
      if (typeof res === 'string') problems.push(`${label} after ${what}: ${res}`);
      else if (res.length < (floor.get(fid) ?? 0))
        problems.push(`${label} after ${what}: ${fid} has ${res.length} backends, floor ${floor.get(fid)}`);
    }
  };
  return problems;
}

/** The address index (BackendTable.idOf) only has to name, for every backend address, one id holding it. */
function idIndexProblems(s: MapState): string[] {
  const out: string[] = [];
  for (const [id, be] of s.backends) {
    const named = s.backends.idOf(be);
    if (named === undefined || s.backends.get(named)?.addr !== be.addr)
      out.push(`backend ${id} (${be.addr}:${be.port}/${be.proto}) is not indexed`);
  }
  return out;
}

const fresh = (desired: ReadonlyMap<string, FrontendTarget[]>) => {
  const m = new MemoryMaps();
  new Syncer(m).sync([...desired.values()].flat());
  return m;
};
const sortedResolve = (m: MemoryMaps) => [...m.resolve()].map(([k, v]) => [k, Array.isArray(v) ? [...v].sort() : v]).sort();
const sizes = (m: MemoryMaps) => ({
  services: m.services.size,
  backends: m.backends.size,
  revNat: m.revNat.size,
  srcRanges: m.srcRanges.size,
});

t.test('a sync failing anywhere: readers never see a half-written service, and its retry converges', async (t) => {
  let failed = 0;
  let readBacks = 0;
  const problems: string[] = [];
  for (let seed = 1; seed <= 60; seed++) {
    const r = rng(seed);
    const m = new MemoryMaps();
    const f = new FailingMaps(m);
    const s = new Syncer(f);
    const desired = new Map(OWNERS.map((o) => [o, randomOwner(r, o)]));
    s.sync([...desired.values()].flat());
    for (let step = 0; step < 12; step++) {
      const label = `seed ${seed} step ${step}`;
      const before = resolvedCounts(m);
      const changes = new Map<string, FrontendTarget[]>();
      for (const o of OWNERS) if (r() < 0.4) changes.set(o, randomOwner(r, o));
      for (const [o, list] of changes) desired.set(o, list);
      // Fail at one of the first batches of this sync, after a random part of it.
      const failAt = f.batches + 1 + Math.floor(r() * 6);
      const share = r();
      f.fail = (b) => (b.n === failAt ? Math.floor(share * (b.size + 1)) : undefined);
      problems.push(...watchReaders(m, floorOf(before, wantCounts(desired)), label));
      const reads = f.fullReads;
      // Mostly partial syncs, as the Kubernetes loop makes; sometimes a full one (the first, the periodic one).
      const fullAttempt = r() < 0.2;
      try {
        if (fullAttempt) s.sync([...desired.values()].flat());
        else s.syncOwners(changes);
      } catch (err) {
        if (!(err instanceof ApplyError) || !(err.cause instanceof InjectedFailure)) throw err;
        failed++;
        f.fail = () => undefined;
        if (f.fullReads === reads) readBacks++;
        t.same(norm(s.state), norm(m.readState()), `${label}: after failing in ${err.phase}, the tracked state is what the maps hold`);
        t.same(idIndexProblems(s.state), [], `${label}: the address index names every backend`);
        // The retry: the failed owners as they are wanted now, sometimes with another change made meanwhile.
        const retry = new Map([...changes.keys()].map((o) => [o, desired.get(o)!]));
        if (r() < 0.5) {
          const o = OWNERS[Math.floor(r() * OWNERS.length)]!;
          retry.set(o, randomOwner(r, o));
          desired.set(o, retry.get(o)!);
        }
        problems.push(...watchReaders(m, floorOf(resolvedCounts(m), wantCounts(desired)), `${label} retry`));
        // A failed full sync is retried as one; a failed partial one as itself, or as a full resync (the escalation).
        if (fullAttempt || r() < 0.3) {
          s.reload();
          s.sync([...desired.values()].flat());
        } else s.syncOwners(retry);
      }
      f.fail = () => undefined;
      m.onWrite = () => {};
      t.same(sortedResolve(m), sortedResolve(fresh(desired)), `${label}: readers see the desired state`);
      t.same(sizes(m), sizes(fresh(desired)), `${label}: nothing left over in any map`);
      t.same(s.state.counts, countEntries(s.state), `${label}: tracked counts`);
      t.same(s.state.counts, sizes(m), `${label}: tracked counts equal the maps`);
    }
    m.writes = [];
    s.sync([...desired.values()].flat());
    t.same(m.writes, [], `seed ${seed}: a full sync afterwards finds nothing to change`);
  }
  t.same(problems, [], 'no reader ever saw a half-written service');
  t.ok(failed > 200, `${failed} failed syncs retried`);
  t.equal(readBacks, failed, 'every failure of these small plans was read back, none re-read every map');
});

t.test('slots a failed sync wrote past the old count are written over by the retry, never deleted under a grown master', async (t) => {
  const m = new MemoryMaps();
  const f = new FailingMaps(m);
  const s = new Syncer(f);
  const web = (n: number) => [
    {
      ...target(
        '10.96.0.10',
        80,
        Array.from({ length: n }, (_, i) => `10.244.0.${i + 1}`),
      ),
      owner: 'web',
    },
  ];
  s.sync(web(2));
  // Growing to 4: backends, reverse NAT and slots 3 and 4 are written, the master (count 4) fails.
  f.fail = (b) => (b.name === 'putServices' ? 0 : undefined);
  t.throws(() => s.syncOwners(new Map([['web', web(4)]])), ApplyError);
  f.fail = () => undefined;
  t.same(
    s.state.straySlots.map(svcSlotId).sort(),
    ['10.96.0.10:80/6/0#3', '10.96.0.10:80/6/0#4'],
    'slots 3 and 4 are strays: past the count readers use',
  );
  t.same(m.resolve().get('10.96.0.10:80/6/0'), ['10.244.0.1:8080', '10.244.0.2:8080'], 'readers still see the old two backends');
  // A full resync (as after repeated failures) writes the strays over, then grows the master over them.
  m.writes = [];
  s.sync(web(4));
  t.notOk(
    m.writes.some((w) => w.startsWith('svc-')),
    'no services entry deleted',
  );
  t.same(m.resolve().get('10.96.0.10:80/6/0')?.length, 4);
  t.same(s.state.straySlots, [], 'no stray left');
  t.same(s.state.counts, sizes(m));
  // Shrinking afterwards deletes what is past the new count only.
  s.syncOwners(new Map([['web', web(1)]]));
  t.same(sizes(m), { services: 2, backends: 1, revNat: 1, srcRanges: 0 });
});

t.test('what a failed sync of a new Service wrote, and a newer wish no longer wants, is removed by the partial retry', async (t) => {
  const m = new MemoryMaps();
  const f = new FailingMaps(m);
  const s = new Syncer(f);
  s.sync([{ ...target('10.96.0.1', 80, ['10.244.0.1']), owner: 'old' }]);
  // A new Service: its backends and reverse NAT are written, its slots fail.
  f.fail = (b) => (b.name === 'putSlots' ? 0 : undefined);
  t.throws(
    () => s.syncOwners(new Map([['new', [{ ...target('10.96.0.2', 80, ['10.244.0.7', '10.244.0.8']), owner: 'new' }]]])),
    ApplyError,
  );
  f.fail = () => undefined;
  t.same(
    sizes(m),
    { services: 2, backends: 3, revNat: 2, srcRanges: 0 },
    'the failed sync left two backends and a reverse NAT entry nothing uses',
  );
  // Before the retry the Service was deleted.
  s.syncOwners(new Map([['new', []]]));
  t.same(sizes(m), { services: 2, backends: 1, revNat: 1, srcRanges: 0 }, 'the partial retry removed them');
});

t.test('a big failed plan is followed by a re-read of the maps, a small one by reading back its entries', async (t) => {
  const m = new MemoryMaps();
  const f = new FailingMaps(m);
  const s = new Syncer(f);
  const reads = f.fullReads; // the Syncer's first read
  const many = Array.from({ length: 1200 }, (_, i) => ({
    ...target(`10.96.${i >> 8}.${i & 255}`, 80, [`10.244.0.${1 + (i % 50)}`]),
    owner: 'many',
  }));
  f.fail = (b) => (b.name === 'putServices' ? 600 : undefined);
  t.throws(() => s.syncOwners(new Map([['many', many]])), ApplyError);
  t.equal(f.fullReads, reads + 1, 'a plan touching 1200 frontends: one re-read');
  t.same(norm(s.state), norm(m.readState()));
  f.fail = () => undefined;
  s.syncOwners(new Map([['many', many]]));
  t.equal(m.resolve().size, 1200);

  f.fail = (b) => (b.name === 'putServices' ? 0 : undefined);
  const lookups = f.lookups;
  t.throws(() => s.syncOwners(new Map([['one', [{ ...target('10.97.0.1', 80, ['10.244.1.1']), owner: 'one' }]]])), ApplyError);
  t.equal(f.fullReads, reads + 1, 'a one-frontend plan: no re-read...');
  t.ok(f.lookups - lookups > 0 && f.lookups - lookups < 10, `...but ${f.lookups - lookups} lookups`);
  t.same(norm(s.state), norm(m.readState()));
});

t.test('when the read-back fails too, the next sync starts from a re-read', async (t) => {
  const m = new MemoryMaps();
  const f = new FailingMaps(m);
  const s = new Syncer(f);
  s.sync([{ ...target('10.96.0.1', 80, ['10.244.0.1']), owner: 'a' }]);
  f.fail = (b) => (b.name === 'putServices' ? 0 : undefined);
  f.failLookups = true;
  t.throws(() => s.syncOwners(new Map([['a', [{ ...target('10.96.0.1', 80, ['10.244.0.1', '10.244.0.2']), owner: 'a' }]]])), ApplyError);
  f.fail = () => undefined;
  f.failLookups = false;
  const reads = f.fullReads;
  s.syncOwners(new Map([['a', [{ ...target('10.96.0.1', 80, ['10.244.0.1', '10.244.0.2', '10.244.0.3']), owner: 'a' }]]]));
  t.equal(f.fullReads, reads + 1, 'the maps were re-read before planning');
  t.same(m.resolve().get('10.96.0.1:80/6/0'), ['10.244.0.1:8080', '10.244.0.2:8080', '10.244.0.3:8080']);
  t.same(s.state.counts, sizes(m));
});
