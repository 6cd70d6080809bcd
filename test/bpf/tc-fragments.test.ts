// IP fragments through svcmap_tc_in / svcmap_tc_out (BPF_PROG_TEST_RUN,
// nothing attached): the first fragment of a datagram to a frontend is
// translated with its flow (ports, addresses, the UDP checksum that covers
// the whole datagram), and the datagram's later fragments, which carry no
// ports, get the same addresses (the IPv4 header checksum only, their
// payload byte for byte), found by {saddr, daddr, IP id, proto} in a
// CT_DIR_FRAG entry that goes with the last fragment. Both ways: DNAT +
// SNAT to a remote backend and its fragmented answer at ingress, DNAT to a
// local backend and its answer at egress. Fragments of anything else, a
// later fragment ahead of its first, and ICMP fragments pass untouched and
// count as `fragment`. The datagrams the fragments add up to are checked
// with the fixtures' own checksum code.
import t, { type Test } from 'tap';
import type { TestRunResult } from '../../src/bpf/test-run.ts';
import { CT_DIR_FRAG, SVC_F_NODEPORT } from '../../src/maps/constants.ts';
import {
  ETH_HLEN,
  buildIpv4,
  computeL4Checksum,
  fragmentIpv4,
  ipv4HeaderValid,
  l4ChecksumValid,
  parseIpv4,
  reassembleIpv4,
} from './fixtures/packets.ts';
import { untouched } from './fixtures/tc-expect.ts';
import { TC_ACT_OK, TC_ACT_REDIRECT, TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const CLIENT = '203.0.113.7';
const REMOTE = { id: 41, addr: '10.244.2.60', port: 9000 };
const LOCAL = { id: 42, addr: '10.244.1.60', port: 9001, local: true };

const h = TcHarness.open({ ctMax: 4096 });
t.teardown(() => h.close());
h.configure(NODE_IP);
h.addService({ addr: NODE_IP, port: 30200, proto: 'udp', revNatId: 1, flags: SVC_F_NODEPORT, backends: [REMOTE] });
h.addService({ addr: NODE_IP, port: 30201, proto: 'udp', revNatId: 2, flags: SVC_F_NODEPORT, backends: [LOCAL] });

/** 3000 bytes that are not all alike, so a misplaced rewrite shows. */
const DATA = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7 + 3) & 0xff));
const datagram = (saddr: string, daddr: string, sport: number, dport: number, id: number) =>
  buildIpv4({ saddr, daddr, proto: 'udp', sport, dport, id, payload: DATA });

const fragEntries = () => h.ctEntries().filter(([k]) => k.dir === CT_DIR_FRAG);

/**
 * Each fragment went on (translated to saddr -> daddr, header checksum
 * right, same length, what follows the IP header unchanged except in the
 * first); the datagram they add up to has a UDP checksum that verifies.
 */
function fragmentsTranslated(t: Test, results: TestRunResult[], input: Buffer[], saddr: string, daddr: string, what: string) {
  results.forEach((res, i) => {
    const w = `${what}: fragment ${i + 1}/${results.length}`;
    t.ok(res.retval === TC_ACT_OK || res.retval === TC_ACT_REDIRECT, `${w}: passed on (retval ${res.retval})`);
    t.equal(res.packetOut.length, input[i]!.length, `${w}: same length`);
    t.ok(ipv4HeaderValid(res.packetOut), `${w}: the IPv4 header checksum verifies`);
    const src = res.packetOut.subarray(ETH_HLEN + 12, ETH_HLEN + 16).join('.');
    const dst = res.packetOut.subarray(ETH_HLEN + 16, ETH_HLEN + 20).join('.');
    t.same([src, dst], [saddr, daddr], `${w}: ${saddr} -> ${daddr}`);
    if (i > 0) t.ok(res.packetOut.subarray(ETH_HLEN + 20).equals(input[i]!.subarray(ETH_HLEN + 20)), `${w}: payload byte for byte`);
  });
  const whole = reassembleIpv4(results.map((r) => r.packetOut));
  t.ok(l4ChecksumValid(whole), `${what}: the reassembled datagram's UDP checksum verifies`);
  t.equal(parseIpv4(whole).l4Checksum, computeL4Checksum(whole), `${what}: and equals a recomputation`);
  t.ok(parseIpv4(whole).payload.equals(DATA), `${what}: the data arrives whole`);
  return parseIpv4(whole);
}

