// svcmap_xdp on the tc tests' crafted packets (BPF_PROG_TEST_RUN, nothing
// attached), IPv4 and IPv6: a NodePort with a remote backend is DNATed and
// SNATed and redirected back out (the FIB sends everything out of lo here,
// the device it came in on) with both checksums right and the neighbour's
// MAC; the backend's reply is turned back into frontend -> client; source
// ranges and externalTrafficPolicy Local drop what tc drops, under hook xdp;
// what XDP leaves to tc (fragments, ICMP errors, an unresolved neighbour, a
// partial checksum, IPv6 extension headers) passes byte for byte, its flow's
// entries already made for tc; and every packet moves exactly one counter.
import { execFileSync } from 'node:child_process';
import t, { type Test } from 'tap';
import { SNAT_PORT_MAX as SNAT_MAX, SNAT_PORT_MIN as SNAT_MIN } from '../../src/agent/datapath/tc-datapath.ts';
import { SVC_F_ETP_LOCAL, SVC_F_LOADBALANCER, SVC_F_NODEPORT, SVC_F_SRC_RANGES } from '../../src/maps/constants.ts';
import {
  ICMP_DEST_UNREACH,
  TCP_ACK,
  TCP_SYN,
  buildIcmpError,
  buildIpv4,
  fragmentIpv4,
  parseIpv4,
  withPartialChecksum,
} from './fixtures/packets.ts';
import { ICMPV6_PKT_TOOBIG, buildIcmpv6Error, buildIpv6, buildIpv6WithHopByHop, tcp6 } from './fixtures/packets6.ts';
import { LO_IFINDEX, privateNetIp } from './fixtures/private-net.ts';
import { CT_DIR_FWD, CT_DIR_REPLY_IN, CT_F_SNAT } from './fixtures/tc-codecs.ts';
import { translated, translated6, untouched } from './fixtures/tc-expect.ts';
import { TcHarness, XDP_DROP, XDP_PASS, XDP_REDIRECT } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const NODE6 = 'fd00:198:51:100::1';
const CLIENT = '203.0.113.7';
const CLIENT6 = 'fd00:203:0:113::7';
const REMOTE = { id: 11, addr: '10.244.2.5', port: 8080 };
const REMOTE6 = { id: 11, addr: 'fd00:10:244:2::5', port: 8080 };
const LOCAL = { id: 21, addr: '10.244.1.5', port: 8080, local: true };
/** Behind device xdpt1: a backend whose neighbour is known, one whose is not (the FIB lookup says NO_NEIGH). */
const BEHIND_D1 = { id: 41, addr: '10.244.8.8', port: 8080 };
const UNRESOLVED = { id: 31, addr: '10.244.9.9', port: 8080 };
/** Behind device xdpt2, which takes no XDP frames. */
const BEHIND_D2 = { id: 51, addr: '10.244.7.7', port: 8080 };
const MAC = (last: number) => Buffer.from([2, 0, 0, 0, 0, last]);

const h = TcHarness.open({ program: 'xdp', ctMax: 512 });
t.teardown(() => h.close());
h.configure(NODE_IP, SNAT_MIN, SNAT_MAX);
h.configure6(NODE6);

const mac = (b: Buffer) => [...b].map((x) => x.toString(16).padStart(2, '0')).join(':');
// XDP writes the MAC addresses itself, so the neighbours it forwards to must
// be known. IPv4's neighbours on lo are one entry (the kernel keys them all
// by 0.0.0.0 there); IPv6's are per address.
const LO_MAC = MAC(0x01);
privateNetIp('neigh', 'replace', CLIENT, 'lladdr', mac(LO_MAC), 'dev', 'lo', 'nud', 'permanent');
privateNetIp('-6', 'neigh', 'replace', REMOTE6.addr, 'lladdr', mac(MAC(0x16)), 'dev', 'lo', 'nud', 'permanent');
privateNetIp('-6', 'neigh', 'replace', CLIENT6, 'lladdr', mac(MAC(0x17)), 'dev', 'lo', 'nud', 'permanent');
// Two more devices of this namespace (veths, their peers here too): xdpt1
// takes XDP frames (in svcmap_xdp_tx), xdpt2 does not.
// Behind xdpt1: a backend with a known neighbour and one without.
const ifindexOf = (dev: string) =>
  (JSON.parse(execFileSync('ip', ['-j', 'link', 'show', dev], { encoding: 'utf8' })) as Array<{ ifindex: number }>)[0]!.ifindex;
