// Ordering, checked the way a reader sees it: random sequences of desired
// states are synced into maps that apply one element at a time, and after
// every single write each frontend that exists resolves to backends that
// exist, never to fewer than both its old and its new backend count; every
// Maglev table a master reaches names only slots that exist.
import t from 'tap';
import { LB_ALG_MAGLEV } from '../../src/maps/constants.ts';
import { Syncer } from '../../src/sync/syncer.ts';
import type { FrontendTarget } from '../../src/sync/targets.ts';
import { FAMILIES, MemoryMaps, target } from './helpers.ts';

function rng(seed: number) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

function randomState(r: () => number, family: keyof typeof FAMILIES): FrontendTarget[] {
  const { vip, pod } = FAMILIES[family];
  const out: FrontendTarget[] = [];
  for (let svc = 0; svc < 6; svc++) {
    if (r() < 0.25) continue;
    const n = Math.floor(r() * 6);
    const backends = new Set<string>();
    for (let i = 0; i < n; i++) backends.add(pod(1 + Math.floor(r() * 12)));
    out.push(target(vip(svc), 80, [...backends]));
  }
  return out;
}

for (const family of [4, 6] as const)
  t.test(`IPv${family}: no reader ever sees a half-written service`, async (t) => {
    let checks = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const r = rng(seed);
      const m = new MemoryMaps();
      const s = new Syncer(m);
      let prev = new Map<string, number>();
      for (let step = 0; step < 15; step++) {
        const next = randomState(r, family);
        const want = new Map(next.map((x) => [x.id, x.backends.length]));
        m.onWrite = (what) => {
          for (const [fid, res] of m.resolve()) {
            checks++;
            if (typeof res === 'string') {
              t.fail(`seed ${seed} step ${step} after ${what}: ${res}`);
              return;
            }
            const floor = Math.min(prev.get(fid) ?? Infinity, want.get(fid) ?? Infinity);
            if (floor !== Infinity && res.length < floor)
              t.fail(
                `seed ${seed} step ${step} after ${what}: ${fid} has ${res.length} backends, old ${prev.get(fid)} new ${want.get(fid)}`,
              );
          }
        };
        s.sync(next);
        m.onWrite = () => {};
        const final = m.resolve();
        t.same([...final.keys()].sort(), [...want.keys()].sort(), `seed ${seed} step ${step}: the frontends are the desired ones`);
        for (const x of next) t.same((final.get(x.id) as string[]).slice().sort(), x.backends.map((b) => `${b.addr}:${b.port}`).sort());
        prev = want;
      }
    }
    t.ok(checks > 1000, `checked ${checks} intermediate states`);
  });

t.test('a Maglev table never names a slot that is missing, and ends naming exactly the backends', async (t) => {
  let checks = 0;
  const sk = (k: { addr: string; port: number; proto: number; scope: number }, slot: number) =>
    `${k.addr}:${k.port}/${k.proto}/${k.scope}#${slot}`;
  /** Every published table whose frontend's master exists: the frontend key by rev_nat_id. */
  const masters = (m: MemoryMaps) =>
    new Map([...m.services.values()].filter(([k]) => k.slot === 0).map(([k, v]) => [v.rev_nat_id, k] as const));
  for (let seed = 1; seed <= 30; seed++) {
    const r = rng(1000 + seed);
    const m = new MemoryMaps();
    const s = new Syncer(m);
    for (let step = 0; step < 12; step++) {
      // Most frontends maglev; some switch away and back between steps.
      const next = randomState(r, 4).map((x) => (r() < 0.8 ? { ...x, algorithm: LB_ALG_MAGLEV, maglevSize: 251 } : x));
      m.onWrite = (what) => {
        const byRn = masters(m);
        for (const [rn, tb] of m.maglev) {
          const key = byRn.get(rn);
          if (!key) continue; // not reachable: no master names it
          checks++;
          for (let j = 1; j < tb.length; j++) {
            if (!m.services.has(sk(key, tb[j]!))) {
              t.fail(`seed ${seed} step ${step} after ${what}: table ${rn} names slot ${tb[j]} of ${sk(key, 0)}, which is missing`);
              return;
            }
          }
        }
      };
      s.sync(next);
      m.onWrite = () => {};
      const byRn = masters(m);
      for (const x of next) {
        const rn = [...byRn].find(([, k]) => sk(k, 0) === sk(x.key, 0))![0];
        const tb = m.maglev.get(rn);
        if (x.algorithm !== LB_ALG_MAGLEV || x.backends.length === 0) {
          t.equal(tb, undefined, `seed ${seed} step ${step}: ${x.id} has no table`);
          continue;
        }
        const named = new Set(
          [...tb!.subarray(1)].map((slot) => {
            const be = m.backends.get(m.services.get(sk(x.key, slot))![1].backend_id)!;
            return `${be.addr}:${be.port}`;
          }),
        );
        t.same(
          [...named].sort(),
          x.backends.map((b) => `${b.addr}:${b.port}`).sort(),
          `seed ${seed} step ${step}: ${x.id}'s table names its backends`,
        );
      }
      t.equal(m.maglev.size, next.filter((x) => x.algorithm === LB_ALG_MAGLEV && x.backends.length).length, 'no table is left over');
    }
  }
  t.ok(checks > 500, `checked ${checks} intermediate tables`);
});
