// svcmap_tc_in on crafted TCP packets (BPF_PROG_TEST_RUN, nothing
// attached): a NodePort with remote backends and externalTrafficPolicy
// Cluster is DNATed to a backend and SNATed to the node, the reply is turned
// back into frontend -> client, each flow keeps its backend, and SNAT ports
// never collide.
import t from 'tap';
import { SNAT_PORT_MAX as SNAT_MAX, SNAT_PORT_MIN as SNAT_MIN } from '../../src/agent/datapath/tc-datapath.ts';
import { SVC_F_NODEPORT } from '../../src/maps/constants.ts';
import { TCP_ACK, TCP_SYN, buildIpv4, diffOffsets, parseIpv4 } from './fixtures/packets.ts';
import { CT_DIR_FWD, CT_DIR_REPLY_IN, CT_F_SNAT } from './fixtures/tc-codecs.ts';
import { translated, untouched } from './fixtures/tc-expect.ts';
import { TC_ACT_SHOT, TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const NODE_PORT = 30080;
const CLIENT = '203.0.113.7';
const REMOTE = [
  { id: 11, addr: '10.244.2.5', port: 8080 },
  { id: 12, addr: '10.244.2.6', port: 8080 },
  { id: 13, addr: '10.244.3.5', port: 8081 },
  { id: 14, addr: '10.244.3.6', port: 8082 },
];

const h = TcHarness.open();
t.teardown(() => h.close());
h.configure(NODE_IP, SNAT_MIN, SNAT_MAX);
h.addService({ addr: NODE_IP, port: NODE_PORT, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT, backends: [REMOTE[0]!] });
h.addService({ addr: NODE_IP, port: 30090, proto: 'tcp', revNatId: 2, flags: SVC_F_NODEPORT, backends: REMOTE });

const syn = (client: string, sport: number, dport = NODE_PORT) =>
  buildIpv4({ saddr: client, daddr: NODE_IP, proto: 'tcp', sport, dport, tcpFlags: TCP_SYN, seq: 7777, ttl: 61 });

t.test('a SYN to a NodePort with a remote backend is DNATed and SNATed', async (t) => {
  h.clearCt();
  const input = syn(CLIENT, 40000);
  const res = h.ingress(input);
  const out = translated(t, res, input, 'SYN');
  t.equal(out.daddr, '10.244.2.5', 'destination: the backend');
  t.equal(out.dport, 8080, 'destination port: the backend port');
  t.equal(out.saddr, NODE_IP, 'source: the node address (SNAT)');
  t.ok(out.sport >= SNAT_MIN && out.sport <= SNAT_MAX, `source port ${out.sport} from the SNAT range`);
  t.equal(out.tcpFlags, TCP_SYN);
  // Only addresses, ports, checksums (and the TTL, when routed) changed.
  const allowed = new Set([
    14 + 8,
    14 + 10,
    14 + 11,
    ...[12, 13, 14, 15, 16, 17, 18, 19].map((i) => 14 + i),
    34,
    35,
    36,
    37,
    34 + 16,
    34 + 17,
  ]);
  t.same(
    diffOffsets(input, res.packetOut).filter((o) => !allowed.has(o)),
    [],
    'no other byte changed',
  );

  const ct = h.ctEntries();
  t.equal(ct.length, 2, 'one forward and one reply entry');
  const fwd = ct.find(([k]) => k.dir === CT_DIR_FWD);
  t.match(fwd?.[0], { saddr: CLIENT, daddr: NODE_IP, sport: 40000, dport: NODE_PORT, proto: 6 });
  t.match(fwd?.[1], {
    new_saddr: NODE_IP,
    new_sport: out.sport,
    new_daddr: '10.244.2.5',
    new_dport: 8080,
    backend_id: 11,
    rev_nat_id: 1,
    flags: CT_F_SNAT,
  });
  const rep = ct.find(([k]) => k.dir === CT_DIR_REPLY_IN);
  t.match(rep?.[0], { saddr: '10.244.2.5', daddr: NODE_IP, sport: 8080, dport: out.sport, proto: 6 });
  t.match(rep?.[1], { new_saddr: NODE_IP, new_sport: NODE_PORT, new_daddr: CLIENT, new_dport: 40000, flags: CT_F_SNAT });
  t.ok((fwd?.[1].last_seen ?? 0n) > 0n, 'last_seen is set');
});

t.test('the reply is reverse-translated to frontend -> client', async (t) => {
  h.clearCt();
  const fwd = parseIpv4(h.ingress(syn(CLIENT, 40001)).packetOut);
  const reply = buildIpv4({
    saddr: fwd.daddr,
    daddr: fwd.saddr,
    proto: 'tcp',
    sport: fwd.dport,
    dport: fwd.sport,
    tcpFlags: TCP_SYN | TCP_ACK,
    seq: 9000,
    ack: 7778,
    ttl: 63,
    payload: Buffer.from('hello from the backend'),
  });
  const out = translated(t, h.ingress(reply), reply, 'SYN-ACK');
  t.equal(out.saddr, NODE_IP, 'source: the frontend address');
  t.equal(out.sport, NODE_PORT, 'source port: the NodePort');
  t.equal(out.daddr, CLIENT, 'destination: the client');
  t.equal(out.dport, 40001, 'destination port: the client port');
  t.equal(out.tcpFlags, TCP_SYN | TCP_ACK);
  t.equal(h.ctEntries().length, 2, 'the reply created no entry of its own');
});

t.test('every packet of a flow goes to the backend its first packet got', async (t) => {
  h.clearCt();
  const seen = new Set<string>();
  for (let i = 0; i < 24; i++) {
    const sport = 41000 + i;
    const first = parseIpv4(h.ingress(syn(CLIENT, sport, 30090)).packetOut);
    seen.add(`${first.daddr}:${first.dport}`);
    for (let j = 0; j < 3; j++) {
      const next = buildIpv4({
        saddr: CLIENT,
        daddr: NODE_IP,
        proto: 'tcp',
        sport,
        dport: 30090,
        tcpFlags: TCP_ACK,
        seq: 7778 + j,
        payload: Buffer.from(`data ${j}`),
      });
      const out = translated(t, h.ingress(next), next, `flow ${sport} packet ${j + 2}`);
      t.same(
        [out.daddr, out.dport, out.saddr, out.sport],
        [first.daddr, first.dport, first.saddr, first.sport],
        `flow ${sport} packet ${j + 2}: same backend and SNAT port`,
      );
    }
  }
  t.ok(seen.size > 1, `24 flows spread over more than one backend (${[...seen].join(', ')})`);
  t.equal(h.ctEntries().length, 48, 'two entries per flow, none per later packet');
});

t.test('two clients with the same source port to the same backend get different SNAT ports', async (t) => {
  h.clearCt();
  // 62000 is inside the SNAT range, so the first flow keeps it as its SNAT port.
  const a = translated(t, h.ingress(syn('203.0.113.7', 62000)), syn('203.0.113.7', 62000), 'client A');
  const b = translated(t, h.ingress(syn('203.0.113.8', 62000)), syn('203.0.113.8', 62000), 'client B');
  t.equal(a.sport, 62000, 'the first flow keeps the client port, which is in range');
  t.not(b.sport, a.sport, 'the second flow gets another port');
  t.ok(b.sport >= SNAT_MIN && b.sport <= SNAT_MAX);

  // Each reply finds its own client.
  for (const [snat, client] of [
    [a.sport, '203.0.113.7'],
    [b.sport, '203.0.113.8'],
  ] as const) {
    const reply = buildIpv4({ saddr: '10.244.2.5', daddr: NODE_IP, proto: 'tcp', sport: 8080, dport: snat, tcpFlags: TCP_SYN | TCP_ACK });
    const out = translated(t, h.ingress(reply), reply, `reply to SNAT port ${snat}`);
    t.same([out.daddr, out.dport], [client, 62000], `SNAT port ${snat} goes back to ${client}`);
  }
});

t.test('many flows to one backend never share a SNAT port', async (t) => {
  h.clearCt();
  const ports = new Set<number>();
  const n = 200;
  for (let i = 0; i < n; i++) {
    const client = `203.0.113.${10 + (i % 50)}`;
    const out = parseIpv4(h.ingress(syn(client, 40000 + Math.floor(i / 50))).packetOut);
    t.equal(out.daddr, '10.244.2.5');
    ports.add(out.sport);
  }
  t.equal(ports.size, n, `${n} flows, ${n} distinct SNAT ports`);
});

t.test('with no free SNAT port the new flow is dropped', async (t) => {
  h.clearCt();
  h.configure(NODE_IP, 62000, 62000);
  t.teardown(() => h.configure(NODE_IP, SNAT_MIN, SNAT_MAX));
  translated(t, h.ingress(syn('203.0.113.7', 40000)), syn('203.0.113.7', 40000), 'the flow that takes the only port');
  const res = h.ingress(syn('203.0.113.8', 40000));
  t.equal(res.retval, TC_ACT_SHOT, 'the next flow to the same backend is dropped');
  t.equal(h.ctEntries().length, 2, 'and leaves no entry behind');
});

t.test('without a node address to SNAT to, a flow to a remote backend is dropped', async (t) => {
  h.clearCt();
  h.configure('0.0.0.0');
  t.teardown(() => h.configure(NODE_IP, SNAT_MIN, SNAT_MAX));
  t.equal(h.ingress(syn(CLIENT, 40000)).retval, TC_ACT_SHOT);
  t.equal(h.ctEntries().length, 0);
});

t.test("a config without a usable SNAT range falls back to the agent's range", async (t) => {
  t.teardown(() => h.configure(NODE_IP, SNAT_MIN, SNAT_MAX));
  for (const [min, max] of [
    [0, 0],
    [0, 62000],
    [63000, 62000],
  ] as const) {
    h.clearCt();
    h.configure(NODE_IP, min, max);
    const input = syn(CLIENT, 40000);
    const out = translated(t, h.ingress(input), input, `range ${min}-${max}`);
    t.ok(out.sport >= SNAT_MIN && out.sport <= SNAT_MAX, `range ${min}-${max}: source port ${out.sport} from ${SNAT_MIN}-${SNAT_MAX}`);
  }
});

t.test('only packets to a port of the SNAT range are looked up as replies', async (t) => {
  h.clearCt();
  const fwd = parseIpv4(h.ingress(syn(CLIENT, 40004)).packetOut);
  const [rkey, rval] = h.ctEntries().find(([k]) => k.dir === CT_DIR_REPLY_IN)!;
  // The same reply entry at a port below the range: one the datapath never makes.
  h.ct.put({ ...rkey, dport: 22 }, rval);
  const reply = (dport: number) =>
    buildIpv4({ saddr: fwd.daddr, daddr: NODE_IP, proto: 'tcp', sport: fwd.dport, dport, tcpFlags: TCP_SYN | TCP_ACK });
  untouched(t, h.ingress(reply(22)), reply(22), 'to port 22');
  const out = translated(t, h.ingress(reply(fwd.sport)), reply(fwd.sport), `to the SNAT port ${fwd.sport}`);
  t.same([out.daddr, out.dport], [CLIENT, 40004], 'the reply in range goes back to the client');
});

t.test('IP options move the TCP header, and the translation follows it', async (t) => {
  h.clearCt();
  const input = buildIpv4({
    saddr: CLIENT,
    daddr: NODE_IP,
    proto: 'tcp',
    sport: 40002,
    dport: NODE_PORT,
    options: Buffer.from([1, 1, 1, 0, 1, 1, 1, 0]),
  });
  const out = translated(t, h.ingress(input), input, 'SYN with 8 bytes of IP options');
  t.equal(out.l4Offset, 14 + 28);
  t.same([out.saddr, out.daddr, out.dport], [NODE_IP, '10.244.2.5', 8080]);
  t.same(input.subarray(34, 42), h.ingress(input).packetOut.subarray(34, 42), 'the options are untouched');
});

t.test("an established flow's packets take the conntrack path: no new entry, no new SNAT port", async (t) => {
  // How long a packet takes is make bench's; here, what it does: each later
  // packet of the flow is translated once (one counter, by one) exactly like
  // its SYN, and the conntrack table is what the SYN left. (Not one run with
  // repeat: the kernel reruns the program on the packet it already rewrote.)
  h.clearCt();
  const first = parseIpv4(h.ingress(syn(CLIENT, 40003)).packetOut);
  // last_seen moves with every packet (the flow is kept alive); the rest may not.
  const table = () => JSON.stringify(h.ctEntries().map(([k, { last_seen: _seen, ...v }]) => [k, v]));
  const entries = table();
  const next = buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'tcp', sport: 40003, dport: NODE_PORT, tcpFlags: TCP_ACK });
  const seen = new Set<string>();
  const moved: Record<string, number> = {};
  for (let i = 0; i < 100; i++) {
    let res: ReturnType<typeof h.ingress> | undefined;
    for (const [k, n] of Object.entries(
      h.countsOf(() => {
        res = h.ingress(next);
      }),
    ))
      moved[k] = (moved[k] ?? 0) + n;
    const out = parseIpv4(res!.packetOut);
    seen.add(JSON.stringify([out.saddr, out.sport, out.daddr, out.dport]));
  }
  t.same(moved, { 'tc_ingress/translated': 100 }, '100 packets: each translated, once');
  t.same(
    [...seen],
    [JSON.stringify([first.saddr, first.sport, first.daddr, first.dport])],
    'each like the SYN: the same backend and SNAT port',
  );
  t.equal(table(), entries, "the conntrack entries are the SYN's (but for last_seen)");
});
