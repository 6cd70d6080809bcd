// Live connection counts at tc (svcmap_be_conns, field tc, and for IPv6
// flows svcmap_conns6's), through BPF_PROG_TEST_RUN on a loaded tc object
// (nothing attached), each test for both families: a new flow to an lc
// frontend counts for its backend once its forward conntrack entry exists
// (a flow to a random frontend does not count at all); an RST or a FIN from
// each side stops it counting, once, whichever side is seen; a half-closed
// flow reused by a new SYN counts once; a flow whose backend id was reused
// for another endpoint is neither taken off nor recounted for it; the GC
// takes an open flow it collects off the count; the recount in the same
// pass corrects a drifted count and removes the entry of a backend that is
// gone; the agent changes a count only through svcmap_conns_adjust (an
// atomic add).
import t from 'tap';
import { CONNS_ADJUST_PROGRAM, ConnCounts, type RecountResult } from '../../src/agent/datapath/conn-counts.ts';
import { CtGc } from '../../src/agent/loops/ct-gc.ts';
import { progRunSyscall } from '../../src/bpf/test-run.ts';
import { connsAdjust } from '../../src/maps/codecs.ts';
import { CONNS_FIELD_SOCK, CT_DIR_FWD, CT_F_COUNTED, LB_ALG_LC, SVC_F_NODEPORT } from '../../src/maps/constants.ts';
import { TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, buildIpv4 } from './fixtures/packets.ts';
import { buildIpv6 } from './fixtures/packets6.ts';
import { translated, translated6 } from './fixtures/tc-expect.ts';
import { TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const NODE6 = 'fd00:198:51:100::1';
const S = 1_000_000_000n;

const h = TcHarness.open({ ctMax: 512 });
t.teardown(() => h.close());
h.configure(NODE_IP);
h.configure6(NODE6);
const counts = new ConnCounts(
  [
    { family: 4, conns: h.conns, backends: h.backends },
    { family: 6, conns: h.conns6, backends: h.backends6 },
  ],
  h.object.programFd(CONNS_ADJUST_PROGRAM),
);

/** One family's frontends, backends and packets: the same ids in each family's own maps. */
interface Family {
  family: 4 | 6;
  node: string;
  remote: { id: number; addr: string; port: number };
  /** Another endpoint's address, for an id reused. */
  other: string;
  local: { id: number; addr: string; port: number; local: true };
  /** The n-th client address. */
  client: (n: number) => string;
  build: (spec: { saddr: string; daddr: string; sport: number; dport: number; tcpFlags: number; payload?: Buffer }) => Buffer;
  translated: typeof translated | typeof translated6;
}

const FAMILIES: Family[] = [
  {
    family: 4,
    node: NODE_IP,
    remote: { id: 71, addr: '10.244.2.71', port: 8080 },
    other: '10.244.2.99',
    local: { id: 72, addr: '10.244.1.72', port: 8080, local: true },
    client: (n) => `203.0.113.${n}`,
    build: (spec) => buildIpv4({ ...spec, proto: 'tcp' }),
    translated,
  },
  {
    family: 6,
    node: NODE6,
    remote: { id: 71, addr: 'fd00:10:244:2::47', port: 8080 },
    other: 'fd00:10:244:2::99',
    local: { id: 72, addr: 'fd00:10:244:1::48', port: 8080, local: true },
    client: (n) => `fd00:203:0:113::${n.toString(16)}`,
    build: (spec) => buildIpv6({ ...spec, proto: 'tcp' }),
    translated: translated6,
  },
];

for (const f of FAMILIES) {
  const add = (spec: Parameters<TcHarness['addService']>[0]) => (f.family === 6 ? h.addService6(spec) : h.addService(spec));
  add({ addr: f.node, port: 30700, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT, algorithm: LB_ALG_LC, backends: [f.remote] });
  add({ addr: f.node, port: 30701, proto: 'tcp', revNatId: 2, flags: SVC_F_NODEPORT, algorithm: LB_ALG_LC, backends: [f.local] });
  // The same backend behind a frontend whose algorithm (random) does not read the counts.
  add({ addr: f.node, port: 30702, proto: 'tcp', revNatId: 3, flags: SVC_F_NODEPORT, backends: [f.remote] });
}

function reset(): void {
  h.clearCt();
  h.clearConns();
}

for (const f of FAMILIES) {
  t.test(`IPv${f.family}`, async (t) => {
    const { node, family } = f;
    const REMOTE = f.remote,
      LOCAL = f.local;
    const c = f.client;
    const fromClient = (client: string, sport: number, dport: number, flags: number) =>
      f.build({ saddr: client, daddr: node, sport, dport, tcpFlags: flags, ...(flags & TCP_SYN ? {} : { payload: Buffer.from('x') }) });
    /** A packet from the local backend to the client (DNAT only: it meets the reply entry at egress). */
    const fromLocal = (client: string, sport: number, flags: number) =>
      f.build({ saddr: LOCAL.addr, daddr: client, sport: LOCAL.port, dport: sport, tcpFlags: flags, payload: Buffer.from('y') });
    const connsOf = (id: number) => h.connsOf(id, family);
    const ctEntries = () => (family === 6 ? h.ct6Entries() : h.ctEntries());
    const gcOf = (opts: Omit<ConstructorParameters<typeof CtGc>[1] & object, 'conns'>) =>
      new CtGc(
        [
          { family: 4, ct: h.ct },
          { family: 6, ct: h.ct6 },
        ],
        { ...opts, conns: counts },
      );
    /** This family's part of a pass's recount. */
    const mine = (r: RecountResult | undefined) => (family === 6 ? r?.v6 : r);

    t.test('a new flow counts once; its other packets do not', async (t) => {
      reset();
      const syn = fromClient(c(1), 40000, 30700, TCP_SYN);
      f.translated(t, h.ingress(syn), syn, 'SYN');
      t.same(connsOf(REMOTE.id), { sock: 0, tc: 1 }, 'the SYN made the flow: 1');
      h.ingress(fromClient(c(1), 40000, 30700, TCP_ACK));
      h.ingress(fromClient(c(1), 40000, 30700, TCP_SYN)); // a retransmitted SYN
      t.same(connsOf(REMOTE.id), { sock: 0, tc: 1 }, 'an ACK and a retransmitted SYN of the same flow: still 1');
      for (let i = 1; i <= 4; i++) h.ingress(fromClient(c(10 + i), 40000 + i, 30700, TCP_SYN));
      t.same(connsOf(REMOTE.id), { sock: 0, tc: 5 }, 'four more flows: 5');
    });

    t.test('a flow to a random frontend is not counted, and its close takes nothing off', async (t) => {
      reset();
      h.ingress(fromClient(c(7), 40060, 30700, TCP_SYN));
      t.equal(connsOf(REMOTE.id).tc, 1, 'one flow through the lc frontend');
      for (let i = 0; i < 3; i++) h.ingress(fromClient(c(8), 40070 + i, 30702, TCP_SYN));
      t.equal(connsOf(REMOTE.id).tc, 1, 'three flows through the random one: not counted');
      const fwd = ctEntries().filter(([k]) => k.dir === CT_DIR_FWD);
      t.same(
        fwd.map(([k, v]) => [k.dport, (v.flags & CT_F_COUNTED) !== 0]).sort(),
        [
          [30700, true],
          [30702, false],
          [30702, false],
          [30702, false],
        ],
        "only the lc flow's forward entry says CT_F_COUNTED",
      );
      for (let i = 0; i < 3; i++) h.ingress(fromClient(c(8), 40070 + i, 30702, TCP_RST));
      t.equal(connsOf(REMOTE.id).tc, 1, "their RSTs take nothing off the lc flow's count");
    });

    t.test('an RST from the client stops the flow counting, once', async (t) => {
      reset();
      h.ingress(fromClient(c(2), 40010, 30700, TCP_SYN));
      h.ingress(fromClient(c(2), 40010, 30700, TCP_RST));
      t.equal(connsOf(REMOTE.id).tc, 0, 'RST: 0');
      h.ingress(fromClient(c(2), 40010, 30700, TCP_RST | TCP_ACK));
      t.equal(connsOf(REMOTE.id).tc, 0, 'a second RST does not take it below 0');
    });

    t.test('a FIN from each side (the second one seen at egress, from the backend) stops it counting', async (t) => {
      reset();
      const cl = c(3);
      h.ingress(fromClient(cl, 40020, 30701, TCP_SYN));
      t.equal(connsOf(LOCAL.id).tc, 1, 'open: 1');
      h.ingress(fromClient(cl, 40020, 30701, TCP_FIN | TCP_ACK));
      t.equal(connsOf(LOCAL.id).tc, 1, 'half-closed by the client: still open, 1');
      h.egress(fromLocal(cl, 40020, TCP_FIN | TCP_ACK));
      t.equal(connsOf(LOCAL.id).tc, 0, "the backend's FIN closes it: 0");
      h.egress(fromLocal(cl, 40020, TCP_ACK));
      h.ingress(fromClient(cl, 40020, 30701, TCP_ACK));
      t.equal(connsOf(LOCAL.id).tc, 0, 'the last ACKs change nothing');
    });

    t.test('an RST from the backend (the reply entry) stops the forward entry counting', async (t) => {
      reset();
      const cl = c(4);
      h.ingress(fromClient(cl, 40030, 30701, TCP_SYN));
      h.egress(fromLocal(cl, 40030, TCP_RST));
      t.equal(connsOf(LOCAL.id).tc, 0, 'RST from the backend: 0');
    });

    t.test('a flow created closing (its first packet an RST) never counts', async (t) => {
      reset();
      h.ingress(fromClient(c(5), 40040, 30701, TCP_RST | TCP_ACK));
      t.equal(connsOf(LOCAL.id).tc, 0);
    });

    t.test('a half-closed flow whose port a new SYN reuses: the old flow stops counting, the new one counts', async (t) => {
      reset();
      const cl = c(6);
      h.ingress(fromClient(cl, 40050, 30700, TCP_SYN));
      h.ingress(fromClient(cl, 40050, 30700, TCP_FIN | TCP_ACK));
      t.equal(connsOf(REMOTE.id).tc, 1, 'half-closed: 1');
      const syn = fromClient(cl, 40050, 30700, TCP_SYN);
      f.translated(t, h.ingress(syn), syn, 'the new SYN on the same port');
      t.equal(connsOf(REMOTE.id).tc, 1, 'old one forgotten (-1), new one made (+1): 1');
    });

    t.test('a flow whose backend id now names another endpoint: its close takes nothing off, and the recount counts it out', async (t) => {
      reset();
      const backends = family === 6 ? h.backends6 : h.backends;
      const was = backends.get(REMOTE.id)!;
      t.teardown(() => backends.put(REMOTE.id, was));
      h.ingress(fromClient(c(50), 40400, 30700, TCP_SYN));
      t.equal(connsOf(REMOTE.id).tc, 1, 'a flow to the endpoint: 1');
      backends.put(REMOTE.id, { ...was, addr: f.other }); // the id freed and reused for another endpoint
      h.ingress(fromClient(c(50), 40400, 30700, TCP_RST));
      t.equal(connsOf(REMOTE.id).tc, 1, 'its RST: not taken off the reused id');
      h.ingress(fromClient(c(51), 40401, 30700, TCP_SYN));
      t.equal(connsOf(REMOTE.id).tc, 2, 'a flow to the new endpoint: +1');
      const run = gcOf({ intervalMs: 0 }).runOnce();
      t.match(mine(run.conns), { tc: { corrected: 1, drift: 1 } }, "the recount: only the new endpoint's flow matches the id");
      t.equal(connsOf(REMOTE.id).tc, 1, '1');
    });

    t.test('the GC takes the open flows it collects off the count, and not the closed ones again', async (t) => {
      reset();
      const clock = { ahead: 0n };
      const gc = gcOf({ now: () => process.hrtime.bigint() + clock.ahead, intervalMs: 0 });
      for (let i = 0; i < 3; i++) h.ingress(fromClient(c(20 + i), 40100 + i, 30700, TCP_SYN));
      h.ingress(fromClient(c(30), 40200, 30700, TCP_SYN));
      h.ingress(fromClient(c(30), 40200, 30700, TCP_RST));
      t.equal(connsOf(REMOTE.id).tc, 3, '3 open, 1 closed');
      clock.ahead = 61n * S; // past the SYN lifetime (60 s) and the closing one (10 s)
      const run = gc.runOnce();
      t.equal(run.deleted, 8, 'every flow collected');
      t.match(mine(run.conns), { collected: 3, tc: { corrected: 0, busy: 0 } }, 'the 3 open ones counted off');
      t.equal(connsOf(REMOTE.id).tc, 0, 'count 0');
    });

    t.test("the recount sets a drifted count right and removes a gone backend's entry", async (t) => {
      reset();
      const gc = gcOf({ intervalMs: 0 });
      for (let i = 0; i < 2; i++) h.ingress(fromClient(c(40 + i), 40300 + i, 30700, TCP_SYN));
      counts.adjust(REMOTE.id, 'tc', 5, family); // drift: as if increments were counted whose flows the LRU evicted
      counts.adjust(LOCAL.id, 'sock', 4, family);
      counts.adjust(LOCAL.id, 'tc', -2, family); // and decrements without increments (a decrement never creates an entry: after the sock one)
      counts.adjust(999, 'tc', 3, family); // a backend that is not in the backends map
      t.same([connsOf(REMOTE.id).tc, connsOf(LOCAL.id).tc, connsOf(999).tc], [7, -2, 3], 'drifted');
      const run = gc.runOnce();
      t.match(mine(run.conns), { collected: 0, tc: { corrected: 2, drift: 7 }, removed: 1 }, 'two counts set right, one entry removed');
      t.equal(mine(run.conns)!.sock, undefined, 'no socket recount without a SocketCounter');
      t.same(connsOf(REMOTE.id), { sock: 0, tc: 2 }, 'REMOTE: its 2 open flows');
      t.same(connsOf(LOCAL.id), { sock: 4, tc: 0 }, "LOCAL: no flow; its socket count is not the recount's");
      t.equal((family === 6 ? h.conns6 : h.conns).get(999), undefined, "the gone backend's entry is gone");
      t.match(mine(gc.runOnce().conns), { tc: { corrected: 0 }, removed: 0 }, 'a second pass finds nothing to correct');
    });
  });
}

t.test('svcmap_conns_adjust: an atomic add of either field; an unknown field is refused', async (t) => {
  reset();
  const REMOTE = FAMILIES[0]!.remote;
  counts.adjust(REMOTE.id, 'sock', 3);
  counts.adjust(REMOTE.id, 'sock', -1);
  counts.adjust(REMOTE.id, 'tc', 2);
  t.same(h.connsOf(REMOTE.id), { sock: 2, tc: 2 });
  const ctx = Buffer.alloc(connsAdjust.layout.size);
  connsAdjust.encode({ backend_id: REMOTE.id, field: 7, family: 4, delta: 1n }, ctx, 0);
  t.equal(progRunSyscall(h.object.programFd(CONNS_ADJUST_PROGRAM), ctx), -22, 'field 7: -EINVAL');
  connsAdjust.encode({ backend_id: REMOTE.id, field: CONNS_FIELD_SOCK, family: 5, delta: 1n }, ctx, 0);
  t.equal(progRunSyscall(h.object.programFd(CONNS_ADJUST_PROGRAM), ctx), -22, 'family 5: -EINVAL');
  t.same(h.connsOf(REMOTE.id), { sock: 2, tc: 2 }, 'and nothing changed');
  // Family 6: the same id in the IPv6 backends' map, a space of its own.
  counts.adjust(REMOTE.id, 'sock', 5, 6);
  t.same(h.conns6.get(REMOTE.id), { sock: 5n, tc: 0n }, 'family 6 adds to svcmap_conns6');
  t.same(h.connsOf(REMOTE.id), { sock: 2, tc: 2 }, 'and leaves the IPv4 count alone');
  h.conns6.delete(REMOTE.id);
});
