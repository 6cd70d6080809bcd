// The packet fixtures the tc tests trust: their checksum code against
// published vectors and a second, naive implementation, and their builder
// and parser against each other. (No BPF here.)
import t from 'tap';
import { buildIpv4, computeL4Checksum, ipv4HeaderValid, l4ChecksumValid, onesSum, parseIpv4 } from './fixtures/packets.ts';

/** The textbook loop: 16-bit words, end-around carry at the end. */
function naiveSum(b: Buffer): number {
  let s = 0;
  for (let i = 0; i < b.length; i += 2) s += b.readUInt16BE(i);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

t.test("one's-complement sum: RFC 1071's worked example", async (t) => {
  t.equal(onesSum(Buffer.from('0001f203f4f5f6f7', 'hex')), 0xddf2);
});

t.test('IPv4 header checksum: a published header verifies, a changed one does not', async (t) => {
  // 192.168.0.1 -> 192.168.0.199, UDP, checksum 0xb861.
  const frame = Buffer.concat([
    Buffer.alloc(12),
    Buffer.from('0800', 'hex'),
    Buffer.from('450000730000400040110000c0a80001c0a800c7', 'hex'),
  ]);
  frame.writeUInt16BE(0xb861, 14 + 10);
  t.ok(ipv4HeaderValid(frame));
  frame[14 + 8] = 63;
  t.notOk(ipv4HeaderValid(frame));
});

t.test('the two sum implementations agree on random data', async (t) => {
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) & 0xff;
  for (let n = 0; n < 200; n++) {
    const b = Buffer.alloc(2 * (1 + (n % 40)));
    for (let i = 0; i < b.length; i++) b[i] = rnd();
    if (onesSum(b) !== naiveSum(b)) t.fail(`mismatch on ${b.toString('hex')}`);
  }
  t.pass('200 random buffers');
});

t.test('built frames verify, and any changed byte is caught', async (t) => {
  for (const proto of ['tcp', 'udp'] as const) {
    const f = buildIpv4({
      saddr: '203.0.113.7',
      daddr: '198.51.100.1',
      proto,
      sport: 40000,
      dport: 30080,
      payload: Buffer.from('odd-length!'),
    });
    t.ok(ipv4HeaderValid(f), `${proto}: IP header`);
    t.ok(l4ChecksumValid(f), `${proto}: L4 checksum`);
    t.equal(parseIpv4(f).l4Checksum, computeL4Checksum(f), `${proto}: the builder and the from-scratch computation agree`);
    for (const at of [14 + 12, 14 + 19, 34, 37, f.length - 1]) {
      const g = Buffer.from(f);
      g[at] = g[at]! ^ 0x10;
      t.notOk(at < 34 ? ipv4HeaderValid(g) && l4ChecksumValid(g) : l4ChecksumValid(g), `${proto}: byte ${at} changed is caught`);
    }
    const p = parseIpv4(f);
    t.same([p.saddr, p.daddr, p.sport, p.dport, p.payload.toString()], ['203.0.113.7', '198.51.100.1', 40000, 30080, 'odd-length!']);
  }
  const none = buildIpv4({ saddr: '203.0.113.7', daddr: '198.51.100.1', proto: 'udp', sport: 1, dport: 2, udpNoChecksum: true });
  t.equal(parseIpv4(none).l4Checksum, 0, 'a UDP frame without checksum');
  t.ok(l4ChecksumValid(none), 'is valid as such');
});
