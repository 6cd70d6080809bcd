// The tc programs' counters (svcmap_metrics, enum dp_reason): every packet
// is counted exactly once, at its hook, under the reason for what became of
// it, and every drop has a reason of its own. Each reason is provoked here
// on crafted packets (BPF_PROG_TEST_RUN) and read back the way the agent
// reads it (readDatapathCounters: summed over the CPUs). The FIB outcomes
// (translated and forwarded, or left to the stack for want of a route, for
// the MTU, for the TTL) depend on routes and are counted in the private
// namespace of tc-redirect.test.ts.
import t, { type Test } from 'tap';
import { SVC_F_ETP_LOCAL, SVC_F_LOADBALANCER, SVC_F_NODEPORT, SVC_F_SRC_RANGES } from '../../src/maps/constants.ts';
import { TCP_ACK, TCP_SYN, buildArp, buildIcmpEcho, buildIpv4, buildIpv6Tcp, parseIpv4 } from './fixtures/packets.ts';
import { LO_IFINDEX, privateNetIp } from './fixtures/private-net.ts';
import { TC_ACT_OK, TC_ACT_REDIRECT, TC_ACT_SHOT, TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const LB_IP = '198.51.100.200';
const CLIENT = '203.0.113.7';
const LOCAL = { id: 1, addr: '10.244.1.5', port: 8080, local: true };
const REMOTE = { id: 2, addr: '10.244.2.5', port: 8080 };

const h = TcHarness.open({ ctMax: 256 });
t.teardown(() => h.close());
h.configure(NODE_IP);
h.addService({ addr: NODE_IP, port: 30100, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT, backends: [LOCAL] });
h.addService({ addr: NODE_IP, port: 30200, proto: 'tcp', revNatId: 2, flags: SVC_F_NODEPORT, backends: [REMOTE] });
h.addService({ addr: NODE_IP, port: 30300, proto: 'tcp', revNatId: 3, flags: SVC_F_NODEPORT | SVC_F_ETP_LOCAL, backends: [] });
h.addService({ addr: NODE_IP, port: 30400, proto: 'tcp', revNatId: 4, flags: SVC_F_NODEPORT, backends: [] });
h.addService({
  addr: LB_IP,
  port: 80,
  proto: 'tcp',
  revNatId: 5,
  flags: SVC_F_LOADBALANCER | SVC_F_SRC_RANGES,
  backends: [REMOTE],
  sourceRanges: ['203.0.113.0/28'],
});
// A slot whose backend id is not in the backends map (a reader in the middle of a removal).
h.addService({
  addr: NODE_IP,
  port: 30500,
  proto: 'tcp',
  revNatId: 6,
  flags: SVC_F_NODEPORT,
  backends: [{ id: 99, addr: '10.244.9.9', port: 8080 }],
});
h.backends.delete(99);
// A remote backend the FIB (the harness's private namespace) cannot reach.
privateNetIp('route', 'add', 'unreachable', '10.251.0.0/16');
h.addService({
  addr: NODE_IP,
  port: 30600,
  proto: 'tcp',
  revNatId: 7,
  flags: SVC_F_NODEPORT,
  backends: [{ id: 7, addr: '10.251.0.5', port: 8080 }],
});

const tcp = (saddr: string, daddr: string, sport: number, dport: number, flags = TCP_SYN) =>
  buildIpv4({ saddr, daddr, proto: 'tcp', sport, dport, tcpFlags: flags });

/** A translated packet counts as translated when forwarded, or as left to the stack. */
const TRANSLATED_INGRESS = ['tc_ingress/translated', 'tc_ingress/to_stack_no_route', 'tc_ingress/to_stack_mtu', 'tc_ingress/to_stack_ttl'];

/** Runs one packet and checks it moved exactly one counter, by one; returns that counter. */
const one = (t: Test, what: string, run: () => number, want: number | number[]) => h.countedOnce(t, what, run, want);

const ingress = (f: Buffer) => () => h.ingress(f).retval;
const egress = (f: Buffer) => () => h.egress(f).retval;

t.test('packets handed on untouched count as passed, other protocol, malformed or fragment', async (t) => {
  h.clearCt();
  t.equal(one(t, 'unknown port', ingress(tcp(CLIENT, NODE_IP, 40000, 30999)), TC_ACT_OK), 'tc_ingress/passed');
  t.equal(one(t, 'egress, no flow', egress(tcp(NODE_IP, CLIENT, 22, 50000, TCP_ACK)), TC_ACT_OK), 'tc_egress/passed');
  t.equal(
    one(t, 'IPv6 to no frontend', ingress(buildIpv6Tcp(30100)), TC_ACT_OK),
    'tc_ingress/passed',
    'IPv6 is looked up in the IPv6 maps',
  );
  for (const [what, f] of [
    ['ARP', buildArp(CLIENT, NODE_IP)],
    ['ICMP echo', buildIcmpEcho(CLIENT, NODE_IP)],
  ] as const) {
    t.equal(one(t, what, ingress(f), TC_ACT_OK), 'tc_ingress/other_protocol', `${what}: other_protocol at ingress`);
    t.equal(one(t, what, egress(f), TC_ACT_OK), 'tc_egress/other_protocol', `${what}: other_protocol at egress`);
  }
  const cut = tcp(CLIENT, NODE_IP, 40000, 30100).subarray(0, 14 + 20 + 10);
  t.equal(one(t, 'truncated TCP header', ingress(cut), TC_ACT_OK), 'tc_ingress/malformed');
  const shortIhl = Buffer.from(tcp(CLIENT, NODE_IP, 40000, 30100));
  shortIhl[14] = 0x44;
  t.equal(one(t, 'IHL below 5', ingress(shortIhl), TC_ACT_OK), 'tc_ingress/malformed');
  const later = buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 40000, dport: 30100, fragOffset: 185 });
  t.equal(one(t, 'later fragment', ingress(later), TC_ACT_OK), 'tc_ingress/fragment');
  t.equal(h.ctEntries().length, 0, 'none of them made conntrack entries');
});

