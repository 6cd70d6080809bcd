// The sync plan: order, minimal writes, stable ids, capacity, restart.
import t from 'tap';
import { planSync, reconcileSlots } from '../../src/sync/plan.ts';
import { Syncer } from '../../src/sync/syncer.ts';
import { MemoryMaps, target } from './helpers.ts';

const BIG = { services: 1 << 20, backends: 1 << 20, revNat: 1 << 20, srcRanges: 1 << 20 };

t.test('reconcileSlots keeps slots, swap-removes, appends', async (t) => {
  t.same(reconcileSlots([1, 2, 3, 4], [1, 2, 3, 4]), [1, 2, 3, 4]);
  t.same(reconcileSlots([1, 2, 3, 4], [1, 3, 4]), [1, 4, 3], 'removed 2: the last slot moves into its place');
  t.same(reconcileSlots([1, 2, 3], [1, 2, 3, 9]), [1, 2, 3, 9]);
  t.same(reconcileSlots([1, 2, 3], []), []);
  t.same(reconcileSlots([1, undefined, 3], [1, 3, 5]), [1, 3, 5], 'a hole is filled');
  t.same(reconcileSlots([1, 1, 2], [1, 2]), [1, 2], 'a duplicate is removed');
  t.same(reconcileSlots([1, 1], [1, 1]), [1], 'a duplicate is removed when nothing else changed too');
  const same = [5, 6, 7];
  t.not(reconcileSlots(same, same), same, 'a new array even when nothing changed (the plan keeps it as the new state)');
});

