// Direct server return (SVC_F_DSR) on crafted packets (BPF_PROG_TEST_RUN,
// nothing attached), both families, both nodes' parts:
//  - the ingress node: a new TCP flow to a DSR frontend with a remote
//    backend is DNATed only (the client's address kept), its SYN carries
//    the frontend (an IPv4 option / an IPv6 Destination Options header),
//    its later packets do not, and no reply entry is made; every UDP
//    datagram carries it; a UDP frontend without the flag (hybrid) is still
//    SNATed; at XDP such a first packet is left to tc;
//  - the backend's node: the option is checked against the frontends with
//    the flag (also another node's NodePort address, through the wildcard
//    entry), removed (the packet is then byte for byte the one without it),
//    recorded as a lone reply entry, and the backend's reply leaves with
//    the frontend as its source; an unknown frontend, a frontend without
//    the flag and a malformed option are dropped, counted.
// Checksums are verified from scratch by the fixtures (packets.ts, packets6.ts).
import t from 'tap';
import {
  CT_F_CLOSING,
  CT_F_DSR,
  CT_F_FIN_FWD,
  CT_F_FIN_REPLY,
  CT_F_SEEN_REPLY,
  SVC_F_DSR,
  SVC_F_NODEPORT,
  SVC_F_WILDCARD,
} from '../../src/maps/constants.ts';
import {
  ETH_HLEN,
  TCP_ACK,
  TCP_FIN,
  TCP_SYN,
  buildIpv4,
  computeL4Checksum,
  ipv4HeaderValid,
  l4ChecksumValid,
  parseIpv4,
} from './fixtures/packets.ts';
import { IP6_HLEN, buildIpv6, computeL4Checksum6, l4Checksum6Valid, parseIpv6, tcp6 } from './fixtures/packets6.ts';
import { CT_DIR_FWD, CT_DIR_REPLY_OUT, CT_F_LOCAL } from './fixtures/tc-codecs.ts';
import { translated, translated6 } from './fixtures/tc-expect.ts';
import { TC_ACT_OK, TC_ACT_REDIRECT, TC_ACT_SHOT, TcHarness, XDP_PASS } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const OTHER_NODE = '198.51.100.2';
const CLIENT = '203.0.113.7';
const REMOTE = { id: 11, addr: '10.244.2.5', port: 8080 };
const LOCAL = { id: 21, addr: '10.244.1.5', port: 8080, local: true };
const NODE6 = 'fd00:198:51:100::1';
const OTHER6 = 'fd00:198:51:100::2';
const CLIENT6 = 'fd00:203:0:113::7';
const REMOTE6 = { id: 11, addr: 'fd00:10:244:2::5', port: 8080 };
const LOCAL6 = { id: 21, addr: 'fd00:10:244:1::5', port: 8080, local: true };

const DSR_OPT4_TYPE = 0x1a;
const DSR_OPT6_TYPE = 0x1b;
const IPPROTO_DSTOPTS = 60;

function ip4(a: string): Buffer {
  return Buffer.from(a.split('.').map(Number));
}
function ip6(a: string): Buffer {
  // Via the fixtures' own parser: an IPv6 frame's source address bytes.
  return Buffer.from(buildIpv6({ saddr: a, daddr: '::1', proto: 'udp', sport: 1, dport: 1 }).subarray(ETH_HLEN + 8, ETH_HLEN + 24));
}

/** The IPv4 option as the datapath writes it: type, length 8, port, address. */
function opt4(addr: string, port: number, len = 8): Buffer {
  const b = Buffer.alloc(8);
  b[0] = DSR_OPT4_TYPE;
  b[1] = len;
  b.writeUInt16BE(port, 2);
  ip4(addr).copy(b, 4);
  return b;
}

/** frame (IPv6, no extension header) with the DSR Destination Options header inserted. */
function withOpt6(frame: Buffer, addr: string, port: number, optLen = 18): Buffer {
  const ip = Buffer.from(frame.subarray(ETH_HLEN, ETH_HLEN + IP6_HLEN));
  const opt = Buffer.alloc(24);
  opt[0] = ip[6]!;
  opt[1] = 2;
  opt[2] = DSR_OPT6_TYPE;
  opt[3] = optLen;
  ip6(addr).copy(opt, 4);
  opt.writeUInt16BE(port, 20);
  opt[22] = 1; // PadN
  ip[6] = IPPROTO_DSTOPTS;
  ip.writeUInt16BE(ip.readUInt16BE(4) + 24, 4);
  return Buffer.concat([frame.subarray(0, ETH_HLEN), ip, opt, frame.subarray(ETH_HLEN + IP6_HLEN)]);
}

