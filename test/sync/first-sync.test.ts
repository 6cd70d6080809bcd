// The first full sync hands its plan's backend table to the tracked state
// (commitPlan): that state must be what the maps hold, ids, addresses and
// slot references alike, and the syncs after it must build on it (an
// unchanged desired state writes nothing: the address index finds every
// backend by its address).
import t from 'tap';
import { Syncer } from '../../src/sync/syncer.ts';
import type { FrontendTarget } from '../../src/sync/targets.ts';
import { FAMILIES, MemoryMaps, normState, target } from './helpers.ts';

function rng(seed: number) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

/** Up to 8 frontends over 10 pods: frontends share backends (one id per address). */
function randomState(r: () => number, family: keyof typeof FAMILIES): FrontendTarget[] {
  const { vip, pod } = FAMILIES[family];
  const out: FrontendTarget[] = [];
  for (let svc = 0; svc < 8; svc++) {
    if (r() < 0.2) continue;
    const backends = new Set<string>();
    for (let i = Math.floor(r() * 6); i > 0; i--) backends.add(pod(1 + Math.floor(r() * 10)));
    out.push(target(vip(svc), 80, [...backends]));
  }
  return out;
}

for (const family of [4, 6] as const)
  t.test(`IPv${family}: after the first full sync and each one after it, the tracked state is what the maps hold`, async (t) => {
    for (let seed = 1; seed <= 30; seed++) {
      const r = rng(seed);
      const m = new MemoryMaps();
      const s = new Syncer(m);
      for (let step = 0; step < 6; step++) {
        const next = randomState(r, family);
        s.sync(next);
        t.same(normState(s.state), normState(m.readState()), `seed ${seed} step ${step}`);
        m.writes.length = 0;
        s.sync(next);
        t.same(m.writes, [], `seed ${seed} step ${step}: the same desired state again writes nothing`);
      }
    }
  });