for (const dev of ['xdpt1', 'xdpt2']) {
  privateNetIp('link', 'add', dev, 'type', 'veth', 'peer', 'name', `${dev}p`);
  privateNetIp('link', 'set', dev, 'up');
  privateNetIp('link', 'set', `${dev}p`, 'up');
}
privateNetIp('route', 'add', '10.244.8.0/24', 'dev', 'xdpt1');
privateNetIp('route', 'add', '10.244.9.0/24', 'dev', 'xdpt1');
privateNetIp('route', 'add', '10.244.7.0/24', 'dev', 'xdpt2');
privateNetIp('neigh', 'replace', BEHIND_D1.addr, 'lladdr', mac(MAC(0x81)), 'dev', 'xdpt1', 'nud', 'permanent');
privateNetIp('neigh', 'replace', BEHIND_D2.addr, 'lladdr', mac(MAC(0x71)), 'dev', 'xdpt2', 'nud', 'permanent');
const D1 = ifindexOf('xdpt1');
const D2 = ifindexOf('xdpt2');
for (const d of [D1, D2]) h.devAddr.put(d, { addr: NODE_IP });
const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
};
// The devices XDP may send by: lo (everything here is routed out of
// it) and xdpt1, as the agent lists the devices it runs XDP on.
for (const d of [LO_IFINDEX, D1]) h.object.map('svcmap_xdp_tx').update(u32(d), u32(d));

h.addService({ addr: NODE_IP, port: 30080, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT, backends: [REMOTE] });
h.addService({ addr: NODE_IP, port: 30081, proto: 'udp', revNatId: 2, flags: SVC_F_NODEPORT, backends: [{ ...REMOTE, id: 12 }] });
h.addService({ addr: NODE_IP, port: 30082, proto: 'tcp', revNatId: 3, flags: SVC_F_NODEPORT | SVC_F_ETP_LOCAL, backends: [LOCAL] });
h.addService({ addr: NODE_IP, port: 30083, proto: 'tcp', revNatId: 4, flags: SVC_F_NODEPORT | SVC_F_ETP_LOCAL, backends: [] });
h.addService({ addr: NODE_IP, port: 30084, proto: 'tcp', revNatId: 5, flags: SVC_F_NODEPORT, backends: [UNRESOLVED] });
h.addService({ addr: NODE_IP, port: 30085, proto: 'tcp', revNatId: 9, flags: SVC_F_NODEPORT, backends: [BEHIND_D1] });
h.addService({ addr: NODE_IP, port: 30086, proto: 'tcp', revNatId: 10, flags: SVC_F_NODEPORT, backends: [BEHIND_D2] });
h.addService({
  addr: '198.51.100.200',
  port: 80,
  proto: 'tcp',
  revNatId: 6,
  flags: SVC_F_LOADBALANCER | SVC_F_SRC_RANGES,
  backends: [{ ...REMOTE, id: 13 }],
  sourceRanges: ['203.0.113.0/24'],
});
h.addService6({ addr: NODE6, port: 30080, proto: 'tcp', revNatId: 7, flags: SVC_F_NODEPORT, backends: [REMOTE6] });
h.addService6({ addr: NODE6, port: 30081, proto: 'udp', revNatId: 8, flags: SVC_F_NODEPORT, backends: [{ ...REMOTE6, id: 12 }] });

const tcp4 = (saddr: string, daddr: string, sport: number, dport: number, flags = TCP_SYN, payload?: Buffer) =>
  buildIpv4({ saddr, daddr, proto: 'tcp', sport, dport, tcpFlags: flags, seq: 7777, ttl: 61, ...(payload ? { payload } : {}) });

