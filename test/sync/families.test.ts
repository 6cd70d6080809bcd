// One sync engine per address family (src/sync/families.ts): each family's
// frontends reach only its own maps, an owner's frontends of a family it no
// longer has are removed, and on the kernel's maps the IPv6 codecs carry
// what the engine tracks (a fresh read equals the tracked state).
import t from 'tap';
import { claimPinDir, ensureBpffs } from '../../lab/pins.ts';
import { compileBpf } from '../../src/bpf/compile.ts';
import { loadPinned } from '../../src/bpf/loader.ts';
import { DatapathMaps } from '../../src/maps/datapath-maps.ts';
import { FamilySyncers } from '../../src/sync/families.ts';
import { MapsAdapter } from '../../src/sync/maps-adapter.ts';
import { Syncer } from '../../src/sync/syncer.ts';
import type { FrontendTarget } from '../../src/sync/targets.ts';
import { FAMILIES, MemoryMaps, kernelView, normState, target } from './helpers.ts';

const { 4: f4, 6: f6 } = FAMILIES;
const svc = (owner: string, vip: string, backends: string[]): FrontendTarget => ({ ...target(vip, 80, backends), owner });
const sorted = (view: Map<string, string[] | string>) => [...view].map(([k, v]) => [k, Array.isArray(v) ? [...v].sort() : v]).sort();

t.test('each family reaches only its own maps; owners lose what they no longer have', async (t) => {
  const [m4, m6] = [new MemoryMaps(), new MemoryMaps()];
  const s = new FamilySyncers([
    { family: 4, syncer: new Syncer(m4) },
    { family: 6, syncer: new Syncer(m6) },
  ]);
  const dual = [svc('web', f4.vip(10), [f4.pod(1), f4.pod(2)]), svc('web', f6.vip(10), [f6.pod(1), f6.pod(2), f6.pod(3)])];
  const r = s.sync([...dual, svc('api', f6.vip(11), [f6.pod(4)])]);
  t.same(sorted(m4.resolve()), [[`${f4.vip(10)}:80/6/0`, [`${f4.pod(1)}:8080`, `${f4.pod(2)}:8080`]]]);
  t.same(sorted(m6.resolve()), [
    [`${f6.vip(10)}:80/6/0`, [`${f6.pod(1)}:8080`, `${f6.pod(2)}:8080`, `${f6.pod(3)}:8080`]],
    [`${f6.vip(11)}:80/6/0`, [`${f6.pod(4)}:8080`]],
  ]);
  t.equal(r.changed, 3, 'the reports of both families add up');
  t.same(r.entries, { services: 3, backends: 2, revNat: 1, srcRanges: 0 }, 'entries stay per family: the IPv4 maps');
  t.same(r.v6?.entries, { services: 6, backends: 4, revNat: 2, srcRanges: 0 }, 'and the IPv6 maps');
  t.same(s.capacity(), m4.cap, "the capacity is the IPv4 maps'; the IPv6 maps' is in the report");
  t.equal(s.state.frontends.size, 3);

  // web becomes IPv4-only: its IPv6 frontend goes, in the IPv6 maps' order (master first).
  m6.writes = [];
  s.syncOwners(new Map([['web', [dual[0]!]]]));
  t.same(sorted(m6.resolve()), [[`${f6.vip(11)}:80/6/0`, [`${f6.pod(4)}:8080`]]]);
  t.equal(m6.writes[0], `svc-${f6.vip(10)}:80/6/0#0`, 'the master entry is removed first');
  t.ok(
    m6.writes.indexOf(`backend-1`) > m6.writes.lastIndexOf(`svc-${f6.vip(10)}:80/6/0#1`),
    'backends only after the slots that used them',
  );
  t.equal(m4.resolve().size, 1, 'the IPv4 frontend stays');

  // A full sync without IPv6 targets empties the IPv6 maps.
  s.sync([dual[0]!]);
  t.same([m6.services.size, m6.backends.size, m6.revNat.size], [0, 0, 0]);
});

t.test('without IPv6 maps, IPv6 targets are left out and IPv4 works as before', async (t) => {
  const m4 = new MemoryMaps();
  const s = new FamilySyncers([{ family: 4, syncer: new Syncer(m4) }]);
  s.sync([svc('web', f4.vip(1), [f4.pod(1)]), svc('web', f6.vip(1), [f6.pod(1)])]);
  t.same([...m4.resolve().keys()], [`${f4.vip(1)}:80/6/0`]);
});

t.test('on the kernel maps: IPv6 frontends in svcmap_svc6/be6/revnat6, read back as tracked', async (t) => {
  ensureBpffs();
  const pins = claimPinDir('families');
  const object = loadPinned({ objectPath: compileBpf({ program: 'sock' }).path, pinDir: pins.dir, maxEntries: () => 1024 }).object;
  const maps = DatapathMaps.fromObjects([object]);
  t.teardown(() => {
    maps.close();
    object.close();
    pins.release();
  });
  const v6 = maps.family(6)!;
  const engines = maps.families().map((f) => ({ family: f.family, syncer: new Syncer(new MapsAdapter(f)) }));
  const s = new FamilySyncers(engines);
  const want = [
    svc('web', f4.vip(10), [f4.pod(1)]),
    svc('web', f6.vip(10), [f6.pod(1), `[${f6.pod(0x1234)}]:443`]),
    svc('api', 'fd00:10:96:ffff:ffff:ffff:ffff:fffe', [f6.pod(2)]),
  ];
  s.sync(want);
  t.same(sorted(kernelView(v6)), [
    [`${f6.vip(10)}:80/6/0`, [`${f6.pod(0x1234)}:443`, `${f6.pod(1)}:8080`]],
    ['fd00:10:96:ffff:ffff:ffff:ffff:fffe:80/6/0', [`${f6.pod(2)}:8080`]],
  ]);
  t.same(sorted(kernelView(maps.v4)), [[`${f4.vip(10)}:80/6/0`, [`${f4.pod(1)}:8080`]]], 'the IPv4 maps hold the IPv4 frontend only');
  t.same(
    normState(engines[1]!.syncer.state),
    normState(new MapsAdapter(v6).readState()),
    'a fresh read of the IPv6 maps equals the tracked state',
  );
  // A restarted agent keeps every IPv6 id: nothing to write.
  const again = new Syncer(new MapsAdapter(v6));
  const r = again.sync(want.slice(1));
  t.equal(r.changed, 0, 'a new engine over the same maps has nothing to change');
  s.sync([]);
  t.same([v6.services.entries().length, v6.backends.entries().length, v6.revNat.entries().length], [0, 0, 0], 'removal empties them');
});
