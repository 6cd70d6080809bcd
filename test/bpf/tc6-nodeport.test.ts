// svcmap_tc_in / svcmap_tc_out on crafted IPv6 packets (BPF_PROG_TEST_RUN,
// nothing attached): an IPv6 NodePort with a remote backend is DNATed and
// SNATed to the egress device's IPv6 address (svcmap_devaddr6), the reply is
// turned back into frontend -> client, a local backend's reply is translated
// at egress, neighbour discovery and router advertisements pass untouched,
// extension headers are passed and counted, ICMPv6 errors about translated
// flows are translated back, and every drop has its reason.
// Each output's TCP/UDP checksum is recomputed from scratch over the IPv6
// pseudo-header (packets6.ts).
import t, { type Test } from 'tap';
import { CtGc } from '../../src/agent/loops/ct-gc.ts';
import { SNAT_PORT_MAX as SNAT_MAX, SNAT_PORT_MIN as SNAT_MIN } from '../../src/agent/datapath/tc-datapath.ts';
import { SVC_F_ETP_LOCAL, SVC_F_LOADBALANCER, SVC_F_NODEPORT, SVC_F_SRC_RANGES } from '../../src/maps/constants.ts';
import { ETH_P_IPV6, TCP_ACK, TCP_FIN, TCP_SYN, ethHeader } from './fixtures/packets.ts';
import {
  ICMPV6_DEST_UNREACH,
  ICMPV6_ECHO_REQUEST,
  ICMPV6_PKT_TOOBIG,
  buildIcmpv6,
  buildIcmpv6Error,
  buildIpv6,
  buildIpv6WithHopByHop,
  buildNeighborSolicit,
  buildRouterAdvert,
  tcp6,
  l4Checksum6Valid,
  parseIcmpv6Error,
  parseIpv6,
} from './fixtures/packets6.ts';
import { LO_IFINDEX } from './fixtures/private-net.ts';
import { CT_DIR_FWD, CT_DIR_REPLY_IN, CT_DIR_REPLY_OUT, CT_F_LOCAL, CT_F_SNAT } from './fixtures/tc-codecs.ts';
import { translated6, untouched } from './fixtures/tc-expect.ts';
import { TC_ACT_OK, TC_ACT_REDIRECT, TC_ACT_SHOT, TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const NODE6 = 'fd00:198:51:100::1';
const LB6 = 'fd00:198:51:100::200';
const CLIENT = 'fd00:203:0:113::7';
const REMOTE = { id: 11, addr: 'fd00:10:244:2::5', port: 8080 };
const REMOTE2 = { id: 12, addr: 'fd00:10:244:2::6', port: 8080 };
const LOCAL = { id: 21, addr: 'fd00:10:244:1::5', port: 8080, local: true };

const h = TcHarness.open({ ctMax: 512 });
t.teardown(() => h.close());
h.configure(NODE_IP);
h.configure6(NODE6);
h.addService6({ addr: NODE6, port: 30080, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT, backends: [REMOTE] });
h.addService6({ addr: NODE6, port: 30081, proto: 'tcp', revNatId: 2, flags: SVC_F_NODEPORT, backends: [LOCAL] });
h.addService6({ addr: NODE6, port: 30082, proto: 'udp', revNatId: 3, flags: SVC_F_NODEPORT, backends: [{ ...REMOTE, id: 13 }] });
h.addService6({ addr: NODE6, port: 30083, proto: 'tcp', revNatId: 4, flags: SVC_F_NODEPORT, backends: [REMOTE, REMOTE2] });
h.addService6({ addr: NODE6, port: 30084, proto: 'tcp', revNatId: 5, flags: SVC_F_NODEPORT | SVC_F_ETP_LOCAL, backends: [] });
h.addService6({ addr: NODE6, port: 30085, proto: 'tcp', revNatId: 6, flags: SVC_F_NODEPORT, backends: [] });
h.addService6({
  addr: LB6,
  port: 80,
  proto: 'tcp',
  revNatId: 7,
  flags: SVC_F_LOADBALANCER | SVC_F_SRC_RANGES,
  backends: [REMOTE],
  sourceRanges: ['fd00:203:0:113::/64'],
});
// The same address and port in the IPv4 maps must not answer for IPv6.
h.addService({
  addr: NODE_IP,
  port: 30080,
  proto: 'tcp',
  revNatId: 1,
  flags: SVC_F_NODEPORT,
  backends: [{ id: 11, addr: '10.244.2.5', port: 9999 }],
});

const tcp = tcp6;

/** Runs one packet and checks it moved exactly one counter, by one; returns that counter. */
const one = (t: Test, what: string, run: () => number, want: number | number[]) => h.countedOnce(t, what, run, want);

t.test("a SYN to an IPv6 NodePort with a remote backend is DNATed and SNATed to the device's IPv6 address", async (t) => {
  h.clearCt();
  const input = tcp(CLIENT, NODE6, 40000, 30080, TCP_SYN, Buffer.from('hello'));
  let res: ReturnType<typeof h.ingress> | undefined;
  const moved = h.countsOf(() => {
    res = h.ingress(input);
  });
  const out = translated6(t, res!, input, 'SYN');
  t.same([out.daddr, out.dport], [REMOTE.addr, REMOTE.port], 'destination: the backend');
  t.equal(out.saddr, NODE6, "source: lo's address from svcmap_devaddr6");
  t.ok(out.sport >= SNAT_MIN && out.sport <= SNAT_MAX, `source port ${out.sport} from the SNAT range`);
  t.ok(
    moved['tc_ingress/translated'] === 1 || Object.keys(moved).some((k) => k.startsWith('tc_ingress/to_stack')),
    `counted once as translated (${JSON.stringify(moved)})`,
  );
  t.same(h.ctEntries(), [], 'nothing in the IPv4 conntrack map');
  const ct = h.ct6Entries();
  t.equal(ct.length, 2, 'one forward and one reply entry in svcmap_ct6');
  const fwd = ct.find(([k]) => k.dir === CT_DIR_FWD);
  t.match(fwd?.[0], { saddr: CLIENT, daddr: NODE6, sport: 40000, dport: 30080, proto: 6 });
  t.match(fwd?.[1], {
    new_saddr: NODE6,
    new_sport: out.sport,
    new_daddr: REMOTE.addr,
    new_dport: 8080,
    backend_id: 11,
    rev_nat_id: 1,
    flags: CT_F_SNAT,
  });
  const rep = ct.find(([k]) => k.dir === CT_DIR_REPLY_IN);
  t.match(rep?.[0], { saddr: REMOTE.addr, daddr: NODE6, sport: 8080, dport: out.sport, proto: 6 });
  t.match(rep?.[1], { new_saddr: NODE6, new_sport: 30080, new_daddr: CLIENT, new_dport: 40000, flags: CT_F_SNAT });

  const reply = tcp(REMOTE.addr, NODE6, 8080, out.sport, TCP_SYN | TCP_ACK, Buffer.from('from the backend'));
  const back = translated6(t, h.ingress(reply), reply, 'SYN-ACK');
  t.same(
    [back.saddr, back.sport, back.daddr, back.dport],
    [NODE6, 30080, CLIENT, 40000],
    'the reply comes from the frontend to the client',
  );
  const next = tcp(CLIENT, NODE6, 40000, 30080, TCP_ACK, Buffer.from('more'));
  const again = translated6(t, h.ingress(next), next, 'ACK');
  t.same(
    [again.saddr, again.sport, again.daddr, again.dport],
    [out.saddr, out.sport, out.daddr, out.dport],
    'a later packet: the same translation',
  );
  t.equal(h.ct6Entries().length, 2, 'no entry per later packet');
});

t.test('UDP over IPv6: the checksum (mandatory in IPv6) is right after DNAT and SNAT', async (t) => {
  h.clearCt();
  for (let i = 0; i < 16; i++) {
    const input = buildIpv6({
      saddr: CLIENT,
      daddr: NODE6,
      proto: 'udp',
      sport: 41000 + i,
      dport: 30082,
      payload: Buffer.from(`datagram ${i}`),
    });
    const out = translated6(t, h.ingress(input), input, `datagram ${i}`);
    t.same([out.daddr, out.dport, out.saddr], [REMOTE.addr, REMOTE.port, NODE6]);
    const reply = buildIpv6({
      saddr: REMOTE.addr,
      daddr: NODE6,
      proto: 'udp',
      sport: 8080,
      dport: out.sport,
      payload: Buffer.from(`answer ${i}`),
    });
    const back = translated6(t, h.ingress(reply), reply, `answer ${i}`);
    t.same([back.saddr, back.sport, back.daddr, back.dport], [NODE6, 30082, CLIENT, 41000 + i]);
  }
});

t.test('a local backend: DNAT only, its reply translated at egress', async (t) => {
  h.clearCt();
  const input = tcp(CLIENT, NODE6, 40001, 30081);
  const out = translated6(t, h.ingress(input), input, 'SYN to the local backend');
  t.same([out.saddr, out.sport, out.daddr, out.dport], [CLIENT, 40001, LOCAL.addr, LOCAL.port], 'the client keeps its address');
  const ct = h.ct6Entries();
  t.match(ct.find(([k]) => k.dir === CT_DIR_FWD)?.[1], { flags: CT_F_LOCAL });
  t.match(ct.find(([k]) => k.dir === CT_DIR_REPLY_OUT)?.[0], { saddr: LOCAL.addr, daddr: CLIENT, sport: 8080, dport: 40001 });
  const reply = tcp(LOCAL.addr, CLIENT, 8080, 40001, TCP_SYN | TCP_ACK);
  let res: ReturnType<typeof h.egress> | undefined;
  t.same(
    h.countsOf(() => {
      res = h.egress(reply);
    }),
    { 'tc_egress/reply_translated': 1 },
  );
  t.equal(res!.retval, TC_ACT_OK);
  const back = parseIpv6(res!.packetOut);
  t.same([back.saddr, back.sport, back.daddr, back.dport], [NODE6, 30081, CLIENT, 40001], 'the source is the frontend again');
  t.equal(back.hopLimit, 61, 'egress does not route: the hop limit stays');
  const fin = tcp(CLIENT, NODE6, 40001, 30081, TCP_FIN | TCP_ACK);
  translated6(t, h.ingress(fin), fin, 'FIN');
  t.ok(
    h.ct6Entries().every(([, v]) => v.flags & 0x10),
    "the FIN is in both entries' state",
  );
});

t.test('every packet of a flow keeps its backend; flows spread; SNAT ports never collide', async (t) => {
  h.clearCt();
  const seen = new Set<string>();
  const ports = new Set<string>();
  for (let i = 0; i < 40; i++) {
    const first = parseIpv6(h.ingress(tcp(`fd00:203:0:113::${(i % 8) + 10}`, NODE6, 42000 + Math.floor(i / 8), 30083)).packetOut);
    seen.add(first.daddr);
    ports.add(`${first.daddr} ${first.sport}`);
    const next = tcp(`fd00:203:0:113::${(i % 8) + 10}`, NODE6, 42000 + Math.floor(i / 8), 30083, TCP_ACK);
    const out = translated6(t, h.ingress(next), next, `flow ${i} packet 2`);
    t.same([out.daddr, out.sport], [first.daddr, first.sport]);
  }
  t.equal(seen.size, 2, 'both backends were chosen');
  t.equal(ports.size, 40, 'no two of the 40 flows share a SNAT port towards one backend');
});

t.test('neighbour discovery, router advertisements and echo pass untouched; extension headers are passed and counted', async (t) => {
  h.clearCt();
  const ns = buildNeighborSolicit('fe80::1', NODE6);
  const ra = buildRouterAdvert('fe80::1', 'fd00:198:51:100::');
  const echo = buildIcmpv6(CLIENT, NODE6, ICMPV6_ECHO_REQUEST, 0, Buffer.from('0001000170696e67', 'hex'), 64);
  for (const [what, f] of [
    ['neighbour solicitation', ns],
    ['router advertisement', ra],
    ['echo request', echo],
  ] as const) {
    for (const [hook, run] of [
      ['ingress', h.ingress.bind(h)],
      ['egress', h.egress.bind(h)],
    ] as const) {
      let res: ReturnType<typeof h.ingress> | undefined;
      t.same(
        h.countsOf(() => {
          res = run(f);
        }),
        { [`tc_${hook}/other_protocol`]: 1 },
        `${what} at ${hook}: counted once as other_protocol`,
      );
      untouched(t, res!, f, `${what} at ${hook}`);
    }
  }
  const hbh = buildIpv6WithHopByHop({ saddr: CLIENT, daddr: NODE6, sport: 40002, dport: 30080 });
  let res: ReturnType<typeof h.ingress> | undefined;
  t.same(
    h.countsOf(() => {
      res = h.ingress(hbh);
    }),
    { 'tc_ingress/ipv6_ext_header': 1 },
    'a hop-by-hop header: counted as ipv6_ext_header',
  );
  untouched(t, res!, hbh, 'a SYN behind a hop-by-hop header');
  const cut = tcp(CLIENT, NODE6, 40003, 30080).subarray(0, 14 + 40 + 10);
  t.equal(
    one(t, 'a TCP header cut short', () => h.ingress(cut).retval, TC_ACT_OK),
    'tc_ingress/malformed',
  );
  t.equal(
    one(t, 'no IPv6 frontend on the port', () => h.ingress(tcp(CLIENT, NODE6, 40004, 30999)).retval, TC_ACT_OK),
    'tc_ingress/passed',
  );
  t.equal(
    one(t, 'egress, no flow', () => h.egress(tcp(NODE6, CLIENT, 22, 50000, TCP_ACK)).retval, TC_ACT_OK),
    'tc_egress/passed',
  );
  t.same(h.ct6Entries(), [], 'none of them made conntrack entries');
});

t.test('every drop has its reason', async (t) => {
  h.clearCt();
  t.equal(
    one(t, 'ETP Local, no local endpoint', () => h.ingress(tcp(CLIENT, NODE6, 40010, 30084)).retval, TC_ACT_SHOT),
    'tc_ingress/no_local_endpoint',
  );
  t.equal(
    one(t, 'no endpoints', () => h.ingress(tcp(CLIENT, NODE6, 40011, 30085)).retval, TC_ACT_SHOT),
    'tc_ingress/no_backend',
  );
  t.equal(
    one(t, 'outside the source ranges', () => h.ingress(tcp('fd00:203:0:114::7', LB6, 40012, 80)).retval, TC_ACT_SHOT),
    'tc_ingress/source_denied',
  );
  t.ok(
    ['tc_ingress/translated', 'tc_ingress/to_stack_no_route'].includes(
      one(t, 'inside the source ranges', () => h.ingress(tcp(CLIENT, LB6, 40013, 80)).retval, [TC_ACT_OK, TC_ACT_REDIRECT]),
    ),
  );

  h.devAddr6.delete(LO_IFINDEX);
  t.teardown(() => h.configure6(NODE6));
  t.equal(
    one(t, 'SNAT, the egress device has no IPv6 address', () => h.ingress(tcp(CLIENT, NODE6, 40014, 30080)).retval, TC_ACT_SHOT),
    'tc_ingress/no_snat_address',
  );
  h.configure6(NODE6);

  h.configure(NODE_IP, 61000, 61000);
  t.teardown(() => h.configure(NODE_IP));
  t.ok(one(t, 'the one SNAT port', () => h.ingress(tcp(CLIENT, NODE6, 40015, 30080)).retval, [TC_ACT_OK, TC_ACT_REDIRECT]).length > 0);
  t.equal(
    one(t, 'no SNAT port left', () => h.ingress(tcp(CLIENT, NODE6, 40016, 30080)).retval, TC_ACT_SHOT),
    'tc_ingress/snat_ports_exhausted',
  );
  t.same(
    h.ct6Entries().filter(([k]) => [40010, 40011, 40012, 40014, 40016].includes(k.sport)),
    [],
    'no drop left an entry',
  );
});

t.test('a SYN on a closed flow starts it afresh', async (t) => {
  h.clearCt();
  const first = parseIpv6(h.ingress(tcp(CLIENT, NODE6, 40020, 30080)).packetOut);
  h.ingress(tcp(CLIENT, NODE6, 40020, 30080, TCP_FIN | TCP_ACK));
  h.ingress(tcp(REMOTE.addr, NODE6, 8080, first.sport, TCP_FIN | TCP_ACK));
  t.ok(
    h.ct6Entries().every(([, v]) => v.flags & 0x08),
    'a FIN each way: closing',
  );
  const again = translated6(t, h.ingress(tcp(CLIENT, NODE6, 40020, 30080)), tcp(CLIENT, NODE6, 40020, 30080), 'a new SYN on the port');
  t.equal(again.daddr, REMOTE.addr);
  t.equal(h.ct6Entries().length, 2, "the old flow's entries gave way to the new flow's");
  t.ok(
    h.ct6Entries().every(([, v]) => !(v.flags & 0x08)),
    'the new flow is open',
  );
});

t.test('the conntrack GC collects IPv6 flows with the IPv4 ones', async (t) => {
  h.clearCt();
  const syn = parseIpv6(h.ingress(tcp(CLIENT, NODE6, 40030, 30080)).packetOut);
  const answered = parseIpv6(h.ingress(tcp(CLIENT, NODE6, 40031, 30080)).packetOut);
  h.ingress(tcp(REMOTE.addr, NODE6, 8080, answered.sport, TCP_SYN | TCP_ACK));
  t.equal(h.ct6Entries().length, 4);
  let ahead = 0n;
  const gc = new CtGc(
    [
      { family: 4, ct: h.ct },
      { family: 6, ct: h.ct6 },
    ],
    { intervalMs: 0, now: () => process.hrtime.bigint() + ahead },
  );
  t.match(gc.runOnce(), { entries: 4, deleted: 0 }, 'nothing is idle yet');
  ahead = 61n * 1_000_000_000n;
  const run = gc.runOnce();
  t.match(
    run,
    { entries: 4, deleted: 2, flows: { tcp_syn: 1 } },
    'a minute later the unanswered SYN goes (both entries), the established flow stays',
  );
  t.same(
    h
      .ct6Entries()
      .map(([k]) => (k.dir === CT_DIR_FWD ? k.sport : k.dport))
      .sort(),
    [40031, answered.sport].sort(),
    'what is left is the answered flow',
  );
  t.not(syn.sport, 0);
});

t.test('ICMPv6 errors about translated flows are translated back, checksums included', async (t) => {
  h.clearCt();
  const ROUTER = 'fd00:10:244:9::1';
  /** The quoted packet as a frame of its own, for the from-scratch parser and checksum. */
  const quoted = (q: Buffer) => Buffer.concat([ethHeader(ETH_P_IPV6), q]);

  // A SNATed flow; a router towards the backend says its segment was too big.
  const syn = tcp(CLIENT, NODE6, 40040, 30080, TCP_SYN, Buffer.from('a segment too big'));
  const fwd = parseIpv6(h.ingress(syn).packetOut);
  const sent = tcp(NODE6, REMOTE.addr, fwd.sport, 8080, TCP_ACK, Buffer.alloc(64, 0x61));
  const ptb = buildIcmpv6Error({ saddr: ROUTER, daddr: NODE6, type: ICMPV6_PKT_TOOBIG, code: 0, mtu: 1280, about: sent });
  let res: ReturnType<typeof h.ingress> | undefined;
  const moved = h.countsOf(() => {
    res = h.ingress(ptb);
  });
  t.ok(moved['tc_ingress/icmp_translated'] === 1 || moved['tc_ingress/to_stack_no_route'] === 1, `counted once (${JSON.stringify(moved)})`);
  t.ok([TC_ACT_OK, TC_ACT_REDIRECT].includes(res!.retval));
  const e = parseIcmpv6Error(res!.packetOut);
  t.ok(e.icmpValid, 'the ICMPv6 checksum verifies over the new outer pseudo-header');
  t.same(
    [e.type, e.word, e.saddr, e.daddr],
    [ICMPV6_PKT_TOOBIG, 1280, ROUTER, CLIENT],
    'to the client, still from the router, the MTU kept',
  );
  const q = parseIpv6(quoted(e.quote));
  t.same([q.saddr, q.sport, q.daddr, q.dport], [CLIENT, 40040, NODE6, 30080], 'about the packet as the client sent it');
  t.ok(l4Checksum6Valid(quoted(e.quote)), 'the quoted TCP checksum verifies for the quoted addresses and ports');
  t.equal(res!.packetOut.length, ptb.length);

  // A local backend's host answers a client's UDP datagram with "port unreachable", sent out at egress.
  h.clearCt();
  const udp = buildIpv6({ saddr: CLIENT, daddr: NODE6, proto: 'udp', sport: 40041, dport: 30086, payload: Buffer.from('anyone?') });
  h.addService6({ addr: NODE6, port: 30086, proto: 'udp', revNatId: 8, flags: SVC_F_NODEPORT, backends: [{ ...LOCAL, id: 22 }] });
  const toPod = h.ingress(udp).packetOut;
  t.equal(parseIpv6(toPod).daddr, LOCAL.addr);
  const unreach = buildIcmpv6Error({ saddr: LOCAL.addr, daddr: CLIENT, type: ICMPV6_DEST_UNREACH, code: 4, about: toPod });
  let out: ReturnType<typeof h.egress> | undefined;
  t.same(
    h.countsOf(() => {
      out = h.egress(unreach);
    }),
    { 'tc_egress/icmp_translated': 1 },
  );
  const u = parseIcmpv6Error(out!.packetOut);
  t.ok(u.icmpValid, 'the ICMPv6 checksum verifies');
  t.same([u.saddr, u.daddr, u.code], [NODE6, CLIENT, 4], 'from the frontend the client sent to (the backend itself answered)');
  const uq = parseIpv6(quoted(u.quote));
  t.same([uq.saddr, uq.sport, uq.daddr, uq.dport], [CLIENT, 40041, NODE6, 30086], 'about client -> frontend');
  t.ok(l4Checksum6Valid(quoted(u.quote)), 'the quoted UDP checksum verifies');

  // Errors about no tracked flow, and short quotes, pass untouched.
  const stranger = buildIcmpv6Error({
    saddr: ROUTER,
    daddr: NODE6,
    type: ICMPV6_DEST_UNREACH,
    code: 0,
    about: tcp(NODE6, 'fd00:1::1', 50000, 22),
  });
  let r2: ReturnType<typeof h.ingress> | undefined;
  t.same(
    h.countsOf(() => {
      r2 = h.ingress(stranger);
    }),
    { 'tc_ingress/passed': 1 },
    "an error about the node's own traffic: passed",
  );
  untouched(t, r2!, stranger, "an error about the node's own traffic");
  const short = buildIcmpv6Error({ saddr: ROUTER, daddr: NODE6, type: ICMPV6_DEST_UNREACH, code: 0, about: sent, quoteL4Bytes: 2 });
  t.same(
    h.countsOf(() => {
      r2 = h.ingress(short);
    }),
    { 'tc_ingress/other_protocol': 1 },
    'a quote without the ports: other_protocol',
  );
  untouched(t, r2!, short, 'a quote without the ports');
});

t.test("a closed IPv6 flow's SNAT port goes to a new flow once quiet for the hold, not sooner", async (t) => {
  h.clearCt();
  h.configure(NODE_IP, 61000, 61000);
  t.teardown(() => h.configure(NODE_IP));
  const a = parseIpv6(h.ingress(tcp(CLIENT, NODE6, 40050, 30080)).packetOut);
  t.equal(a.sport, 61000, 'the first flow has the only port');
  h.ingress(tcp(REMOTE.addr, NODE6, 8080, 61000, TCP_SYN | TCP_ACK));
  const other = 'fd00:203:0:113::8';
  t.equal(h.ingress(tcp(other, NODE6, 40051, 30080)).retval, TC_ACT_SHOT, 'while it is open, a second flow finds no port');
  h.ingress(tcp(CLIENT, NODE6, 40050, 30080, TCP_FIN | TCP_ACK));
  h.ingress(tcp(REMOTE.addr, NODE6, 8080, 61000, TCP_FIN | TCP_ACK));
  t.equal(h.ingress(tcp(other, NODE6, 40052, 30080)).retval, TC_ACT_SHOT, 'closed an instant ago: still held');
  for (const [k, v] of h.ct6Entries()) h.ct6.put(k, { ...v, last_seen: v.last_seen - 2_000_000_000n });
  const b = translated6(t, h.ingress(tcp(other, NODE6, 40053, 30080)), tcp(other, NODE6, 40053, 30080), 'a SYN after the hold');
  t.equal(b.sport, 61000, 'the new flow took the port over');
  const back = parseIpv6(h.ingress(tcp(REMOTE.addr, NODE6, 8080, 61000, TCP_SYN | TCP_ACK)).packetOut);
  t.same([back.daddr, back.dport], [other, 40053], "the port's replies go to the new client");
  t.notOk(
    h.ct6Entries().some(([k]) => k.dir === CT_DIR_FWD && k.sport === 40050),
    "the old flow's forward entry is gone",
  );
});