/** The IPv4 option the datapath added (at the start of the options). */
function splitOpt4(frame: Buffer): { opt: Buffer } {
  return { opt: Buffer.from(frame.subarray(ETH_HLEN + 20, ETH_HLEN + 28)) };
}

const h = TcHarness.open({ ctMax: 512 });
t.teardown(() => h.close());
h.configure(NODE_IP);
h.configure6(NODE6);
// The ingress node's frontends.
h.addService({ addr: NODE_IP, port: 30080, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT | SVC_F_DSR, backends: [REMOTE] });
h.addService({
  addr: NODE_IP,
  port: 30080,
  proto: 'udp',
  revNatId: 2,
  flags: SVC_F_NODEPORT | SVC_F_DSR,
  backends: [{ ...REMOTE, id: 12 }],
});
// hybrid: the agent sets the flag on TCP entries only.
h.addService({ addr: NODE_IP, port: 30081, proto: 'udp', revNatId: 3, flags: SVC_F_NODEPORT, backends: [{ ...REMOTE, id: 13 }] });
h.addService({ addr: NODE_IP, port: 30082, proto: 'tcp', revNatId: 4, flags: SVC_F_NODEPORT | SVC_F_DSR, backends: [LOCAL] });
// The backend's node: every node's NodePort through the wildcard entry.
h.addService({
  addr: '0.0.0.0',
  port: 30090,
  proto: 'tcp',
  revNatId: 5,
  flags: SVC_F_NODEPORT | SVC_F_WILDCARD | SVC_F_DSR,
  backends: [LOCAL],
});
h.addService({ addr: '0.0.0.0', port: 30091, proto: 'tcp', revNatId: 6, flags: SVC_F_NODEPORT | SVC_F_WILDCARD, backends: [LOCAL] });
h.addService6({ addr: NODE6, port: 30080, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT | SVC_F_DSR, backends: [REMOTE6] });
h.addService6({
  addr: '::',
  port: 30090,
  proto: 'tcp',
  revNatId: 5,
  flags: SVC_F_NODEPORT | SVC_F_WILDCARD | SVC_F_DSR,
  backends: [LOCAL6],
});

const tcp4 = (saddr: string, daddr: string, sport: number, dport: number, flags: number, options?: Buffer) =>
  buildIpv4({
    saddr,
    daddr,
    proto: 'tcp',
    sport,
    dport,
    tcpFlags: flags,
    ttl: 61,
    payload: Buffer.from('dsr'),
    ...(options ? { options } : {}),
  });

t.test('IPv4 ingress node: the SYN is DNATed only and carries the frontend; later packets do not', async (t) => {
  h.clearCt();
  const syn = tcp4(CLIENT, NODE_IP, 40000, 30080, TCP_SYN);
  const moved = h.countsOf(() => {
    const res = h.ingress(syn);
    t.ok([TC_ACT_REDIRECT, TC_ACT_OK].includes(res.retval), `SYN: passed on (retval ${res.retval})`);
    t.equal(res.packetOut.length, syn.length + 8, 'SYN: 8 bytes longer');
    t.ok(ipv4HeaderValid(res.packetOut), 'SYN: the IPv4 header checksum verifies (ihl 7)');
    t.ok(l4ChecksumValid(res.packetOut), 'SYN: the TCP checksum verifies');
    const out = parseIpv4(res.packetOut);
    t.equal(out.l4Checksum, computeL4Checksum(res.packetOut), 'SYN: the TCP checksum equals a recomputation');
    t.same(
      [out.saddr, out.sport, out.daddr, out.dport],
      [CLIENT, 40000, REMOTE.addr, REMOTE.port],
      "DNAT only: the client's address and port kept",
    );
    t.same(splitOpt4(res.packetOut).opt, opt4(NODE_IP, 30080), 'the option: type, length 8, the frontend port and address');
  });
  t.ok(moved['tc_ingress/translated'] === 1 || moved['tc_ingress/to_stack_no_route'] === 1, `counted once (${JSON.stringify(moved)})`);
  t.equal(Object.keys(moved).length, 1, 'one counter');
  const ct = h.ctEntries();
  t.equal(ct.length, 1, 'a forward entry, no reply entry (the answers leave the backend node)');
  t.match(ct[0], [
    { dir: CT_DIR_FWD, saddr: CLIENT, sport: 40000 },
    { new_daddr: REMOTE.addr, new_saddr: '0.0.0.0', new_sport: 0, flags: CT_F_DSR },
  ]);

  const again = h.ingress(syn);
  t.equal(again.packetOut.length, syn.length + 8, 'a retransmitted SYN carries it again');
  t.equal(parseIpv4(again.packetOut).daddr, REMOTE.addr, 'to the same backend');
  t.equal(h.ctEntries().length, 1, 'the same flow');

  const ack = tcp4(CLIENT, NODE_IP, 40000, 30080, TCP_ACK);
  const out = translated(t, h.ingress(ack), ack, 'ACK');
  t.same([out.saddr, out.daddr], [CLIENT, REMOTE.addr], 'the ACK: DNAT only, no option (same length)');
  const fwd = h.ctEntries()[0]![1];
  t.ok(fwd.flags & CT_F_SEEN_REPLY, "the client's ACK marks the flow answered (the GC's established lifetime)");
});