t.test('translated packets and replies', async (t) => {
  h.clearCt();
  // Local backend: DNAT only; the reply is translated at egress.
  t.ok(
    TRANSLATED_INGRESS.includes(
      one(t, 'SYN to a local backend', ingress(tcp(CLIENT, NODE_IP, 40001, 30100)), [TC_ACT_OK, TC_ACT_REDIRECT]),
    ),
    'counted as translated',
  );
  t.equal(
    one(t, 'reply at egress', egress(tcp(LOCAL.addr, CLIENT, LOCAL.port, 40001, TCP_SYN | TCP_ACK)), TC_ACT_OK),
    'tc_egress/reply_translated',
  );
  // Remote backend: SNAT; the reply comes back at ingress.
  const fwd = h.ingress(tcp(CLIENT, NODE_IP, 40002, 30200));
  const out = parseIpv4(fwd.packetOut);
  const reply = tcp(REMOTE.addr, NODE_IP, REMOTE.port, out.sport, TCP_SYN | TCP_ACK);
  const c = one(t, 'reply to the SNAT port', ingress(reply), [TC_ACT_OK, TC_ACT_REDIRECT]);
  t.ok(
    ['tc_ingress/reply_translated', ...TRANSLATED_INGRESS.slice(1)].includes(c),
    `the reply counts as reply_translated or left to the stack (${c})`,
  );
  t.ok(
    TRANSLATED_INGRESS.includes(
      one(t, 'later packet of the flow', ingress(tcp(CLIENT, NODE_IP, 40002, 30200, TCP_ACK)), [TC_ACT_OK, TC_ACT_REDIRECT]),
    ),
  );
});

t.test('every drop has its own reason', async (t) => {
  h.clearCt();
  t.equal(one(t, 'ETP Local, no local endpoint', ingress(tcp(CLIENT, NODE_IP, 40010, 30300)), TC_ACT_SHOT), 'tc_ingress/no_local_endpoint');
  t.equal(one(t, 'no endpoints at all', ingress(tcp(CLIENT, NODE_IP, 40011, 30400)), TC_ACT_SHOT), 'tc_ingress/no_backend');
  t.equal(one(t, "the slot's backend is gone", ingress(tcp(CLIENT, NODE_IP, 40012, 30500)), TC_ACT_SHOT), 'tc_ingress/no_backend');
  t.equal(one(t, 'outside the source ranges', ingress(tcp('203.0.113.99', LB_IP, 40013, 80)), TC_ACT_SHOT), 'tc_ingress/source_denied');

  // One SNAT port only: the first flow takes it, the second finds none.
  h.configure(NODE_IP, 61000, 61000);
  t.teardown(() => h.configure(NODE_IP));
  t.ok(
    TRANSLATED_INGRESS.includes(
      one(t, 'first flow, the one port', ingress(tcp(CLIENT, NODE_IP, 40014, 30200)), [TC_ACT_OK, TC_ACT_REDIRECT]),
    ),
  );
  t.equal(one(t, 'second flow, no port left', ingress(tcp(CLIENT, NODE_IP, 40015, 30200)), TC_ACT_SHOT), 'tc_ingress/snat_ports_exhausted');

  // The egress device (lo here) has no address to SNAT to.
  h.devAddr.delete(LO_IFINDEX);
  t.equal(
    one(t, 'SNAT, the egress device has no address', ingress(tcp(CLIENT, NODE_IP, 40016, 30200)), TC_ACT_SHOT),
    'tc_ingress/no_snat_address',
  );
  h.configure(NODE_IP);
  t.equal(one(t, 'SNAT, no route to the backend', ingress(tcp(CLIENT, NODE_IP, 40017, 30600)), TC_ACT_SHOT), 'tc_ingress/snat_no_route');
  t.same(
    h.ctEntries().filter(([k]) => k.sport === 40016 || k.sport === 40017),
    [],
    'neither left a conntrack entry',
  );
});
