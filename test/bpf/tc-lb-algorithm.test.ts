// Load-balancing algorithms at tc (svcmap_tc_in, BPF_PROG_TEST_RUN): rr
// rotates exactly through the slots for sequential new flows; sh keeps a
// client address on one backend (and, with SVC_F_SH_PORT, a client
// address + source port); session affinity on top of rr uses rr on a miss;
// random is unchanged. lc, sed, nq choose by the live counts that
// conntrack keeps (a flow counts while open; IPv6 flows too, in their own
// counts): a new flow goes to the least loaded backend, an idle one first,
// and ties spread; dh gives every client
// of one frontend one backend.
import t, { type Test } from 'tap';
import {
  IPPROTO_TCP,
  LB_ALG_DH,
  LB_ALG_LC,
  LB_ALG_MAGLEV,
  LB_ALG_NQ,
  LB_ALG_RR,
  LB_ALG_SED,
  LB_ALG_SH,
  SVC_F_AFFINITY,
  SVC_F_NODEPORT,
  SVC_F_SH_PORT,
  SVC_SCOPE_EXT,
} from '../../src/maps/constants.ts';
import { CONNS_ADJUST_PROGRAM, ConnCounts } from '../../src/agent/datapath/conn-counts.ts';
import { TCP_RST, TCP_SYN, buildIpv4 } from './fixtures/packets.ts';
import { buildIpv6 } from './fixtures/packets6.ts';
import { translated, translated6 } from './fixtures/tc-expect.ts';
import { type BackendSpec, type ServiceSpec, TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const NODE6 = 'fd00:198:51:100::1';
const BACKENDS: BackendSpec[] = [
  { id: 31, addr: '10.244.2.31', port: 8080 },
  { id: 32, addr: '10.244.2.32', port: 8080 },
  { id: 33, addr: '10.244.3.33', port: 8080 },
];

const h = TcHarness.open();
t.teardown(() => h.close());
h.configure(NODE_IP);
h.configure6(NODE6);

let nextPort = 21000;
const freshPort = () => nextPort++;

const service = (port: number, revNatId: number, algorithm: number, flags = 0, backends = BACKENDS): ServiceSpec => ({
  addr: NODE_IP,
  port,
  proto: 'tcp',
  revNatId,
  flags: SVC_F_NODEPORT | flags,
  algorithm,
  backends,
  ...(flags & SVC_F_AFFINITY ? { affinityTimeout: 10800 } : {}),
});

function newFlow(tt: Test, client: string, port: number, sport = freshPort()): string {
  const input = buildIpv4({ saddr: client, daddr: NODE_IP, proto: 'tcp', sport, dport: port, tcpFlags: TCP_SYN });
  return translated(tt, h.ingress(input), input, `new flow from ${client}:${sport} to :${port}`).daddr;
}

const master = (port: number) => h.services.get({ addr: NODE_IP, port, proto: IPPROTO_TCP, scope: SVC_SCOPE_EXT, slot: 0 });

t.test('rr: sequential new flows rotate exactly through the slots', async (t) => {
  h.clearCt();
  h.addService(service(30600, 60, LB_ALG_RR));
  const got: string[] = [];
  for (let i = 0; i < 9; i++) got.push(newFlow(t, `203.0.113.${10 + i}`, 30600));
  const first = BACKENDS.findIndex((b) => b.addr === got[0]);
  t.same(
    got,
    got.map((_, i) => BACKENDS[(first + i) % 3]!.addr),
    `exact rotation: ${got.join(', ')}`,
  );
  t.equal(master(30600)?.backend_id, 9, "the master's counter advanced once per new flow");
  // Packets of a known flow do not advance it.
  const sport = freshPort();
  const a = newFlow(t, '203.0.113.50', 30600, sport);
  const input = buildIpv4({ saddr: '203.0.113.50', daddr: NODE_IP, proto: 'tcp', sport, dport: 30600, tcpFlags: 0x10 });
  t.equal(translated(t, h.ingress(input), input, 'same flow').daddr, a, 'the flow keeps its backend');
  t.equal(master(30600)?.backend_id, 10, "a known flow's packet does not turn the wheel");
});

t.test('sh: one client address always reaches one backend; clients spread', async (t) => {
  h.clearCt();
  h.addService(service(30601, 61, LB_ALG_SH));
  const union = new Set<string>();
  for (let c = 0; c < 24; c++) {
    const client = `203.0.113.${100 + c}`;
    const got = new Set<string>();
    for (let i = 0; i < 8; i++) got.add(newFlow(t, client, 30601));
    t.equal(got.size, 1, `${client}: 8 flows (new source ports), one backend`);
    union.add([...got][0]!);
  }
  t.equal(union.size, 3, `24 clients reach all 3 backends (${[...union].join(', ')})`);
  t.equal(master(30601)?.backend_id, 0, 'sh does not touch the rr counter');
});

t.test('sh with SVC_F_SH_PORT: the source port is hashed too', async (t) => {
  h.clearCt();
  h.addService(service(30602, 62, LB_ALG_SH, SVC_F_SH_PORT));
  const client = '203.0.113.9';
  const byPort = new Map<number, string>();
  for (let i = 0; i < 24; i++) {
    const sport = 40000 + i * 7;
    byPort.set(sport, newFlow(t, client, 30602, sport));
  }
  t.ok(new Set(byPort.values()).size > 1, 'one address, different ports: more than one backend');
  h.clearCt();
  for (const [sport, be] of byPort) t.equal(newFlow(t, client, 30602, sport), be, `${client}:${sport} again: the same backend`);
});

t.test('affinity on top of rr: a miss chooses by rr, a hit keeps the backend', async (t) => {
  h.clearCt();
  h.clearAffinity();
  h.addService(service(30603, 63, LB_ALG_RR, SVC_F_AFFINITY));
  const firsts: string[] = [];
  for (let c = 0; c < 6; c++) {
    const client = `203.0.113.${150 + c}`;
    const be = newFlow(t, client, 30603);
    firsts.push(be);
    for (let i = 0; i < 3; i++) t.equal(newFlow(t, client, 30603), be, `${client}: affinity holds`);
  }
  const first = BACKENDS.findIndex((b) => b.addr === firsts[0]);
  t.same(
    firsts,
    firsts.map((_, i) => BACKENDS[(first + i) % 3]!.addr),
    `new clients rotate: ${firsts.join(', ')}`,
  );
  t.equal(master(30603)?.backend_id, 6, 'only the misses turned the wheel');
});

t.test('maglev before its table is published (none written here) is random, and works', async (t) => {
  h.clearCt();
  h.addService(service(30604, 64, LB_ALG_MAGLEV));
  const seen = new Set<string>();
  for (let i = 0; i < 40; i++) seen.add(newFlow(t, '203.0.113.77', 30604));
  t.ok(seen.size > 1, `random spread (${[...seen].join(', ')})`);
});

const counts = new ConnCounts([{ family: 4, conns: h.conns, backends: h.backends }], h.object.programFd(CONNS_ADJUST_PROGRAM));
const tcCount = (b: BackendSpec) => h.connsOf(b.id).tc;

/** The lc test's frontend and backends in each family: IPv6 flows count in svcmap_conns6, by the same rules. */
const LC_FAMILIES = [
  { family: 4 as const, node: NODE_IP, client: (n: number) => `203.0.113.${n}`, backends: BACKENDS },
  {
    family: 6 as const,
    node: NODE6,
    client: (n: number) => `fd00:203:0:113::${n}`,
    backends: BACKENDS.map((b, i) => ({ ...b, addr: `fd00:10:244:2::${31 + i}` })),
  },
];

for (const f of LC_FAMILIES) {
  t.test(`lc (IPv${f.family}): each new flow goes to the backend with the fewest open flows; closing frees a backend`, async (t) => {
    h.clearCt();
    h.clearConns();
    const port = 30610;
    const spec = { ...service(port, 70, LB_ALG_LC, 0, f.backends), addr: f.node };
    if (f.family === 6) h.addService6(spec);
    else h.addService(spec);
    const build = (client: string, sport: number, tcpFlags: number) => {
      const l4 = { saddr: client, daddr: f.node, proto: 'tcp' as const, sport, dport: port, tcpFlags };
      return f.family === 6 ? buildIpv6(l4) : buildIpv4(l4);
    };
    const flow = (client: string, sport = freshPort()) => {
      const input = build(client, sport, TCP_SYN);
      const res = h.ingress(input);
      return (f.family === 6 ? translated6 : translated)(t, res, input, `new flow from ${client}:${sport} to :${port}`).daddr;
    };
    const counted = () => f.backends.map((b) => h.connsOf(b.id, f.family).tc);
    const sports: Array<[string, number]> = [];
    for (let round = 1; round <= 3; round++) {
      const got = new Set<string>();
      for (let i = 0; i < 3; i++) {
        const sport = freshPort();
        const be = flow(f.client(60), sport);
        got.add(be);
        sports.push([be, sport]);
      }
      t.equal(got.size, 3, `round ${round}: 3 new flows, one to each backend`);
      t.same(counted(), [round, round, round], `round ${round}: every backend holds ${round}`);
    }
    // Two flows of one backend end (RST): the next two new flows go there.
    const target = f.backends[1]!;
    for (const [, sport] of sports.filter(([be]) => be === target.addr).slice(0, 2)) h.ingress(build(f.client(60), sport, TCP_RST));
    t.same(counted(), [3, 1, 3], 'two of its flows closed');
    t.equal(flow(f.client(61)), target.addr, 'the next flow: the least loaded');
    t.equal(flow(f.client(62)), target.addr, 'and the next (2 < 3)');
    t.same(counted(), [3, 3, 3]);
  });
}

t.test('lc: ties spread (sequential flows that close at once do not all go to slot 1)', async (t) => {
  h.clearCt();
  h.clearConns();
  h.addService(service(30611, 71, LB_ALG_LC));
  const seen = new Set<string>();
  for (let i = 0; i < 30; i++) {
    const sport = freshPort();
    seen.add(newFlow(t, '203.0.113.63', 30611, sport));
    h.ingress(buildIpv4({ saddr: '203.0.113.63', daddr: NODE_IP, proto: 'tcp', sport, dport: 30611, tcpFlags: TCP_RST }));
  }
  t.same(BACKENDS.map(tcCount), [0, 0, 0], 'every flow closed');
  t.equal(seen.size, 3, `30 flows with every backend idle reached all 3 (${[...seen].join(', ')})`);
});

t.test("lc, sed, nq count the socket LB's connections too; an idle backend is chosen first", async (t) => {
  for (const [alg, port] of [
    [LB_ALG_LC, 30612],
    [LB_ALG_SED, 30613],
    [LB_ALG_NQ, 30614],
  ] as const) {
    h.clearCt();
    h.clearConns();
    h.addService(service(port, 90 + alg, alg));
    counts.adjust(BACKENDS[0]!.id, 'sock', 5);
    counts.adjust(BACKENDS[1]!.id, 'sock', 3);
    t.equal(newFlow(t, '203.0.113.64', port), BACKENDS[2]!.addr, `alg ${alg}: 5 / 3 / 0: the idle backend`);
    t.equal(newFlow(t, '203.0.113.64', port), BACKENDS[2]!.addr, `alg ${alg}: 5 / 3 / 1: still the least loaded`);
    t.equal(newFlow(t, '203.0.113.64', port), BACKENDS[2]!.addr, `alg ${alg}: 5 / 3 / 2: and again`);
    t.same(BACKENDS.map(tcCount), [0, 0, 3], 'its 3 flows are counted');
    counts.adjust(BACKENDS[2]!.id, 'sock', 2);
    t.equal(newFlow(t, '203.0.113.64', port), BACKENDS[1]!.addr, `alg ${alg}: 5 / 3 / 5: (3+1)/1 is the shortest expected delay`);
  }
});

t.test('lc: a negative (drifted) count is read as 0, not as a huge number', async (t) => {
  h.clearCt();
  h.clearConns();
  h.addService(service(30615, 76, LB_ALG_LC));
  counts.adjust(BACKENDS[0]!.id, 'sock', 1);
  counts.adjust(BACKENDS[0]!.id, 'sock', -3); // -2
  counts.adjust(BACKENDS[1]!.id, 'sock', 1);
  counts.adjust(BACKENDS[2]!.id, 'sock', 1);
  t.equal(newFlow(t, '203.0.113.65', 30615), BACKENDS[0]!.addr, 'the backend at -2 is idle (0), the others hold 1');
});

t.test('dh: every client of one frontend gets the same backend; frontends spread', async (t) => {
  h.clearCt();
  const union = new Set<string>();
  for (let f = 0; f < 12; f++) {
    const port = 30620 + f;
    h.addService(service(port, 80 + f, LB_ALG_DH));
    const got = new Set<string>();
    for (let c = 0; c < 6; c++) got.add(newFlow(t, `203.0.113.${170 + c}`, port));
    t.equal(got.size, 1, `frontend :${port}: 6 clients, one backend`);
    union.add([...got][0]!);
  }
  t.ok(union.size > 1, `12 frontends do not all hash to one backend (${[...union].join(', ')})`);
});