t.test('IPv4 ingress node: UDP to a DSR frontend carries the option on every datagram; hybrid UDP is SNATed', async (t) => {
  h.clearCt();
  for (let i = 0; i < 2; i++) {
    const d = buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 41000, dport: 30080, payload: Buffer.from(`d${i}`) });
    const res = h.ingress(d);
    t.equal(res.packetOut.length, d.length + 8, `datagram ${i}: carries the option`);
    t.ok(ipv4HeaderValid(res.packetOut) && l4ChecksumValid(res.packetOut), `datagram ${i}: checksums verify`);
    t.same(splitOpt4(res.packetOut).opt, opt4(NODE_IP, 30080));
    t.equal(parseIpv4(res.packetOut).saddr, CLIENT, `datagram ${i}: the client's address kept`);
  }
  const u = buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 41001, dport: 30081, payload: Buffer.from('hybrid') });
  const out = translated(t, h.ingress(u), u, 'hybrid UDP');
  t.equal(out.saddr, NODE_IP, 'a UDP frontend without SVC_F_DSR: SNATed to the node');
});

t.test('a DSR frontend with a local backend: plain DNAT, no option', async (t) => {
  h.clearCt();
  const syn = tcp4(CLIENT, NODE_IP, 40001, 30082, TCP_SYN);
  const res = h.ingress(syn);
  t.equal(res.packetOut.length, syn.length, 'no option');
  t.equal(parseIpv4(res.packetOut).daddr, LOCAL.addr);
});

t.test("IPv4 backend's node: the option is checked, removed, recorded; the reply leaves as the frontend", async (t) => {
  h.clearCt();
  const plain = tcp4(CLIENT, LOCAL.addr, 40000, LOCAL.port, TCP_SYN);
  const withOpt = tcp4(CLIENT, LOCAL.addr, 40000, LOCAL.port, TCP_SYN, opt4(OTHER_NODE, 30090));
  let res: ReturnType<typeof h.ingress> | undefined;
  const counter = h.countedOnce(t, 'SYN with the option', () => (res = h.ingress(withOpt)).retval, TC_ACT_OK);
  t.equal(counter, 'tc_ingress/dsr_accepted');
  t.ok(res!.packetOut.equals(plain), 'the packet is byte for byte the one without the option (header checksum included)');
  const ct = h.ctEntries();
  t.equal(ct.length, 1, 'one entry');
  t.match(ct[0], [
    { dir: CT_DIR_REPLY_OUT, saddr: LOCAL.addr, sport: LOCAL.port, daddr: CLIENT, dport: 40000, proto: 6 },
    { new_saddr: OTHER_NODE, new_sport: 30090, rev_nat_id: 5, flags: CT_F_DSR | CT_F_LOCAL },
  ]);
  const reply = tcp4(LOCAL.addr, CLIENT, LOCAL.port, 40000, TCP_SYN | TCP_ACK);
  const out = translated(t, h.egress(reply), reply, 'SYN-ACK at egress');
  t.same([out.saddr, out.sport, out.daddr, out.dport], [OTHER_NODE, 30090, CLIENT, 40000], 'from the frontend straight to the client');
  t.equal(
    h.countedOnce(
      t,
      'a later packet without option',
      () => h.ingress(tcp4(CLIENT, LOCAL.addr, 40000, LOCAL.port, TCP_ACK)).retval,
      TC_ACT_OK,
    ),
    'tc_ingress/passed',
  );
});

