// Maglev at tc (svcmap_tc_in, BPF_PROG_TEST_RUN), with the tables written
// by the agent's sync engine itself (planSync + MapsAdapter into the tc
// object's maps, svcmap_maglev a real hash of maps): one flow key always
// reaches one backend; the flows spread over all backends; a second agent's
// table (other backend ids, other slot order) sends every flow to the same
// backend; removing one of 10 backends moves only ~1/10 of the flows; and a
// frontend whose table is missing still works (random).
import t from 'tap';
import { IPPROTO_TCP, LB_ALG_MAGLEV, SVC_F_NODEPORT, SVC_SCOPE_EXT } from '../../src/maps/constants.ts';
import type { DatapathMaps } from '../../src/maps/datapath-maps.ts';
import { MaglevTables } from '../../src/maps/maglev-tables.ts';
import { maglevMap, revNatMap } from '../../src/maps/registry.ts';
import { TypedMap } from '../../src/maps/typed-map.ts';
import { applyPlan } from '../../src/sync/apply.ts';
import { MapsAdapter } from '../../src/sync/maps-adapter.ts';
import { commitPlan, planSync } from '../../src/sync/plan.ts';
import type { MapState } from '../../src/sync/state.ts';
import type { FrontendTarget } from '../../src/sync/targets.ts';
import { TCP_SYN, buildIpv4, parseIpv4 } from './fixtures/packets.ts';
import { TC_ACT_OK, TC_ACT_REDIRECT, TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const PORT = 30700;

const h = TcHarness.open();
t.teardown(() => h.close());
h.configure(NODE_IP);
// The maps the sync engine writes, from the tc object alone (DatapathMaps
// wants the socket object's too; these are all that MapsAdapter touches).
const maps = {
  v4: {
    services: h.services,
    backends: h.backends,
    srcRange: h.srcRange,
    revNat: new TypedMap(revNatMap, h.object.map(revNatMap.name)),
    maglev: new MaglevTables(h.object.map(maglevMap.name)),
  },
} as unknown as DatapathMaps;
const adapter = new MapsAdapter(maps.v4);

const backends = (n: number, skip = -1) =>
  Array.from({ length: n }, (_, i) => i)
    .filter((i) => i !== skip)
    .map((i) => ({ addr: `10.244.${i >> 8}.${(i & 255) + 1}`, port: 8080, proto: IPPROTO_TCP, state: 0, flags: 0, zone: 0 }));

function frontend(bes: FrontendTarget['backends'], maglevSize = 16381): FrontendTarget {
  const key = { addr: NODE_IP, port: PORT, proto: IPPROTO_TCP, scope: SVC_SCOPE_EXT };
  return {
    id: `${NODE_IP}:${PORT}/6/0`,
    key,
    flags: SVC_F_NODEPORT,
    algorithm: LB_ALG_MAGLEV,
    affinityTimeout: 0,
    maglevSize,
    backends: bes,
    sourceRanges: [],
    owner: 'ns/web',
    label: 'ns/web',
  };
}

let state: MapState = adapter.readState();
function sync(targets: FrontendTarget[]): void {
  const plan = planSync(state, targets, adapter.capacity());
  applyPlan(plan, adapter);
  commitPlan(state, plan);
}

/** 400 flow keys: 100 clients x 4 source ports. */
const FLOWS = Array.from({ length: 400 }, (_, i) => ({ saddr: `203.0.113.${(i >> 2) + 1}`, sport: 20000 + (i & 3) * 1111 + i }));

/** Each flow's backend address, each flow new (conntrack cleared first). */
function route(): string[] {
  h.clearCt();
  return FLOWS.map((f) => {
    const res = h.ingress(buildIpv4({ saddr: f.saddr, daddr: NODE_IP, proto: 'tcp', sport: f.sport, dport: PORT, tcpFlags: TCP_SYN }));
    if (res.retval !== TC_ACT_OK && res.retval !== TC_ACT_REDIRECT) throw new Error(`flow ${f.saddr}:${f.sport}: retval ${res.retval}`);
    return parseIpv4(res.packetOut).daddr;
  });
}

const moved = (a: string[], b: string[]) => a.filter((x, i) => x !== b[i]).length / a.length;

t.test('one flow key, one backend; all backends used; two agents agree; removing 1 of 10 moves ~1/10', async (t) => {
  sync([frontend(backends(10))]);
  const table = maps.v4.maglev!.read(state.frontends.get(`${NODE_IP}:${PORT}/6/0`)!.master.rev_nat_id);
  t.equal(table?.[0], 16381, "the frontend's table is in svcmap_maglev, M at index 0");
  const rn = state.frontends.get(`${NODE_IP}:${PORT}/6/0`)!.master.rev_nat_id;
  t.same(
    [...(adapter.readState().maglevSizes ?? [])],
    [[rn, 16381]],
    "read back from the kernel (a restarted agent's view): the size by rev_nat_id",
  );
  const first = route();
  t.same(route(), first, '400 new flows again: each flow key reaches the backend it reached before');
  const used = new Set(first);
  t.equal(used.size, 10, `the flows reach all 10 backends (${used.size})`);
  const per = [...used].map((a) => first.filter((x) => x === a).length);
  t.ok(Math.max(...per) <= 40 * 2, `no backend takes more than twice its share (${per.join(' ')})`);

  // A second agent: other backend ids and slot order (its maps start from
  // other state). Written into the same maps here, in its own order.
  sync([]);
  state = adapter.readState();
  sync([frontend(backends(10).reverse())]);
  t.same(route(), first, "another agent's table (other ids, other slots) sends every flow to the same backend");

  // Remove backend 4: the flows it had move, and few others.
  sync([frontend(backends(10, 4))]);
  const after = route();
  t.notOk(after.includes('10.244.0.5'), 'the removed backend gets no flow');
  const share = moved(first, after);
  const had = first.filter((x) => x === '10.244.0.5').length / first.length;
  t.ok(
    share <= 0.1 + 0.05,
    `${(share * 100).toFixed(1)}% of the flows moved (ideal 10%; the removed backend had ${(had * 100).toFixed(1)}%)`,
  );
  t.ok(share - had <= 0.03, `flows of kept backends that moved: ${((share - had) * 100).toFixed(1)}%`);
});

t.test('a maglev frontend without its table is served at random', async (t) => {
  sync([frontend(backends(3))]);
  const rn = state.frontends.get(`${NODE_IP}:${PORT}/6/0`)!.master.rev_nat_id;
  t.ok(maps.v4.maglev!.delete(rn), "table deleted behind the agent's back");
  const got = new Set(route());
  t.ok(got.size > 1, `random spread without a table (${[...got].join(', ')})`);
});