t.test('a fragmented datagram to a remote backend: every fragment DNATed and SNATed, and the fragmented answer back', async (t) => {
  h.clearCt();
  const frags = fragmentIpv4(datagram(CLIENT, NODE_IP, 40000, 30200, 0x1111), 1480);
  t.equal(frags.length, 3, 'three fragments');
  const counts = h.countsOf(() => {
    const out = fragmentsTranslated(
      t,
      frags.map((f) => h.ingress(f)),
      frags,
      NODE_IP,
      REMOTE.addr,
      'request',
    );
    t.equal(out.dport, REMOTE.port, 'to the backend port');
    t.ok(out.sport >= 61000, `from a SNAT port (${out.sport})`);
    t.equal(fragEntries().length, 0, "the datagram's fragment entry went with its last fragment");

    const answer = fragmentIpv4(datagram(REMOTE.addr, NODE_IP, REMOTE.port, out.sport, 0x2222), 1480);
    const back = fragmentsTranslated(
      t,
      answer.map((f) => h.ingress(f)),
      answer,
      NODE_IP,
      CLIENT,
      'answer',
    );
    t.same([back.sport, back.dport], [30200, 40000], 'the client sees the NodePort answer');
  });
  t.equal(counts['tc_ingress/fragment'], undefined, 'no fragment left untranslated');
  t.equal(h.ctEntries().length, 2, "the flow's two entries remain");
});

t.test('a local backend: DNAT at ingress, the fragmented answer translated at egress', async (t) => {
  h.clearCt();
  const frags = fragmentIpv4(datagram(CLIENT, NODE_IP, 40001, 30201, 0x3333), 1480);
  const out = fragmentsTranslated(
    t,
    frags.map((f) => h.ingress(f)),
    frags,
    CLIENT,
    LOCAL.addr,
    'request',
  );
  t.equal(out.dport, LOCAL.port);
  const answer = fragmentIpv4(datagram(LOCAL.addr, CLIENT, LOCAL.port, 40001, 0x4444), 1480);
  const results = answer.map((f) => h.egress(f));
  const back = fragmentsTranslated(t, results, answer, NODE_IP, CLIENT, 'answer at egress');
  t.same([back.sport, back.dport], [30201, 40001]);
  t.equal(fragEntries().length, 0, 'no fragment entry left');
});

t.test('fragments svcmap does not translate pass untouched, counted as fragment', async (t) => {
  h.clearCt();
  // Not for a frontend: the first passes (not a frontend), the others find no entry.
  const other = fragmentIpv4(datagram(CLIENT, NODE_IP, 40002, 31999, 0x5555), 1480);
  for (const [i, f] of other.entries()) untouched(t, h.ingress(f), f, `not a frontend, fragment ${i + 1}`);
  t.same(
    h.countsOf(() => h.ingress(other[1]!)),
    { 'tc_ingress/fragment': 1 },
    'a later fragment of it counts as fragment',
  );
  t.same(
    h.countsOf(() => h.egress(other[1]!)),
    { 'tc_egress/fragment': 1 },
    'also at egress',
  );
  // A later fragment ahead of its first: nothing to translate it by.
  const early = fragmentIpv4(datagram(CLIENT, NODE_IP, 40003, 30200, 0x6666), 1480);
  untouched(t, h.ingress(early[2]!), early[2]!, 'a last fragment ahead of its first');
  t.equal(h.ctEntries().length, 0, 'no entries');
  // The datagram's own first fragment then goes through; the fragment that came early is lost, as on the wire.
  const first = h.ingress(early[0]!);
  t.ok(first.retval === TC_ACT_OK || first.retval === TC_ACT_REDIRECT, 'its first fragment is translated when it comes');
  const mid = h.ingress(early[1]!);
  t.equal(mid.packetOut.subarray(ETH_HLEN + 16, ETH_HLEN + 20).join('.'), REMOTE.addr, 'and the next one with it');
  t.equal(fragEntries().length, 1, 'the entry waits for the last fragment (or the GC)');
});