t.test("the backend's node: both sides' FINs reach the flow's entry, so the GC can end it", async (t) => {
  h.clearCt();
  h.ingress(tcp4(CLIENT, LOCAL.addr, 40003, LOCAL.port, TCP_SYN, opt4(OTHER_NODE, 30090)));
  h.egress(tcp4(LOCAL.addr, CLIENT, LOCAL.port, 40003, TCP_SYN | TCP_ACK));
  const flags = () => h.ctEntries()[0]![1].flags;
  t.equal(flags(), CT_F_DSR | CT_F_LOCAL | CT_F_SEEN_REPLY, 'answered');
  t.equal(
    h.countedOnce(t, "the client's FIN", () => h.ingress(tcp4(CLIENT, LOCAL.addr, 40003, LOCAL.port, TCP_FIN | TCP_ACK)).retval, TC_ACT_OK),
    'tc_ingress/passed',
  );
  t.equal(flags() & CT_F_FIN_FWD, CT_F_FIN_FWD, "the client's FIN is in the entry");
  h.egress(tcp4(LOCAL.addr, CLIENT, LOCAL.port, 40003, TCP_FIN | TCP_ACK));
  t.equal(flags() & (CT_F_FIN_REPLY | CT_F_CLOSING), CT_F_FIN_REPLY | CT_F_CLOSING, "the backend's FIN too: closing");
  h.ingress(tcp4(CLIENT, LOCAL.addr, 40003, LOCAL.port, TCP_SYN, opt4(OTHER_NODE, 30090)));
  t.equal(flags(), CT_F_DSR | CT_F_LOCAL, 'a new SYN on the port starts the entry afresh');
});

t.test("the backend's node drops options naming no DSR frontend, and malformed ones", async (t) => {
  h.clearCt();
  const cases: Array<[string, Buffer, string]> = [
    ['an unknown frontend', opt4(OTHER_NODE, 31999), 'tc_ingress/dsr_bad_frontend'],
    ['a frontend without SVC_F_DSR', opt4(OTHER_NODE, 30091), 'tc_ingress/dsr_bad_frontend'],
    ['a wrong length', opt4(OTHER_NODE, 30090, 6), 'tc_ingress/dsr_malformed'],
  ];
  for (const [what, opt, want] of cases) {
    const p = tcp4(CLIENT, LOCAL.addr, 40002, LOCAL.port, TCP_SYN, opt);
    t.equal(
      h.countedOnce(t, what, () => h.ingress(p).retval, TC_ACT_SHOT),
      want,
      what,
    );
  }
  t.same(h.ctEntries(), [], 'nothing recorded');
});