/** Runs one packet through svcmap_xdp; checks it moved exactly one counter, by one, under hook xdp; returns that reason. */
function one(t: Test, what: string, input: Buffer, want: number): { reason: string; res: ReturnType<typeof h.ingress> } {
  let res: ReturnType<typeof h.ingress> | undefined;
  const counter = h.countedOnce(t, what, () => (res = h.ingress(input)).retval, want);
  t.match(counter, /^xdp\//, `${what}: counted under hook xdp`);
  return { reason: counter.replace(/^xdp\//, ''), res: res! };
}

t.test('IPv4: a SYN to a NodePort with a remote backend is DNATed, SNATed and sent back out; its reply reversed', async (t) => {
  h.clearCt();
  const input = tcp4(CLIENT, NODE_IP, 40000, 30080, TCP_SYN, Buffer.from('hello'));
  const first = one(t, 'SYN', input, XDP_REDIRECT);
  t.equal(first.reason, 'translated');
  const out = translated(t, first.res, input, 'SYN', { dmac: LO_MAC });
  t.same([out.daddr, out.dport, out.saddr], [REMOTE.addr, REMOTE.port, NODE_IP], 'to the backend, from the node');
  t.ok(out.sport >= SNAT_MIN && out.sport <= SNAT_MAX, `source port ${out.sport} from the SNAT range`);
  const ct = h.ctEntries();
  t.match(ct.find(([k]) => k.dir === CT_DIR_FWD)?.[1], {
    new_daddr: REMOTE.addr,
    new_saddr: NODE_IP,
    new_sport: out.sport,
    flags: CT_F_SNAT,
  });
  t.match(ct.find(([k]) => k.dir === CT_DIR_REPLY_IN)?.[0], { saddr: REMOTE.addr, daddr: NODE_IP, dport: out.sport });

  const reply = tcp4(REMOTE.addr, NODE_IP, REMOTE.port, out.sport, TCP_SYN | TCP_ACK, Buffer.from('from the backend'));
  const second = one(t, 'SYN-ACK', reply, XDP_REDIRECT);
  t.equal(second.reason, 'reply_translated');
  const back = translated(t, second.res, reply, 'SYN-ACK', { dmac: LO_MAC });
  t.same([back.saddr, back.sport, back.daddr, back.dport], [NODE_IP, 30080, CLIENT, 40000], 'from the frontend to the client');

  const next = tcp4(CLIENT, NODE_IP, 40000, 30080, TCP_ACK, Buffer.from('more'));
  const again = translated(t, one(t, 'ACK', next, XDP_REDIRECT).res, next, 'ACK', { dmac: LO_MAC });
  t.same([again.saddr, again.sport, again.daddr], [out.saddr, out.sport, out.daddr], 'a later packet: the same translation');
  t.equal(h.ctEntries().length, 2, 'no entry per later packet');
});

t.test('IPv4 UDP: the checksum is right after DNAT and SNAT, and a zero ("none") checksum stays zero', async (t) => {
  h.clearCt();
  const input = buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 41000, dport: 30081, payload: Buffer.from('datagram') });
  const out = translated(t, one(t, 'datagram', input, XDP_REDIRECT).res, input, 'datagram', { dmac: LO_MAC });
  t.same([out.daddr, out.dport, out.saddr], [REMOTE.addr, REMOTE.port, NODE_IP]);
  const bare = buildIpv4({
    saddr: CLIENT,
    daddr: NODE_IP,
    proto: 'udp',
    sport: 41001,
    dport: 30081,
    udpNoChecksum: true,
    payload: Buffer.from('x'),
  });
  const nocsum = translated(t, one(t, 'datagram without checksum', bare, XDP_REDIRECT).res, bare, 'no checksum', { dmac: LO_MAC });
  t.equal(nocsum.l4Checksum, 0, 'the UDP checksum field stays 0');
});

t.test('IPv6: DNAT and SNAT to the device address, the reply reversed, UDP checksums right', async (t) => {
  h.clearCt();
  const input = tcp6(CLIENT6, NODE6, 40000, 30080, TCP_SYN, Buffer.from('hello'));
  const first = one(t, 'SYN', input, XDP_REDIRECT);
  t.equal(first.reason, 'translated');
  const out = translated6(t, first.res, input, 'SYN', { dmac: MAC(0x16) });
  t.same([out.daddr, out.dport, out.saddr], [REMOTE6.addr, REMOTE6.port, NODE6]);
  const reply = tcp6(REMOTE6.addr, NODE6, REMOTE6.port, out.sport, TCP_SYN | TCP_ACK);
  const second = one(t, 'SYN-ACK', reply, XDP_REDIRECT);
  t.equal(second.reason, 'reply_translated');
  const back = translated6(t, second.res, reply, 'SYN-ACK', { dmac: MAC(0x17) });
  t.same([back.saddr, back.sport, back.daddr, back.dport], [NODE6, 30080, CLIENT6, 40000]);
  t.equal(h.ct6Entries().length, 2, 'one forward and one reply entry in svcmap_ct6');

  const dgram = buildIpv6({ saddr: CLIENT6, daddr: NODE6, proto: 'udp', sport: 41000, dport: 30081, payload: Buffer.from('datagram') });
  const u = translated6(t, one(t, 'datagram', dgram, XDP_REDIRECT).res, dgram, 'datagram', { dmac: MAC(0x16) });
  t.same([u.daddr, u.saddr], [REMOTE6.addr, NODE6]);
});

t.test('a backend behind another device: redirected there when it takes XDP frames, else left to tc', async (t) => {
  h.clearCt();
  const input = tcp4(CLIENT, NODE_IP, 40040, 30085);
  const r = one(t, 'SYN to a backend behind xdpt1', input, XDP_REDIRECT);
  t.equal(r.reason, 'translated');
  const out = translated(t, r.res, input, 'SYN', { dmac: MAC(0x81) });
  t.same([out.daddr, out.saddr], [BEHIND_D1.addr, NODE_IP]);
  const other = tcp4(CLIENT, NODE_IP, 40041, 30086);
  const p = one(t, 'SYN to a backend behind xdpt2 (not in svcmap_xdp_tx)', other, XDP_PASS);
  t.equal(p.reason, 'passed_to_tc');
  untouched(t, p.res, other, 'xdpt2', true);
  // Back out of the device it came in on, but that device is not in svcmap_xdp_tx either.
  const tx = h.object.map('svcmap_xdp_tx');
  tx.delete(u32(LO_IFINDEX));
  try {
    const back = tcp4(CLIENT, NODE_IP, 40042, 30080);
    const q = one(t, 'SYN whose route is back out of lo, lo not in svcmap_xdp_tx', back, XDP_PASS);
    t.equal(q.reason, 'passed_to_tc');
    untouched(t, q.res, back, 'lo not listed', true);
  } finally {
    tx.update(u32(LO_IFINDEX), u32(LO_IFINDEX));
  }
});

t.test('externalTrafficPolicy Local: the local backend keeps the client address; none local drops', async (t) => {
  h.clearCt();
  const input = tcp4(CLIENT, NODE_IP, 40010, 30082);
  const out = translated(t, one(t, 'SYN to the local backend', input, XDP_REDIRECT).res, input, 'SYN', { dmac: LO_MAC });
  t.same([out.saddr, out.sport, out.daddr, out.dport], [CLIENT, 40010, LOCAL.addr, LOCAL.port], 'DNAT only: the client keeps its address');
  const none = tcp4(CLIENT, NODE_IP, 40011, 30083);
  const dropped = one(t, 'SYN, no local endpoint', none, XDP_DROP);
  t.equal(dropped.reason, 'no_local_endpoint');
});

t.test('loadBalancerSourceRanges: a client outside is dropped, one inside translated', async (t) => {
  h.clearCt();
  const outside = tcp4('192.0.2.9', '198.51.100.200', 40020, 80);
  t.equal(one(t, 'SYN from outside the ranges', outside, XDP_DROP).reason, 'source_denied');
  const inside = tcp4(CLIENT, '198.51.100.200', 40021, 80);
  const out = translated(t, one(t, 'SYN from inside', inside, XDP_REDIRECT).res, inside, 'SYN from inside', { dmac: LO_MAC });
  t.equal(out.daddr, REMOTE.addr);
});

t.test('what XDP leaves to tc passes byte for byte, counted as passed_to_tc (or as tc counts it)', async (t) => {
  h.clearCt();
  // An unresolved neighbour: the flow is made (tc finds it and translates by it), the packet passes untouched.
  const syn = tcp4(CLIENT, NODE_IP, 40030, 30084);
  const unresolved = one(t, 'SYN to a backend with no known neighbour', syn, XDP_PASS);
  t.equal(unresolved.reason, 'passed_to_tc');
  untouched(t, unresolved.res, syn, 'unresolved neighbour', true);
  t.match(
    h.ctEntries().find(([k]) => k.dir === CT_DIR_FWD && k.sport === 40030)?.[1],
    { new_daddr: UNRESOLVED.addr, flags: CT_F_SNAT },
    "the flow's entry is there for tc",
  );

  // A checksum a local socket left partial (CHECKSUM_PARTIAL through a veth): only tc can rewrite it right.
  for (const [what, frame] of [
    ['IPv4 TCP', tcp4(CLIENT, NODE_IP, 40031, 30080)],
    ['IPv4 UDP', buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 40032, dport: 30081, payload: Buffer.from('abc') })],
    ['IPv6 TCP', tcp6(CLIENT6, NODE6, 40033, 30080)],
  ] as const) {
    const partial = withPartialChecksum(frame);
    const r = one(t, `${what} with a partial checksum`, partial, XDP_PASS);
    t.equal(r.reason, 'passed_to_tc', `${what}: passed to tc`);
    untouched(t, r.res, partial, `${what} partial checksum`, true);
  }

  // IPv4 fragments, first and later: tc keeps a datagram's fragments together (frag.h).
  const big = buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 40034, dport: 30081, payload: Buffer.alloc(3000, 7) });
  for (const [i, frag] of fragmentIpv4(big, 1480).entries()) {
    const r = one(t, `fragment ${i}`, frag, XDP_PASS);
    t.equal(r.reason, 'passed_to_tc', `fragment ${i}: passed to tc`);
    untouched(t, r.res, frag, `fragment ${i}`, true);
  }

  // ICMP errors about a translated flow: tc translates them back (icmp.h).
  const flow = tcp4(CLIENT, NODE_IP, 40035, 30080);
  const fwd = parseIpv4(one(t, 'SYN', flow, XDP_REDIRECT).res.packetOut);
  const about = tcp4(fwd.saddr, fwd.daddr, fwd.sport, fwd.dport);
  const icmp = buildIcmpError({ saddr: '10.244.2.1', daddr: NODE_IP, type: ICMP_DEST_UNREACH, code: 4, mtu: 1400, about, quoteL4Bytes: 8 });
  const e = one(t, 'ICMP fragmentation needed about the flow', icmp, XDP_PASS);
  t.equal(e.reason, 'passed_to_tc');
  untouched(t, e.res, icmp, 'ICMP error', true);
  const icmp6 = buildIcmpv6Error({
    saddr: 'fd00:10:244:2::1',
    daddr: NODE6,
    type: ICMPV6_PKT_TOOBIG,
    code: 0,
    mtu: 1280,
    about: tcp6(NODE6, REMOTE6.addr, 61000, 8080),
  });
  t.equal(one(t, 'ICMPv6 packet too big', icmp6, XDP_PASS).reason, 'passed_to_tc');

  // IPv6 extension headers: tc passes them too, and XDP counts them as tc does.
  const hbh = buildIpv6WithHopByHop({ saddr: CLIENT6, daddr: NODE6, sport: 40036, dport: 30080 });
  const x = one(t, 'IPv6 with a hop-by-hop header', hbh, XDP_PASS);
  t.equal(x.reason, 'ipv6_ext_header');
  untouched(t, x.res, hbh, 'extension header', true);

  // Not for a frontend.
  const other = tcp4(CLIENT, NODE_IP, 40037, 22);
  const o = one(t, 'SYN to port 22', other, XDP_PASS);
  t.equal(o.reason, 'passed');
  untouched(t, o.res, other, 'not a service', true);
});

t.test('the counters add up to the packets sent', async (t) => {
  h.clearCt();
  const frames = [
    tcp4(CLIENT, NODE_IP, 40100, 30080),
    tcp4(CLIENT, NODE_IP, 40101, 30083),
    tcp4('192.0.2.9', '198.51.100.200', 40102, 80),
    withPartialChecksum(tcp4(CLIENT, NODE_IP, 40103, 30080)),
    tcp6(CLIENT6, NODE6, 40104, 30080),
    tcp4(CLIENT, NODE_IP, 40105, 9),
  ];
  const moved = h.countsOf(() => {
    for (const f of frames) h.ingress(f);
  });
  t.same(
    Object.keys(moved).filter((k) => !k.startsWith('xdp/')),
    [],
    'only hook xdp counted',
  );
  t.equal(
    Object.values(moved).reduce((a, b) => a + b, 0),
    frames.length,
    `one count per packet (${JSON.stringify(moved)})`,
  );
});
