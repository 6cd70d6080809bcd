// UDP through svcmap_tc_in / svcmap_tc_out: a datagram with a checksum gets
// it recomputed right, a zero ("no checksum") stays zero through DNAT, SNAT
// and the reverse translations, and a checksum that comes out as zero is
// sent as 0xffff, never as "none".
import t from 'tap';
import { SVC_F_NODEPORT } from '../../src/maps/constants.ts';
import { buildIpv4, computeL4Checksum, parseIpv4 } from './fixtures/packets.ts';
import { translated } from './fixtures/tc-expect.ts';
import { TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const CLIENT = '203.0.113.7';
const REMOTE = { id: 31, addr: '10.244.2.53', port: 53 };
const LOCAL = { id: 32, addr: '10.244.1.53', port: 5353, local: true };

const h = TcHarness.open();
t.teardown(() => h.close());
h.configure(NODE_IP);
h.addService({ addr: NODE_IP, port: 30053, proto: 'udp', revNatId: 1, flags: SVC_F_NODEPORT, backends: [REMOTE] });
h.addService({ addr: NODE_IP, port: 30054, proto: 'udp', revNatId: 2, flags: SVC_F_NODEPORT, backends: [LOCAL] });

const query = Buffer.from('00010100000100000000000003777777076578616d706c6503636f6d0000010001', 'hex');

t.test('UDP with a checksum: recomputed right both ways', async (t) => {
  h.clearCt();
  const input = buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 40000, dport: 30053, payload: query });
  t.not(parseIpv4(input).l4Checksum, 0, 'the client sent a checksum');
  const out = translated(t, h.ingress(input), input, 'query');
  t.same([out.saddr, out.daddr, out.dport], [NODE_IP, REMOTE.addr, REMOTE.port], 'DNAT + SNAT');
  t.not(out.l4Checksum, 0, 'still carries a checksum');

  const reply = buildIpv4({
    saddr: REMOTE.addr,
    daddr: NODE_IP,
    proto: 'udp',
    sport: REMOTE.port,
    dport: out.sport,
    payload: Buffer.concat([query, Buffer.from('answer')]),
  });
  const back = translated(t, h.ingress(reply), reply, 'answer');
  t.same([back.saddr, back.sport, back.daddr, back.dport], [NODE_IP, 30053, CLIENT, 40000]);
});

t.test('UDP with a zero checksum: stays zero through every translation', async (t) => {
  h.clearCt();
  const input = buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 40001, dport: 30053, payload: query, udpNoChecksum: true });
  const out = translated(t, h.ingress(input), input, 'query without checksum');
  t.equal(out.l4Checksum, 0, 'DNAT + SNAT leave the zero alone');
  t.same([out.saddr, out.daddr, out.dport], [NODE_IP, REMOTE.addr, REMOTE.port]);

  const reply = buildIpv4({
    saddr: REMOTE.addr,
    daddr: NODE_IP,
    proto: 'udp',
    sport: REMOTE.port,
    dport: out.sport,
    payload: query,
    udpNoChecksum: true,
  });
  const back = translated(t, h.ingress(reply), reply, 'answer without checksum');
  t.equal(back.l4Checksum, 0, 'the reverse translation leaves it alone too');
  t.same([back.saddr, back.sport, back.daddr, back.dport], [NODE_IP, 30053, CLIENT, 40001]);

  const local = buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 40002, dport: 30054, payload: query, udpNoChecksum: true });
  const l = translated(t, h.ingress(local), local, 'to a local backend');
  t.equal(l.l4Checksum, 0);
  const lreply = buildIpv4({
    saddr: LOCAL.addr,
    daddr: CLIENT,
    proto: 'udp',
    sport: LOCAL.port,
    dport: 40002,
    payload: query,
    udpNoChecksum: true,
  });
  const lb = translated(t, h.egress(lreply), lreply, 'egress reply');
  t.equal(lb.l4Checksum, 0, 'and so does the egress source rewrite');
  t.same([lb.saddr, lb.sport], [NODE_IP, 30054]);
});

t.test('a checksum that comes out as zero is written as 0xffff', async (t) => {
  h.clearCt();
  // The client port is in the SNAT range and free, so the flow keeps it: the
  // translated datagram is known in advance. Choose two payload bytes so that
  // its checksum computes to zero.
  const sport = 62000;
  const tail = Buffer.from('padding');
  const expectedOut = (word: number) => {
    const p = Buffer.concat([Buffer.alloc(2), tail]);
    p.writeUInt16BE(word, 0);
    return buildIpv4({ saddr: NODE_IP, daddr: REMOTE.addr, proto: 'udp', sport, dport: REMOTE.port, payload: p, udpNoChecksum: true });
  };
  // With the word at zero the checksum is ~S; a word of ~S makes the sum all ones.
  const word = computeL4Checksum(expectedOut(0));
  const payload = expectedOut(word).subarray(14 + 20 + 8);
  const input = buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport, dport: 30053, payload });
  t.not(parseIpv4(input).l4Checksum, 0xffff, 'the incoming checksum is an ordinary one');

  const out = translated(t, h.ingress(input), input, 'datagram whose new checksum is zero');
  t.equal(out.sport, sport, 'the SNAT port is the client port, as planned');
  t.equal(out.l4Checksum, 0xffff, 'sent as 0xffff (a zero would mean "no checksum")');
});

t.test('UDP flows keep their backend and SNAT port', async (t) => {
  h.clearCt();
  const first = parseIpv4(
    h.ingress(buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 40003, dport: 30053, payload: query })).packetOut,
  );
  for (let i = 0; i < 5; i++) {
    const next = buildIpv4({
      saddr: CLIENT,
      daddr: NODE_IP,
      proto: 'udp',
      sport: 40003,
      dport: 30053,
      payload: Buffer.from(`datagram ${i}`),
    });
    const out = translated(t, h.ingress(next), next, `datagram ${i}`);
    t.same([out.saddr, out.sport, out.daddr, out.dport], [first.saddr, first.sport, first.daddr, first.dport]);
  }
});