t.test('IPv6 ingress node: the SYN carries a Destination Options header naming the frontend', async (t) => {
  h.clearCt();
  const syn = tcp6(CLIENT6, NODE6, 40000, 30080, TCP_SYN, Buffer.from('dsr'));
  const res = h.ingress(syn);
  t.ok([TC_ACT_REDIRECT, TC_ACT_OK].includes(res.retval), `passed on (retval ${res.retval})`);
  t.equal(res.packetOut.length, syn.length + 24, '24 bytes longer');
  const o = res.packetOut;
  t.equal(o[ETH_HLEN + 6], IPPROTO_DSTOPTS, 'next header: destination options');
  t.equal(o.readUInt16BE(ETH_HLEN + 4), syn.readUInt16BE(ETH_HLEN + 4) + 24, 'payload length + 24');
  const opt = o.subarray(ETH_HLEN + IP6_HLEN, ETH_HLEN + IP6_HLEN + 24);
  t.same([opt[0], opt[1], opt[2], opt[3]], [6, 2, DSR_OPT6_TYPE, 18], 'TCP next, 24 bytes, the option type, 18 bytes of data');
  t.same(opt.subarray(4, 20), ip6(NODE6), 'the frontend address');
  t.equal(opt.readUInt16BE(20), 30080, 'the frontend port');
  t.same([opt[22], opt[23]], [1, 0], 'PadN to the 8-byte multiple');
  // Without the header: a plain IPv6 packet whose checksum must verify as it is (the pseudo-header has no room for it).
  const ip = Buffer.from(o.subarray(ETH_HLEN, ETH_HLEN + IP6_HLEN));
  ip[6] = 6;
  ip.writeUInt16BE(ip.readUInt16BE(4) - 24, 4);
  const plain = Buffer.concat([o.subarray(0, ETH_HLEN), ip, o.subarray(ETH_HLEN + IP6_HLEN + 24)]);
  t.ok(l4Checksum6Valid(plain), 'the TCP checksum verifies');
  const p = parseIpv6(plain);
  t.equal(p.l4Checksum, computeL4Checksum6(plain), 'and equals a recomputation');
  t.same([p.saddr, p.sport, p.daddr, p.dport], [CLIENT6, 40000, REMOTE6.addr, REMOTE6.port], "DNAT only: the client's address kept");
  t.equal(h.ct6Entries().length, 1, 'a forward entry only');
  const ack = tcp6(CLIENT6, NODE6, 40000, 30080, TCP_ACK, Buffer.from('dsr'));
  const out = translated6(t, h.ingress(ack), ack, 'ACK');
  t.equal(out.saddr, CLIENT6, 'the ACK: DNAT only, no header added');
});

t.test("IPv6 backend's node: the header is checked, removed, recorded; the reply leaves as the frontend", async (t) => {
  h.clearCt();
  const plain = tcp6(CLIENT6, LOCAL6.addr, 40000, LOCAL6.port, TCP_SYN, Buffer.from('dsr'));
  let res: ReturnType<typeof h.ingress> | undefined;
  t.equal(
    h.countedOnce(t, 'SYN with the header', () => (res = h.ingress(withOpt6(plain, OTHER6, 30090))).retval, TC_ACT_OK),
    'tc_ingress/dsr_accepted',
  );
  t.ok(res!.packetOut.equals(plain), 'byte for byte the packet without the header');
  t.match(h.ct6Entries()[0], [
    { dir: CT_DIR_REPLY_OUT, saddr: LOCAL6.addr, daddr: CLIENT6, sport: LOCAL6.port, dport: 40000 },
    { new_saddr: OTHER6, new_sport: 30090, flags: CT_F_DSR | CT_F_LOCAL },
  ]);
  const reply = tcp6(LOCAL6.addr, CLIENT6, LOCAL6.port, 40000, TCP_SYN | TCP_ACK, Buffer.from('back'));
  const out = translated6(t, h.egress(reply), reply, 'SYN-ACK at egress');
  t.same([out.saddr, out.sport, out.daddr, out.dport], [OTHER6, 30090, CLIENT6, 40000], 'from the frontend to the client');
  t.equal(
    h.countedOnce(t, 'unknown frontend', () => h.ingress(withOpt6(plain, OTHER6, 31999)).retval, TC_ACT_SHOT),
    'tc_ingress/dsr_bad_frontend',
  );
  t.equal(
    h.countedOnce(t, 'a wrong option length', () => h.ingress(withOpt6(plain, OTHER6, 30090, 16)).retval, TC_ACT_SHOT),
    'tc_ingress/dsr_malformed',
  );
});

t.test('XDP leaves a DSR flow’s first packet to tc, with its entry stored', async (t) => {
  const x = TcHarness.open({ program: 'xdp', ctMax: 64, net: 'caller' });
  t.teardown(() => x.close());
  x.configure(NODE_IP);
  x.addService({ addr: NODE_IP, port: 30080, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT | SVC_F_DSR, backends: [REMOTE] });
  const syn = tcp4(CLIENT, NODE_IP, 40000, 30080, TCP_SYN);
  let res: ReturnType<typeof x.ingress> | undefined;
  t.equal(
    x.countedOnce(t, 'SYN at XDP', () => (res = x.ingress(syn)).retval, XDP_PASS),
    'xdp/passed_to_tc',
  );
  t.ok(res!.packetOut.equals(syn), 'untouched, for tc');
  t.match(
    x.ctEntries(),
    [[{ dir: CT_DIR_FWD }, { flags: CT_F_DSR, new_daddr: REMOTE.addr }]],
    'the flow is stored: tc adds the option by it',
  );
});
