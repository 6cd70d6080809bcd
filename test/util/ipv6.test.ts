import t from 'tap';
import { bytesToIpv6, canonicalCidrv6, canonicalIpv6, formatIpv6, ipv6SortKey, ipv6ToBytes, parseIpv6 } from '../../src/util/ipv6.ts';

// The WHATWG URL parser writes IPv6 hosts in RFC 5952 form: an independent
// implementation to hold ours to.
const whatwg = (ip: string) => new URL(`http://[${ip}]/`).hostname.slice(1, -1);

t.test('RFC 5952 examples', async (t) => {
  t.equal(canonicalIpv6('2001:db8:0:0:0:0:2:1'), '2001:db8::2:1');
  t.equal(canonicalIpv6('2001:db8::0:1'), '2001:db8::1');
  t.equal(canonicalIpv6('2001:db8:0:1:1:1:1:1'), '2001:db8:0:1:1:1:1:1', 'one zero group is not compressed');
  t.equal(canonicalIpv6('2001:0:0:1:0:0:0:1'), '2001:0:0:1::1', 'the longest run');
  t.equal(canonicalIpv6('2001:db8:0:0:1:0:0:1'), '2001:db8::1:0:0:1', 'the first of equal runs');
  t.equal(canonicalIpv6('2001:DB8::AbC'), '2001:db8::abc', 'lowercase');
  t.equal(canonicalIpv6('::'), '::');
  t.equal(canonicalIpv6('::1'), '::1');
  t.equal(canonicalIpv6('fd00::'), 'fd00::');
});

t.test('not IPv6', async (t) => {
  for (const bad of [
    '',
    ':',
    ':::',
    '1::2::3',
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7::8',
    '12345::',
    'g::',
    'fd00::1%eth0',
    '[fd00::1]',
    ' fd00::1',
    '10.0.0.1',
    '::1.2.3.256',
    '::1.2.3',
    '1.2.3.4::',
    ':1::',
    '1::2:',
  ]) {
    t.equal(parseIpv6(bad), undefined, JSON.stringify(bad));
  }
  t.equal(canonicalIpv6('::ffff:10.96.0.10'), undefined, 'IPv4-mapped is IPv4 to Kubernetes');
  t.equal(canonicalCidrv6('fd00::/129'), undefined);
  t.equal(canonicalCidrv6('FD00:0::/08'), 'fd00::/8');
});

t.test('random addresses: canonical text as WHATWG writes it, and bytes round-trip', async (t) => {
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (let i = 0; i < 2000; i++) {
    // Zero groups are common so that runs of them are too.
    const g = Array.from({ length: 8 }, () => (rnd() < 0.5 ? 0 : Math.floor(rnd() * 65536)));
    if (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || g[5] === 0)) g[5] = 1; // WHATWG has no mapped/compat special case; ours rejects mapped
    const text = formatIpv6(g);
    t.equal(text, whatwg(g.map((x) => x.toString(16)).join(':')), `format ${g}`);
    t.equal(canonicalIpv6(g.map((x) => x.toString(16).padStart(4, '0').toUpperCase()).join(':')), text);
    t.equal(bytesToIpv6(ipv6ToBytes(text)), text);
  }
});

t.test('bytes are in network order; sort keys order numerically', async (t) => {
  t.same([...ipv6ToBytes('fd00::1:2')], [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2]);
  const sorted = ['fd00::10', 'fd00::2', '::1', 'fd00:1::'].sort((a, b) => (ipv6SortKey(a) < ipv6SortKey(b) ? -1 : 1));
  t.same(sorted, ['::1', 'fd00::2', 'fd00::10', 'fd00:1::']);
});