t.test('a new service: backends, then reverse NAT and slots, then the master', async (t) => {
  const m = new MemoryMaps();
  const s = new Syncer(m);
  s.sync([target('10.96.0.10', 80, ['10.244.0.2', '10.244.0.3'])]);
  t.same(
    m.writes.map((w) => w.replace(/[+-].*/, (x) => x[0]!)),
    ['backend+', 'backend+', 'revnat+', 'svc+', 'svc+', 'svc+'],
  );
  t.match(m.writes.at(-1), /#0$/, 'master written last');
  t.same(m.resolve().get('10.96.0.10:80/6/0'), ['10.244.0.2:8080', '10.244.0.3:8080']);
});

t.test('removing a service: master first, backends last', async (t) => {
  const m = new MemoryMaps();
  const s = new Syncer(m);
  s.sync([target('10.96.0.10', 80, ['10.244.0.2', '10.244.0.3'])]);
  m.writes = [];
  s.sync([]);
  t.match(m.writes[0], /^svc-.*#0$/, 'master removed first');
  t.match(m.writes.at(-1), /^backend-/);
  t.equal(m.services.size + m.backends.size + m.revNat.size, 0, 'nothing left');
});

t.test('one endpoint out of ten costs one slot write, the master, one slot delete, one backend delete', async (t) => {
  const m = new MemoryMaps();
  const s = new Syncer(m);
  const ten = Array.from({ length: 10 }, (_, i) => `10.244.0.${10 + i}`);
  s.sync([target('10.96.0.10', 80, ten)]);
  m.writes = [];
  s.sync([
    target(
      '10.96.0.10',
      80,
      ten.filter((_, i) => i !== 3),
    ),
  ]);
  t.same(
    m.writes.map((w) => w.split('#')[0]!.replace(/[\d.:/]+$/, '') + (w.includes('#') ? `#${w.split('#')[1]}` : '')),
    ['svc+#4', 'svc+#0', 'svc-#10', 'backend-'],
  );
});

t.test('an unchanged sync writes nothing', async (t) => {
  const m = new MemoryMaps();
  const s = new Syncer(m);
  const ts = [target('10.96.0.10', 80, ['10.244.0.2']), target('10.96.0.11', 53, ['10.244.0.3:53'])];
  s.sync(ts);
  m.writes = [];
  const r = s.sync(ts);
  t.same(m.writes, []);
  t.equal(r.changed, 0);
});

t.test('a backend shared by two services is kept until neither uses it', async (t) => {
  const m = new MemoryMaps();
  const s = new Syncer(m);
  s.sync([target('10.96.0.10', 80, ['10.244.0.2']), target('10.96.0.11', 80, ['10.244.0.2'])]);
  t.equal(m.backends.size, 1, 'one id per address');
  s.sync([target('10.96.0.11', 80, ['10.244.0.2'])]);
  t.equal(m.backends.size, 1);
  s.sync([]);
  t.equal(m.backends.size, 0);
});

t.test('a restarted syncer keeps backend and reverse NAT ids and removes only what is stale', async (t) => {
  const m = new MemoryMaps();
  new Syncer(m).sync([target('10.96.0.10', 80, ['10.244.0.2', '10.244.0.3']), target('10.96.0.11', 80, ['10.244.0.4'])]);
  const before = new Map(m.backends);
  const revBefore = new Map(m.revNat);
  m.writes = [];
  const again = new Syncer(m); // reads the maps, as a restarted agent does
  again.sync([target('10.96.0.10', 80, ['10.244.0.2', '10.244.0.3'])]);
  t.notOk(
    m.writes.some((w) => w.startsWith('backend+') || w.startsWith('revnat+') || w.startsWith('svc+')),
    'nothing that stays is rewritten',
  );
  for (const [id, v] of m.backends) t.same(before.get(id), v, `backend ${id} kept its id`);
  for (const [id, v] of m.revNat) t.same(revBefore.get(id), v, `reverse NAT ${id} kept its id`);
  t.equal(m.backends.size, 2);
});

t.test('stray slots from an interrupted write are removed at start', async (t) => {
  const m = new MemoryMaps();
  new Syncer(m).sync([target('10.96.0.10', 80, ['10.244.0.2'])]);
  m.putServices([
    [
      { addr: '10.96.0.10', port: 80, proto: 6, scope: 0, slot: 5 },
      { backend_id: 1, rev_nat_id: 0, count: 0, flags: 0, algorithm: 0, affinity_timeout: 0 },
    ],
  ]);
  m.putServices([
    [
      { addr: '10.96.0.99', port: 80, proto: 6, scope: 0, slot: 1 },
      { backend_id: 1, rev_nat_id: 0, count: 0, flags: 0, algorithm: 0, affinity_timeout: 0 },
    ],
  ]);
  new Syncer(m).sync([target('10.96.0.10', 80, ['10.244.0.2'])]);
  t.equal(m.services.size, 2, 'master and its one slot');
});

t.test('ids freed by a plan are not reused by the same plan', async (t) => {
  const m = new MemoryMaps();
  const s = new Syncer(m);
  s.sync([target('10.96.0.10', 80, ['10.244.0.2'])]);
  const oldId = [...m.backends.keys()][0]!;
  const plan = planSync(s.state, [target('10.96.0.10', 80, ['10.244.0.9'])], BIG);
  t.notOk(
    plan.backendUpserts.some(([id]) => id === oldId),
    'the new backend gets a fresh id',
  );
  t.same(plan.backendDeletes, [oldId]);
});

t.test('a full services map defers the frontends that do not fit, with the reason, and keeps the rest', async (t) => {
  const m = new MemoryMaps();
  m.cap = { services: 5, backends: 100, revNat: 100, srcRanges: 100 };
  const s = new Syncer(m);
  const r = s.sync([target('10.96.0.10', 80, ['10.244.0.2', '10.244.0.3']), target('10.96.0.11', 80, ['10.244.0.4', '10.244.0.5'])]);
  t.equal(r.deferred.length, 1);
  t.match(r.deferred[0]!.reason, /the services map is full \(5 entries\)/);
  t.same(m.resolve().get('10.96.0.10:80/6/0'), ['10.244.0.2:8080', '10.244.0.3:8080'], 'the first one is programmed whole');
  t.notOk(m.resolve().has('10.96.0.11:80/6/0'), 'the other is not half-written');
  t.equal(m.backends.size, 2, 'no backend of the deferred frontend was written');
});

t.test('a full map frees removed services first, then adds', async (t) => {
  const m = new MemoryMaps();
  m.cap = { services: 3, backends: 100, revNat: 100, srcRanges: 100 };
  const s = new Syncer(m);
  s.sync([target('10.96.0.10', 80, ['10.244.0.2', '10.244.0.3'])]);
  const r = s.sync([target('10.96.0.11', 80, ['10.244.0.4', '10.244.0.5'])]);
  t.same(r.deferred, []);
  t.same([...m.resolve().keys()], ['10.96.0.11:80/6/0']);
});

t.test('source ranges are written before the master and removed after it', async (t) => {
  const m = new MemoryMaps();
  const s = new Syncer(m);
  s.sync([target('10.96.0.10', 80, ['10.244.0.2'], { sourceRanges: ['192.168.0.0/16', '10.1.0.0/24'], flags: 0x108 })]);
  const firstRange = m.writes.findIndex((w) => w.startsWith('range+'));
  const master = m.writes.findIndex((w) => w.endsWith('#0'));
  t.ok(firstRange >= 0 && firstRange < master, 'ranges before the master');
  t.equal(m.srcRanges.size, 2);
  m.writes = [];
  s.sync([target('10.96.0.10', 80, ['10.244.0.2'], { sourceRanges: ['192.168.0.0/16', '172.16.0.0/12'], flags: 0x108 })]);
  t.same(
    m.writes.filter((w) => w.startsWith('range')).map((w) => w.replace(/^range([+-])\d+:/, '$1')),
    ['+172.16.0.0/12', '-10.1.0.0/24'],
    'only the difference is written',
  );
  m.writes = [];
  s.sync([]);
  t.ok(m.writes.findIndex((w) => w.startsWith('range-')) > m.writes.findIndex((w) => w.endsWith('#0')), 'ranges after the master');
  t.equal(m.srcRanges.size, 0);
  t.same(s.state.counts.srcRanges, 0);
});

t.test('a restart reads the ranges back and keeps them', async (t) => {
  const m = new MemoryMaps();
  new Syncer(m).sync([target('10.96.0.10', 80, ['10.244.0.2'], { sourceRanges: ['192.168.0.0/16'] })]);
  m.writes = [];
  new Syncer(m).sync([target('10.96.0.10', 80, ['10.244.0.2'], { sourceRanges: ['192.168.0.0/16'] })]);
  t.same(m.writes, [], 'nothing rewritten');
});
