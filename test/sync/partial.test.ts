// Partial syncs (one Service's frontends at a time) leave the maps exactly as
// a full sync of the same desired state would, write only what changed, and
// keep the tracked counts and indexes equal to a fresh read of the maps.
import t from 'tap';
import { Syncer } from '../../src/sync/syncer.ts';
import { countEntries } from '../../src/sync/state.ts';
import type { FrontendTarget } from '../../src/sync/targets.ts';
import { MemoryMaps, target } from './helpers.ts';

function rng(seed: number) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

function svc(owner: string, vips: string[], backends: string[]): FrontendTarget[] {
  return vips.map((v) => ({ ...target(v, 80, backends), owner }));
}

t.test('a partial sync touches only the changed owner', async (t) => {
  const m = new MemoryMaps();
  const s = new Syncer(m);
  s.sync([...svc('a', ['10.96.0.1'], ['10.244.0.1', '10.244.0.2']), ...svc('b', ['10.96.0.2'], ['10.244.0.3'])]);
  m.writes = [];
  const r = s.syncOwners(new Map([['b', svc('b', ['10.96.0.2'], ['10.244.0.3', '10.244.0.4'])]]));
  t.equal(r.full, false);
  t.ok(
    m.writes.every((w) => !w.includes('10.96.0.1')),
    'nothing of owner a is written',
  );
  t.same(m.resolve().get('10.96.0.2:80/6/0'), ['10.244.0.3:8080', '10.244.0.4:8080']);
  s.syncOwners(new Map([['b', []]]));
  t.same([...m.resolve().keys()], ['10.96.0.1:80/6/0'], 'an owner with no frontends is removed');
  t.equal(m.backends.size, 2, "b's backends are gone");
});

t.test('random partial syncs equal a full sync, and tracked state equals the maps', async (t) => {
  for (let seed = 1; seed <= 30; seed++) {
    const r = rng(seed);
    const m = new MemoryMaps();
    const s = new Syncer(m);
    const owners = ['a', 'b', 'c', 'd', 'e'];
    const desired = new Map<string, FrontendTarget[]>();
    s.sync([]);
    for (let step = 0; step < 25; step++) {
      const owner = owners[Math.floor(r() * owners.length)]!;
      const vips = r() < 0.2 ? [] : [`10.96.${owners.indexOf(owner)}.1`, ...(r() < 0.5 ? [`10.96.${owners.indexOf(owner)}.2`] : [])];
      const backends = Array.from({ length: Math.floor(r() * 5) }, () => `10.244.0.${1 + Math.floor(r() * 8)}`);
      const list = svc(owner, vips, [...new Set(backends)]);
      desired.set(owner, list);
      s.syncOwners(new Map([[owner, list]]));
      t.same(s.state.counts, countEntries(s.state), `seed ${seed} step ${step}: tracked counts`);
      t.same(
        s.state.counts,
        { services: m.services.size, backends: m.backends.size, revNat: m.revNat.size, srcRanges: m.srcRanges.size },
        `seed ${seed} step ${step}: counts equal the maps`,
      );
    }
    const all = [...desired.values()].flat();
    const fresh = new MemoryMaps();
    new Syncer(fresh).sync(all);
    const norm = (x: Map<string, string[] | string>) => [...x].map(([k, v]) => [k, Array.isArray(v) ? [...v].sort() : v]).sort();
    t.same(norm(m.resolve()), norm(fresh.resolve()), `seed ${seed}: the same frontends and backends as a full sync`);
    m.writes = [];
    s.sync(all);
    t.same(m.writes, [], `seed ${seed}: a full sync afterwards finds nothing to change`);
    const reread = m.readState();
    t.same(
      [...reread.backends.refEntries()].sort(),
      [...s.state.backends.refEntries()].sort(),
      `seed ${seed}: reference counts equal a fresh read`,
    );
  }
});
