// Which backends left which frontends, as the Syncer reports them after each
// applied plan (socket termination acts on it): a backend out of a
// frontend's slots, every backend of a frontend that goes, under the
// frontend's reverse NAT id; nothing for additions, unchanged syncs, or a
// backend that only left another frontend; nothing for a plan that failed.
import t from 'tap';
import type { RemovedBackend } from '../../src/sync/removed.ts';
import { removedBackends } from '../../src/sync/removed.ts';
import { planSync } from '../../src/sync/plan.ts';
import { type MapSource, Syncer } from '../../src/sync/syncer.ts';
import type { MapWriter } from '../../src/sync/apply.ts';
import { FailingMaps } from './failing-maps.ts';
import { MemoryMaps, target } from './helpers.ts';

const A = '10.244.0.11';
const B = '10.244.0.12';
const C = '10.244.0.13';

function recording(maps: MapSource & MapWriter = new MemoryMaps()) {
  const calls: RemovedBackend[][] = [];
  const syncer = new Syncer(maps, { onBackendsRemoved: (r) => calls.push(r) });
  return { syncer, calls, maps };
}

const revNat = (s: Syncer, id: string) => s.state.frontends.get(id)!.master.rev_nat_id;
const sorted = (r: RemovedBackend[]) =>
  [...r].sort((x, y) => `${x.addr}:${x.port}@${x.revNatId}`.localeCompare(`${y.addr}:${y.port}@${y.revNatId}`));

t.test("a backend that leaves a frontend is reported with that frontend's reverse NAT id", async (t) => {
  const { syncer, calls } = recording();
  const dns = (bes: string[]) => target('10.96.0.10', 53, bes, { owner: 'dns' });
  syncer.sync([dns([A, B, C])]);
  t.same(calls, [], 'adding reports nothing');
  const id = revNat(syncer, '10.96.0.10:53/6/0');
  syncer.sync([dns([B, C])]);
  t.same(calls, [[{ addr: A, port: 8080, proto: 6, revNatId: id }]]);
  syncer.sync([dns([B, C])]);
  t.equal(calls.length, 1, 'an unchanged sync reports nothing');
  syncer.sync([dns([B, C, A])]);
  t.equal(calls.length, 1, 'a backend coming back reports nothing');
});

t.test('a frontend that goes reports every backend it had', async (t) => {
  const { syncer, calls } = recording();
  syncer.syncOwners(new Map([['web', [target('10.96.0.20', 80, [A, B], { owner: 'web' })]]]));
  const id = revNat(syncer, '10.96.0.20:80/6/0');
  syncer.syncOwners(new Map([['web', []]]));
  t.equal(calls.length, 1);
  t.same(sorted(calls[0]!), [
    { addr: A, port: 8080, proto: 6, revNatId: id },
    { addr: B, port: 8080, proto: 6, revNatId: id },
  ]);
});

t.test('a backend shared by two frontends is reported only for the one it left', async (t) => {
  const { syncer, calls } = recording();
  const one = (bes: string[]) => target('10.96.0.30', 53, bes, { owner: 'one' });
  const two = target('10.96.0.31', 53, [A], { owner: 'two' });
  syncer.sync([one([A, B]), two]);
  const id1 = revNat(syncer, '10.96.0.30:53/6/0');
  t.not(id1, revNat(syncer, '10.96.0.31:53/6/0'), 'each frontend its own reverse NAT id');
  syncer.sync([one([B]), two]);
  t.same(calls, [[{ addr: A, port: 8080, proto: 6, revNatId: id1 }]], 'only for the frontend it left');
});

t.test("the protocol and port are the backend's", async (t) => {
  const { syncer, calls } = recording();
  const udp = (bes: string[]) =>
    target('10.96.0.40', 53, bes, {
      owner: 'udp',
      id: '10.96.0.40:53/17/0',
      key: { addr: '10.96.0.40', port: 53, proto: 17, scope: 0 },
    });
  const withProto = (f: ReturnType<typeof udp>) => ({ ...f, backends: f.backends.map((b) => ({ ...b, proto: 17 })) });
  syncer.sync([withProto(udp([`${A}:5353`, `${B}:5353`]))]);
  syncer.sync([withProto(udp([`${B}:5353`]))]);
  t.same(calls, [[{ addr: A, port: 5353, proto: 17, revNatId: revNat(syncer, '10.96.0.40:53/17/0') }]]);
});

t.test('a plan that fails reports nothing; the function alone on a plan not applied', async (t) => {
  const maps = new FailingMaps(new MemoryMaps());
  const { syncer, calls } = recording(maps);
  syncer.sync([target('10.96.0.50', 80, [A, B])]);
  maps.fail = () => 0;
  t.throws(() => syncer.sync([target('10.96.0.50', 80, [B])]));
  t.same(calls, []);
  // The pure function itself, on a plan never applied.
  const plain = new Syncer(new MemoryMaps());
  plain.sync([target('10.96.0.51', 80, [A, B])]);
  const plan = planSync(plain.state, [target('10.96.0.51', 80, [B])], { services: 100, backends: 100, revNat: 100, srcRanges: 100 });
  t.same(
    removedBackends(plain.state, plan).map((r) => r.addr),
    [A],
  );
});
