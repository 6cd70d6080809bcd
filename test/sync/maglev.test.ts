// Maglev's table (src/sync/maglev.ts) and its place in the sync plan: the
// table is full, each backend holds ~M/N entries, removing one of N backends
// moves ~1/N of the entries, the table does not depend on the order the
// backends come in; the plan publishes a frontend's table after its slots and
// before its master and stale slots, naming only slots 1..count, and drops it
// when the frontend goes or leaves maglev.
import t from 'tap';
import { LB_ALG_MAGLEV, SVCMAP_MAGLEV_DEFAULT_M, MAGLEV_TABLE_SIZES } from '../../src/maps/constants.ts';
import { maglevDisruption, maglevSlotTable, maglevTable } from '../../src/sync/maglev.ts';
import { Syncer } from '../../src/sync/syncer.ts';
import { FailingMaps } from './failing-maps.ts';
import { MemoryMaps, target } from './helpers.ts';

const names = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `10.244.${(from + i) >> 8}.${(from + i) & 255}:8080/6`);

function shares(table: Int32Array, n: number): number[] {
  const c = new Array<number>(n).fill(0);
  for (const i of table) c[i]!++;
  return c;
}

t.test('every allowed size is prime', async (t) => {
  const prime = (m: number) => {
    for (let d = 2; d * d <= m; d++) if (m % d === 0) return false;
    return m > 1;
  };
  for (const m of MAGLEV_TABLE_SIZES) t.ok(prime(m), `${m}`);
  t.ok((MAGLEV_TABLE_SIZES as readonly number[]).includes(SVCMAP_MAGLEV_DEFAULT_M));
});

t.test('the table is full and each backend gets ~M/N entries', async (t) => {
  for (const [n, m] of [
    [1, 251],
    [3, 251],
    [10, SVCMAP_MAGLEV_DEFAULT_M],
    [100, SVCMAP_MAGLEV_DEFAULT_M],
    [7, 65521],
  ] as const) {
    const table = maglevTable(names(n), m);
    t.notOk(table.includes(-1), `N=${n} M=${m}: every entry names a backend`);
    const c = shares(table, n);
    // Maglev's turn-taking gives each backend floor or ceil of M/N.
    t.ok(Math.max(...c) - Math.min(...c) <= 1, `N=${n} M=${m}: shares ${Math.min(...c)}..${Math.max(...c)}, M/N = ${(m / n).toFixed(1)}`);
  }
  t.same(
    [...maglevTable([], 251)].filter((x) => x !== -1),
    [],
    'no backends: no entry',
  );
});

t.test('the table does not depend on the order of the backends (two agents agree)', async (t) => {
  const a = names(10);
  const b = [...a].reverse();
  const ta = maglevTable(a, 1021);
  const tb = maglevTable(b, 1021);
  let same = 0;
  for (let j = 0; j < 1021; j++) if (a[ta[j]!] === b[tb[j]!]) same++;
  t.equal(same, 1021, 'every entry names the same backend');
});

t.test('removing one of N backends moves ~1/N of the entries', async (t) => {
  for (const n of [3, 10, 50]) {
    const before = names(n);
    const table = maglevTable(before, SVCMAP_MAGLEV_DEFAULT_M);
    for (const gone of [0, Math.floor(n / 2), n - 1]) {
      const after = before.filter((_, i) => i !== gone);
      const moved = maglevDisruption(table, before, maglevTable(after, SVCMAP_MAGLEV_DEFAULT_M), after);
      t.ok(
        moved >= 1 / n - 0.01 && moved <= 1 / n + 0.03,
        `N=${n}, backend ${gone} removed: ${(moved * 100).toFixed(1)}% moved (ideal ${(100 / n).toFixed(1)}%)`,
      );
    }
    // Adding one back moves about as little.
    const grown = [...before, names(1, 1000)[0]!];
    const moved = maglevDisruption(table, before, maglevTable(grown, SVCMAP_MAGLEV_DEFAULT_M), grown);
    t.ok(moved <= 1 / (n + 1) + 0.03, `N=${n} -> ${n + 1}: ${(moved * 100).toFixed(1)}% moved`);
  }
});

t.test('the datapath form: index 0 holds M, then 1-based slots', async (t) => {
  const tb = maglevSlotTable(names(4), 251);
  t.equal(tb.length, 252);
  t.equal(tb[0], 251);
  t.same([...new Set(tb.subarray(1))].sort(), [1, 2, 3, 4]);
});

const maglev = (vip: string, backends: string[], m = 251) => target(vip, 80, backends, { algorithm: LB_ALG_MAGLEV, maglevSize: m });

/** The slots a published table names, with the backend each slot held when the table was written. */
function tableOf(mm: MemoryMaps, revNatId: number): Uint16Array {
  const tb = mm.maglev.get(revNatId);
  if (!tb) throw new Error(`no table for ${revNatId}`);
  return tb;
}

