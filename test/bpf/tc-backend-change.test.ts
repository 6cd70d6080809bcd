// Flows whose backend leaves the service (svcmap_tc_in, BPF_PROG_TEST_RUN):
// an established TCP connection keeps its backend, a new connection on a
// reused client port and UDP datagrams move to a backend that exists, and
// the old flow's reply entry (with its SNAT port) is released.
import t from 'tap';
import { IPPROTO_TCP, IPPROTO_UDP, SVC_F_NODEPORT, SVC_SCOPE_EXT } from '../../src/maps/constants.ts';
import { TCP_ACK, TCP_SYN, buildIpv4, parseIpv4 } from './fixtures/packets.ts';
import { CT_DIR_FWD, CT_DIR_REPLY_IN } from './fixtures/tc-codecs.ts';
import { translated } from './fixtures/tc-expect.ts';
import { TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const CLIENT = '203.0.113.7';
const A = { id: 41, addr: '10.244.2.41', port: 8080 };
const B = { id: 42, addr: '10.244.2.42', port: 8080 };

const h = TcHarness.open();
t.teardown(() => h.close());
h.configure(NODE_IP);

/** What the agent does when endpoint A is replaced by B: new backend, slot, then A's id freed. */
function replaceBackend(port: number, proto: number): void {
  h.backends.put(B.id, { addr: B.addr, port: B.port, proto, state: 0, flags: 0, zone: 0 });
  h.services.put(
    { addr: NODE_IP, port, slot: 1, proto, scope: SVC_SCOPE_EXT },
    { backend_id: B.id, rev_nat_id: 0, count: 0, flags: 0, algorithm: 0, affinity_timeout: 0 },
  );
  h.backends.delete(A.id);
}

const tcp = (sport: number, flags: number, seq = 1) =>
  buildIpv4({
    saddr: CLIENT,
    daddr: NODE_IP,
    proto: 'tcp',
    sport,
    dport: 30400,
    tcpFlags: flags,
    seq,
    payload: flags === TCP_SYN ? undefined : Buffer.from('x'),
  });

t.test('TCP: the connection keeps its backend; a new SYN on the same port does not', async (t) => {
  h.clearCt();
  h.addService({ addr: NODE_IP, port: 30400, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT, backends: [A] });
  const first = translated(t, h.ingress(tcp(40000, TCP_SYN)), tcp(40000, TCP_SYN), 'SYN');
  t.equal(first.daddr, A.addr);
  const retransmit = translated(t, h.ingress(tcp(40000, TCP_SYN)), tcp(40000, TCP_SYN), 'retransmitted SYN');
  t.same([retransmit.daddr, retransmit.sport], [A.addr, first.sport], 'a retransmitted SYN stays while the backend exists');

  replaceBackend(30400, IPPROTO_TCP);
  const data = translated(t, h.ingress(tcp(40000, TCP_ACK, 2)), tcp(40000, TCP_ACK, 2), 'data after the change');
  t.same([data.daddr, data.sport], [A.addr, first.sport], 'the established connection still goes to A');

  const again = translated(t, h.ingress(tcp(40000, TCP_SYN, 99)), tcp(40000, TCP_SYN, 99), 'new SYN on the reused port');
  t.equal(again.daddr, B.addr, 'a new connection goes to B');
  const ct = h.ctEntries();
  t.equal(ct.length, 2, "the old flow's entries were replaced, not added to");
  t.equal(ct.filter(([k, v]) => k.dir === CT_DIR_FWD && v.new_daddr === B.addr).length, 1);
  t.equal(ct.filter(([k]) => k.dir === CT_DIR_REPLY_IN && k.saddr === A.addr).length, 0, "A's reply entry (and its SNAT port) is released");
});

t.test('UDP: the next datagram after the backend left goes to a live one', async (t) => {
  h.clearCt();
  h.backends.put(A.id, { addr: A.addr, port: A.port, proto: IPPROTO_UDP, state: 0, flags: 0, zone: 0 });
  h.addService({ addr: NODE_IP, port: 30401, proto: 'udp', revNatId: 2, flags: SVC_F_NODEPORT, backends: [{ ...A, port: 53 }] });
  const dgram = (i: number) =>
    buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 40001, dport: 30401, payload: Buffer.from(`query ${i}`) });
  const first = parseIpv4(h.ingress(dgram(0)).packetOut);
  t.equal(first.daddr, A.addr);
  t.equal(parseIpv4(h.ingress(dgram(1)).packetOut).daddr, A.addr, 'sticky while A exists');

  h.backends.put(B.id, { addr: B.addr, port: 53, proto: IPPROTO_UDP, state: 0, flags: 0, zone: 0 });
  h.services.put(
    { addr: NODE_IP, port: 30401, slot: 1, proto: IPPROTO_UDP, scope: SVC_SCOPE_EXT },
    { backend_id: B.id, rev_nat_id: 0, count: 0, flags: 0, algorithm: 0, affinity_timeout: 0 },
  );
  h.backends.delete(A.id);
  const moved = translated(t, h.ingress(dgram(2)), dgram(2), 'datagram after A left');
  t.same([moved.daddr, moved.dport], [B.addr, 53]);
  t.equal(h.ctEntries().filter(([k]) => k.saddr === A.addr).length, 0, 'nothing of the flow to A is left');
  t.equal(h.ctEntries().length, 2);
});
