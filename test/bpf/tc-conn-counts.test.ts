// Live connection counts at tc (svcmap_be_conns, field tc), through
// BPF_PROG_TEST_RUN on a loaded tc object (nothing attached): a new flow to
// an lc frontend counts for its backend once its forward conntrack entry
// exists (a flow to a random frontend does not count at all); an RST or
// a FIN from each side stops it counting, once, whichever side is seen; a
// half-closed flow reused by a new SYN counts once; the GC takes an open
// flow it collects off the count; the recount in the same pass corrects a
// drifted count and removes the entry of a backend that is gone; the agent
// changes a count only through svcmap_conns_adjust (an atomic add).
import t from 'tap';
import { CONNS_ADJUST_PROGRAM, ConnCounts } from '../../src/agent/conn-counts.ts';
import { CtGc } from '../../src/agent/ct-gc.ts';
import { progRunSyscall } from '../../src/bpf/test-run.ts';
import { connsAdjust } from '../../src/maps/codecs.ts';
import { CONNS_FIELD_SOCK, CT_DIR_FWD, CT_F_COUNTED, LB_ALG_LC, MAP_BE_CONNS6, SVC_F_NODEPORT } from '../../src/maps/constants.ts';
import { backendConns6Map } from '../../src/maps/registry.ts';
import { TypedMap } from '../../src/maps/typed-map.ts';
import { TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, buildIpv4 } from './fixtures/packets.ts';
import { translated } from './fixtures/tc-expect.ts';
import { TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const REMOTE = { id: 71, addr: '10.244.2.71', port: 8080 };
const LOCAL = { id: 72, addr: '10.244.1.72', port: 8080, local: true };
const S = 1_000_000_000n;

const h = TcHarness.open({ ctMax: 512 });
t.teardown(() => h.close());
h.configure(NODE_IP);
h.addService({ addr: NODE_IP, port: 30700, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT, algorithm: LB_ALG_LC, backends: [REMOTE] });
h.addService({ addr: NODE_IP, port: 30701, proto: 'tcp', revNatId: 2, flags: SVC_F_NODEPORT, algorithm: LB_ALG_LC, backends: [LOCAL] });
// The same backend behind a frontend whose algorithm (random) does not read the counts.
h.addService({ addr: NODE_IP, port: 30702, proto: 'tcp', revNatId: 3, flags: SVC_F_NODEPORT, backends: [REMOTE] });

const counts = new ConnCounts({ conns: h.conns, backends: h.backends }, h.object.programFd(CONNS_ADJUST_PROGRAM));
const fromClient = (client: string, sport: number, dport: number, flags: number) =>
  buildIpv4({ saddr: client, daddr: NODE_IP, proto: 'tcp', sport, dport, tcpFlags: flags, payload: flags & TCP_SYN ? undefined : Buffer.from('x') });
/** A packet from the local backend to the client (DNAT only: it meets the reply entry at egress). */
const fromLocal = (client: string, sport: number, flags: number) =>
  buildIpv4({ saddr: LOCAL.addr, daddr: client, proto: 'tcp', sport: LOCAL.port, dport: sport, tcpFlags: flags, payload: Buffer.from('y') });

function reset(): void {
  h.clearCt();
  h.clearConns();
}

t.test('a new flow counts once; its other packets do not', async (t) => {
  reset();
  const syn = fromClient('203.0.113.1', 40000, 30700, TCP_SYN);
  translated(t, h.ingress(syn), syn, 'SYN');
  t.same(h.connsOf(REMOTE.id), { sock: 0, tc: 1 }, 'the SYN made the flow: 1');
  h.ingress(fromClient('203.0.113.1', 40000, 30700, TCP_ACK));
  h.ingress(fromClient('203.0.113.1', 40000, 30700, TCP_SYN)); // a retransmitted SYN
  t.same(h.connsOf(REMOTE.id), { sock: 0, tc: 1 }, 'an ACK and a retransmitted SYN of the same flow: still 1');
  for (let i = 1; i <= 4; i++) h.ingress(fromClient(`203.0.113.${10 + i}`, 40000 + i, 30700, TCP_SYN));
  t.same(h.connsOf(REMOTE.id), { sock: 0, tc: 5 }, 'four more flows: 5');
});

t.test('a flow to a random frontend is not counted, and its close takes nothing off', async (t) => {
  reset();
  h.ingress(fromClient('203.0.113.7', 40060, 30700, TCP_SYN));
  t.equal(h.connsOf(REMOTE.id).tc, 1, 'one flow through the lc frontend');
  for (let i = 0; i < 3; i++) h.ingress(fromClient('203.0.113.8', 40070 + i, 30702, TCP_SYN));
  t.equal(h.connsOf(REMOTE.id).tc, 1, 'three flows through the random one: not counted');
  const fwd = h.ctEntries().filter(([k]) => k.dir === CT_DIR_FWD);
  t.same(fwd.map(([k, v]) => [k.dport, (v.flags & CT_F_COUNTED) !== 0]).sort(), [[30700, true], [30702, false], [30702, false], [30702, false]],
    'only the lc flow\'s forward entry says CT_F_COUNTED');
  for (let i = 0; i < 3; i++) h.ingress(fromClient('203.0.113.8', 40070 + i, 30702, TCP_RST));
  t.equal(h.connsOf(REMOTE.id).tc, 1, 'their RSTs take nothing off the lc flow\'s count');
});

t.test('an RST from the client stops the flow counting, once', async (t) => {
  reset();
  h.ingress(fromClient('203.0.113.2', 40010, 30700, TCP_SYN));
  h.ingress(fromClient('203.0.113.2', 40010, 30700, TCP_RST));
  t.equal(h.connsOf(REMOTE.id).tc, 0, 'RST: 0');
  h.ingress(fromClient('203.0.113.2', 40010, 30700, TCP_RST | TCP_ACK));
  t.equal(h.connsOf(REMOTE.id).tc, 0, 'a second RST does not take it below 0');
});

t.test('a FIN from each side (the second one seen at egress, from the backend) stops it counting', async (t) => {
  reset();
  const c = '203.0.113.3';
  h.ingress(fromClient(c, 40020, 30701, TCP_SYN));
  t.equal(h.connsOf(LOCAL.id).tc, 1, 'open: 1');
  h.ingress(fromClient(c, 40020, 30701, TCP_FIN | TCP_ACK));
  t.equal(h.connsOf(LOCAL.id).tc, 1, 'half-closed by the client: still open, 1');
  h.egress(fromLocal(c, 40020, TCP_FIN | TCP_ACK));
  t.equal(h.connsOf(LOCAL.id).tc, 0, 'the backend\'s FIN closes it: 0');
  h.egress(fromLocal(c, 40020, TCP_ACK));
  h.ingress(fromClient(c, 40020, 30701, TCP_ACK));
  t.equal(h.connsOf(LOCAL.id).tc, 0, 'the last ACKs change nothing');
});

t.test('an RST from the backend (the reply entry) stops the forward entry counting', async (t) => {
  reset();
  const c = '203.0.113.4';
  h.ingress(fromClient(c, 40030, 30701, TCP_SYN));
  h.egress(fromLocal(c, 40030, TCP_RST));
  t.equal(h.connsOf(LOCAL.id).tc, 0, 'RST from the backend: 0');
});

t.test('a flow created closing (its first packet an RST) never counts', async (t) => {
  reset();
  h.ingress(fromClient('203.0.113.5', 40040, 30701, TCP_RST | TCP_ACK));
  t.equal(h.connsOf(LOCAL.id).tc, 0);
});

t.test('a half-closed flow whose port a new SYN reuses: the old flow stops counting, the new one counts', async (t) => {
  reset();
  const c = '203.0.113.6';
  h.ingress(fromClient(c, 40050, 30700, TCP_SYN));
  h.ingress(fromClient(c, 40050, 30700, TCP_FIN | TCP_ACK));
  t.equal(h.connsOf(REMOTE.id).tc, 1, 'half-closed: 1');
  const syn = fromClient(c, 40050, 30700, TCP_SYN);
  translated(t, h.ingress(syn), syn, 'the new SYN on the same port');
  t.equal(h.connsOf(REMOTE.id).tc, 1, 'old one forgotten (-1), new one made (+1): 1');
});

t.test('the GC takes the open flows it collects off the count, and not the closed ones again', async (t) => {
  reset();
  const clock = { ahead: 0n };
  const gc = new CtGc(h.ct, { now: () => process.hrtime.bigint() + clock.ahead, intervalMs: 0, conns: counts });
  for (let i = 0; i < 3; i++) h.ingress(fromClient(`203.0.113.${20 + i}`, 40100 + i, 30700, TCP_SYN));
  h.ingress(fromClient('203.0.113.30', 40200, 30700, TCP_SYN));
  h.ingress(fromClient('203.0.113.30', 40200, 30700, TCP_RST));
  t.equal(h.connsOf(REMOTE.id).tc, 3, '3 open, 1 closed');
  clock.ahead = 61n * S; // past the SYN lifetime (60 s) and the closing one (10 s)
  const run = gc.runOnce();
  t.match(run, { deleted: 8, conns: { collected: 3, tc: { corrected: 0, busy: 0 } } }, 'every flow collected, the 3 open ones counted off');
  t.equal(h.connsOf(REMOTE.id).tc, 0, 'count 0');
});

t.test('the recount sets a drifted count right and removes a gone backend\'s entry', async (t) => {
  reset();
  const gc = new CtGc(h.ct, { intervalMs: 0, conns: counts });
  for (let i = 0; i < 2; i++) h.ingress(fromClient(`203.0.113.${40 + i}`, 40300 + i, 30700, TCP_SYN));
  counts.adjust(REMOTE.id, 'tc', 5); // drift: as if increments were counted whose flows the LRU evicted
  counts.adjust(LOCAL.id, 'sock', 4);
  counts.adjust(LOCAL.id, 'tc', -2); // and decrements without increments (a decrement never creates an entry: after the sock one)
  counts.adjust(999, 'tc', 3); // a backend that is not in the backends map
  t.same([h.connsOf(REMOTE.id).tc, h.connsOf(LOCAL.id).tc, h.connsOf(999).tc], [7, -2, 3], 'drifted');
  const run = gc.runOnce();
  t.match(run.conns, { collected: 0, tc: { corrected: 2, drift: 7 }, removed: 1 }, 'two counts set right, one entry removed');
  t.equal(run.conns!.sock, undefined, 'no socket recount without a SocketCounter');
  t.same(h.connsOf(REMOTE.id), { sock: 0, tc: 2 }, 'REMOTE: its 2 open flows');
  t.same(h.connsOf(LOCAL.id), { sock: 4, tc: 0 }, 'LOCAL: no flow; its socket count is not the recount\'s');
  t.equal(h.conns.get(999), undefined, 'the gone backend\'s entry is gone');
  t.match(gc.runOnce().conns, { tc: { corrected: 0 }, removed: 0 }, 'a second pass finds nothing to correct');
});

t.test('svcmap_conns_adjust: an atomic add of either field; an unknown field is refused', async (t) => {
  reset();
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
  const conns6 = new TypedMap(backendConns6Map, h.object.map(MAP_BE_CONNS6));
  counts.adjust(REMOTE.id, 'sock', 5, 6);
  t.same(conns6.get(REMOTE.id), { sock: 5n, tc: 0n }, 'family 6 adds to svcmap_conns6');
  t.same(h.connsOf(REMOTE.id), { sock: 2, tc: 2 }, 'and leaves the IPv4 count alone');
  conns6.delete(REMOTE.id);
});