t.test('the plan publishes the table after the slots and before the master; it follows the backends', async (t) => {
  const m = new MemoryMaps();
  const s = new Syncer(m);
  const ten = Array.from({ length: 10 }, (_, i) => `10.244.0.${10 + i}`);
  s.sync([maglev('10.96.0.10', ten)]);
  const kinds = m.writes.map((w) => w.replace(/[+-].*/, (x) => x[0]!));
  const firstMaglev = kinds.indexOf('maglev+');
  t.ok(firstMaglev > kinds.lastIndexOf('backend+'), 'after the backends');
  t.match(m.writes[firstMaglev - 1], /#10$/, 'after the last slot');
  t.match(m.writes[firstMaglev + 1], /#0$/, 'right before the master');
  const [rn] = [...m.maglev.keys()];
  t.equal(tableOf(m, rn!)[0], 251);

  // Remove one: the new table (slots 1..9) before the master and the stale slot 10.
  m.writes = [];
  s.sync([
    maglev(
      '10.96.0.10',
      ten.filter((_, i) => i !== 3),
    ),
  ]);
  const w = m.writes;
  t.ok(w.indexOf(`maglev+${rn}`) < w.findIndex((x) => /^svc\+.*#0$/.test(x)), 'new table before the master');
  t.ok(w.indexOf(`maglev+${rn}`) < w.findIndex((x) => /^svc-.*#10$/.test(x)), 'and before the old last slot goes');
  const tb = tableOf(m, rn!);
  t.ok(
    tb.subarray(1).every((x) => x >= 1 && x <= 9),
    'the table names slots 1..9 only',
  );
  // Each entry's backend, through the slots as they now are.
  const fe = [...m.services.values()].filter(([k]) => k.slot > 0).map(([k, v]) => [k.slot, m.backends.get(v.backend_id)!.addr] as const);
  const bySlot = new Map(fe);
  t.notOk(
    [...tb.subarray(1)].some((x) => bySlot.get(x) === '10.244.0.13'),
    'the removed backend is in no entry',
  );

  // Unchanged: nothing written; another size: a new table.
  m.writes = [];
  s.sync([
    maglev(
      '10.96.0.10',
      ten.filter((_, i) => i !== 3),
    ),
  ]);
  t.same(m.writes, []);
  s.sync([
    maglev(
      '10.96.0.10',
      ten.filter((_, i) => i !== 3),
      509,
    ),
  ]);
  t.equal(tableOf(m, rn!)[0], 509, 'a new size publishes a new table');
});

t.test('the table goes when the frontend leaves maglev or goes away; a restart reads sizes back', async (t) => {
  const m = new MemoryMaps();
  const s = new Syncer(m);
  s.sync([maglev('10.96.0.10', ['10.244.0.2', '10.244.0.3']), maglev('10.96.0.11', ['10.244.0.4'])]);
  t.equal(m.maglev.size, 2);
  const again = new Syncer(m);
  m.writes = [];
  again.sync([maglev('10.96.0.10', ['10.244.0.2', '10.244.0.3']), maglev('10.96.0.11', ['10.244.0.4'])]);
  t.same(m.writes, [], 'a restarted syncer sees the tables and writes nothing');
  again.sync([target('10.96.0.10', 80, ['10.244.0.2', '10.244.0.3']), maglev('10.96.0.11', ['10.244.0.4'])]);
  t.equal(m.maglev.size, 1, 'random now: its table is deleted');
  const w = m.writes;
  t.ok(w.findIndex((x) => /^svc\+.*#0$/.test(x)) < w.findIndex((x) => x.startsWith('maglev-')), 'after the master stopped naming maglev');
  again.sync([]);
  t.equal(m.maglev.size, 0, "a removed frontend's table is deleted");
  // An orphan (a table no frontend uses, e.g. left by an interrupted run) goes at a full sync.
  m.maglev.set(999, new Uint16Array([251]));
  new Syncer(m).sync([]);
  t.equal(m.maglev.size, 0, 'the orphan is deleted');
});

t.test('a failed publish is published again by the next sync; a failed delete is deleted again', async (t) => {
  const m = new MemoryMaps();
  const f = new FailingMaps(m);
  const s = new Syncer(f);
  const ten = Array.from({ length: 10 }, (_, i) => `10.244.0.${10 + i}`);
  s.sync([maglev('10.96.0.10', ten), maglev('10.96.0.11', ten)]);
  const before = new Map([...m.maglev].map(([id, tb]) => [id, tb.slice()]));
  // Replace one backend of each (same count: the slots change, the masters
  // do not); the table batch stops after the first table. After the
  // read-back the slots are new, so only the tracked table size can say
  // that the second table is stale.
  const next = [...ten.slice(1), '10.244.0.99'];
  f.fail = (b) => (b.name === 'putMaglev' ? 1 : undefined);
  t.throws(() => s.sync([maglev('10.96.0.10', next), maglev('10.96.0.11', next)]));
  f.fail = () => undefined;
  const changed = [...m.maglev].filter(([id, tb]) => before.get(id)!.some((x, j) => x !== tb[j])).length;
  t.equal(changed, 1, 'one of the two new tables made it in');
  s.sync([maglev('10.96.0.10', next), maglev('10.96.0.11', next)]);
  const want = maglevSlotTable(
    next.map((ip) => `${ip}:8080/6`),
    251,
  );
  for (const [id, tb] of m.maglev) {
    // Through the slots, each entry's backend must be what a fresh table over `next` says.
    const vip = [...m.services.values()].find(([k, v]) => k.slot === 0 && v.rev_nat_id === id)![0].addr;
    const slotIp = new Map(
      [...m.services.values()].filter(([k]) => k.slot > 0 && k.addr === vip).map(([k, v]) => [k.slot, m.backends.get(v.backend_id)!.addr]),
    );
    const bad = [...tb.subarray(1)].filter((slot, j) => slotIp.get(slot) !== next[want[j + 1]! - 1]).length;
    t.equal(bad, 0, `table ${id}: every entry names the backend the new set's table gives after the retry`);
  }
  // A failed delete: the next sync deletes again.
  f.fail = (b) => (b.name === 'deleteMaglev' ? 0 : undefined);
  t.throws(() => s.sync([]));
  f.fail = () => undefined;
  s.sync([]);
  t.equal(m.maglev.size, 0, 'the tables are gone after the retry');
});
