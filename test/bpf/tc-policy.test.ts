// svcmap_tc_in / svcmap_tc_out on crafted packets: local backends and
// externalTrafficPolicy Local (DNAT only, the client's address kept, the
// source put back at egress), loadBalancerSourceRanges, and everything that
// must pass untouched.
import t from 'tap';
import { SVC_F_ETP_LOCAL, SVC_F_EXTERNALIP, SVC_F_LOADBALANCER, SVC_F_NODEPORT, SVC_F_SRC_RANGES } from '../../src/maps/constants.ts';
import { TCP_ACK, TCP_SYN, buildArp, buildIcmpEcho, buildIpv4, buildIpv6Tcp, parseIpv4 } from './fixtures/packets.ts';
import { CT_DIR_FWD, CT_DIR_REPLY_OUT, CT_F_LOCAL } from './fixtures/tc-codecs.ts';
import { translated, untouched } from './fixtures/tc-expect.ts';
import { TC_ACT_OK, TC_ACT_SHOT, TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const LB_IP = '198.51.100.200';
const EXT_IP = '198.51.100.201';
const CLIENT = '203.0.113.7';
const LOCAL = { id: 21, addr: '10.244.1.5', port: 8080, local: true };
const REMOTE = { id: 22, addr: '10.244.2.5', port: 8080 };

const h = TcHarness.open();
t.teardown(() => h.close());
h.configure(NODE_IP);
// NodePort, Cluster policy, one backend on this node.
h.addService({ addr: NODE_IP, port: 30100, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT, backends: [LOCAL] });
// NodePort, Local policy: the external entry holds only local backends.
h.addService({ addr: NODE_IP, port: 30200, proto: 'tcp', revNatId: 2, flags: SVC_F_NODEPORT | SVC_F_ETP_LOCAL, backends: [LOCAL] });
// NodePort, Local policy, no endpoint on this node.
h.addService({ addr: NODE_IP, port: 30300, proto: 'tcp', revNatId: 3, flags: SVC_F_NODEPORT | SVC_F_ETP_LOCAL, backends: [] });
// LoadBalancer with loadBalancerSourceRanges, remote backend.
h.addService({
  addr: LB_IP,
  port: 80,
  proto: 'tcp',
  revNatId: 4,
  flags: SVC_F_LOADBALANCER | SVC_F_SRC_RANGES,
  backends: [REMOTE],
  sourceRanges: ['203.0.113.0/28', '192.0.2.128/25'],
});
// Another frontend's ranges must not open this one.
h.addService({
  addr: LB_IP,
  port: 81,
  proto: 'tcp',
  revNatId: 5,
  flags: SVC_F_LOADBALANCER | SVC_F_SRC_RANGES,
  backends: [REMOTE],
  sourceRanges: ['203.0.113.96/27'],
});
// externalIP, Cluster policy.
h.addService({ addr: EXT_IP, port: 443, proto: 'tcp', revNatId: 6, flags: SVC_F_EXTERNALIP, backends: [REMOTE] });

const tcp = (saddr: string, daddr: string, sport: number, dport: number, flags = TCP_SYN) =>
  buildIpv4({
    saddr,
    daddr,
    proto: 'tcp',
    sport,
    dport,
    tcpFlags: flags,
    payload: flags === TCP_SYN ? undefined : Buffer.from('payload bytes'),
  });

t.test('a local backend: DNAT only, and the reply gets the frontend back at egress', async (t) => {
  h.clearCt();
  const input = tcp(CLIENT, NODE_IP, 40000, 30100);
  const out = translated(t, h.ingress(input), input, 'SYN');
  t.same([out.saddr, out.sport], [CLIENT, 40000], 'the client address and port are kept (no SNAT)');
  t.same([out.daddr, out.dport], [LOCAL.addr, LOCAL.port], 'DNAT to the local backend');

  const ct = h.ctEntries();
  t.equal(ct.length, 2);
  t.match(ct.find(([k]) => k.dir === CT_DIR_FWD)?.[1], {
    new_saddr: '0.0.0.0',
    new_sport: 0,
    new_daddr: LOCAL.addr,
    new_dport: LOCAL.port,
    flags: CT_F_LOCAL,
    backend_id: 21,
  });
  const rep = ct.find(([k]) => k.dir === CT_DIR_REPLY_OUT);
  t.match(rep?.[0], { saddr: LOCAL.addr, daddr: CLIENT, sport: LOCAL.port, dport: 40000, proto: 6 });
  t.match(rep?.[1], { new_saddr: NODE_IP, new_sport: 30100, new_daddr: '0.0.0.0', new_dport: 0, flags: CT_F_LOCAL });

  const reply = tcp(LOCAL.addr, CLIENT, LOCAL.port, 40000, TCP_SYN | TCP_ACK);
  const res = h.egress(reply);
  t.equal(res.retval, TC_ACT_OK, 'egress always hands the packet on');
  const back = translated(t, res, reply, 'egress reply');
  t.same([back.saddr, back.sport], [NODE_IP, 30100], 'source: the frontend');
  t.same([back.daddr, back.dport], [CLIENT, 40000], 'destination: still the client');

  untouched(t, h.ingress(reply), reply, 'the same reply at ingress (not a tracked direction there)');
});

t.test('externalTrafficPolicy Local keeps the client address', async (t) => {
  h.clearCt();
  const input = tcp(CLIENT, NODE_IP, 40001, 30200);
  const out = translated(t, h.ingress(input), input, 'SYN');
  t.same([out.saddr, out.sport, out.daddr, out.dport], [CLIENT, 40001, LOCAL.addr, LOCAL.port]);
});

t.test('externalTrafficPolicy Local without a local endpoint drops', async (t) => {
  h.clearCt();
  t.equal(h.ingress(tcp(CLIENT, NODE_IP, 40002, 30300)).retval, TC_ACT_SHOT);
  t.equal(h.ctEntries().length, 0, 'and remembers nothing');
});

t.test('loadBalancerSourceRanges: a source inside passes, one outside is dropped', async (t) => {
  h.clearCt();
  for (const client of ['203.0.113.7', '203.0.113.15', '192.0.2.200']) {
    const input = tcp(client, LB_IP, 40003, 80);
    const out = translated(t, h.ingress(input), input, `${client} (inside)`);
    t.same([out.daddr, out.dport, out.saddr], [REMOTE.addr, REMOTE.port, NODE_IP], `${client} reaches the backend through SNAT`);
  }
  const before = h.ctEntries().length;
  for (const client of ['203.0.113.16', '203.0.113.99', '192.0.2.127', '198.51.100.9']) {
    t.equal(h.ingress(tcp(client, LB_IP, 40003, 80)).retval, TC_ACT_SHOT, `${client} (outside) is dropped`);
  }
  t.equal(h.ctEntries().length, before, 'dropped sources leave no conntrack entries');
  t.equal(h.ingress(tcp('203.0.113.99', LB_IP, 40004, 81)).retval !== TC_ACT_SHOT, true, 'the other frontend admits its own range');
  t.equal(h.ingress(tcp('203.0.113.7', LB_IP, 40004, 81)).retval, TC_ACT_SHOT, 'and only its own');
});

t.test('an externalIP is a frontend like any other', async (t) => {
  h.clearCt();
  const input = tcp(CLIENT, EXT_IP, 40005, 443);
  const out = translated(t, h.ingress(input), input, 'SYN to the externalIP');
  t.same([out.daddr, out.dport, out.saddr], [REMOTE.addr, REMOTE.port, NODE_IP]);
  const reply = buildIpv4({
    saddr: REMOTE.addr,
    daddr: NODE_IP,
    proto: 'tcp',
    sport: REMOTE.port,
    dport: out.sport,
    tcpFlags: TCP_SYN | TCP_ACK,
  });
  const back = translated(t, h.ingress(reply), reply, 'reply');
  t.same([back.saddr, back.sport, back.daddr, back.dport], [EXT_IP, 443, CLIENT, 40005], 'the client sees the externalIP answer');
});

t.test('packets that are not for a frontend pass byte-identical', async (t) => {
  h.clearCt();
  const cases: Array<[string, Buffer]> = [
    ['an unknown port on the node', tcp(CLIENT, NODE_IP, 40000, 30101)],
    ['a non-service address', tcp(CLIENT, '198.51.100.99', 40000, 30100)],
    ['UDP to a TCP-only frontend', buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 40000, dport: 30100 })],
    ['a reply-shaped packet with no flow', tcp(REMOTE.addr, NODE_IP, 8080, 62000, TCP_SYN | TCP_ACK)],
    ['ARP', buildArp(CLIENT, NODE_IP)],
    ['IPv6', buildIpv6Tcp(30100)],
    ['ICMP to the node', buildIcmpEcho(CLIENT, NODE_IP)],
    [
      'a later fragment to a frontend, its first not seen',
      buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 40000, dport: 30100, fragOffset: 185 }),
    ],
  ];
  for (const [what, frame] of cases) {
    untouched(t, h.ingress(frame), frame, `ingress: ${what}`);
    untouched(t, h.egress(frame), frame, `egress: ${what}`);
  }
  // A frame cut short inside the TCP header: no partial rewrite.
  const cut = tcp(CLIENT, NODE_IP, 40000, 30100).subarray(0, 14 + 20 + 10);
  untouched(t, h.ingress(cut), cut, 'a truncated TCP header');
  // The IPv4 ethertype over a header that is not a valid IPv4 header.
  const v6inside = Buffer.from(tcp(CLIENT, NODE_IP, 40000, 30100));
  v6inside[14] = 0x65;
  untouched(t, h.ingress(v6inside), v6inside, 'IP version 6 behind the IPv4 ethertype');
  const shortIhl = Buffer.from(tcp(CLIENT, NODE_IP, 40000, 30100));
  shortIhl[14] = 0x44;
  untouched(t, h.ingress(shortIhl), shortIhl, 'an IPv4 header length below 20 bytes');
  t.equal(h.ctEntries().length, 0, 'none of them created conntrack entries');
});

t.test('egress leaves everything but tracked replies alone', async (t) => {
  h.clearCt();
  const frames = [
    tcp('10.244.1.5', CLIENT, 8080, 40000, TCP_ACK),
    tcp(NODE_IP, CLIENT, 22, 50000, TCP_ACK),
    buildIpv4({ saddr: NODE_IP, daddr: '10.244.2.5', proto: 'udp', sport: 61000, dport: 53 }),
  ];
  for (const f of frames) {
    const p = parseIpv4(f);
    untouched(t, h.egress(f), f, `${p.saddr}:${p.sport} -> ${p.daddr}:${p.dport}`);
  }
});
