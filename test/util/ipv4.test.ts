// The one IPv4 parser (src/util/ipv4.ts) reads addresses as kube-proxy does
// with k8s.io/utils/net ParseIPSloppy / ParseCIDRSloppy: leading zeros are
// decimal, everything else that is not four octets of 0-255 is refused.
import t from 'tap';
import { canonicalCidrv4, canonicalIpv4, ipv4ToU32, parseIpv4, u32ToIpv4 } from '../../src/util/ipv4.ts';

t.test('dotted decimal to a number and back', async (t) => {
  t.equal(parseIpv4('0.0.0.0'), 0);
  t.equal(parseIpv4('255.255.255.255'), 0xffffffff);
  t.equal(parseIpv4('10.96.0.1'), 0x0a600001);
  t.equal(u32ToIpv4(ipv4ToU32('192.168.1.255')), '192.168.1.255');
  t.ok(parseIpv4('10.0.0.9') < parseIpv4('10.0.0.10'), 'numeric order, not text order');
});

t.test('leading zeros are decimal, as ParseIPSloppy reads them, and the canonical form drops them', async (t) => {
  t.equal(canonicalIpv4('010.96.110.3'), '10.96.110.3', 'not octal (010 would be 8)');
  t.equal(canonicalIpv4('010.096.0110.003'), '10.96.110.3');
  t.equal(canonicalIpv4('000.00.0.00'), '0.0.0.0');
  t.equal(canonicalIpv4('0000000255.1.1.1'), '255.1.1.1', "any number of leading zeros (Go's dtoi stops only past 0xFFFFFF)");
  t.equal(canonicalIpv4('08.09.1.1'), '8.9.1.1', '8 and 9 are digits like any other');
});

t.test('canonical text comes back as it is; every other form equals its number printed back', async (t) => {
  for (const ip of ['0.0.0.0', '10.0.0.1', '10.196.100.123', '100.64.0.10', '255.255.255.255', '1.20.30.0']) {
    t.equal(canonicalIpv4(ip), ip, ip);
  }
  // Every leading-zero placement of a few addresses: the result is always the canonical print of the number.
  for (const ip of ['1.2.3.4', '10.0.100.0', '0.0.0.0']) {
    const octets = ip.split('.');
    for (let mask = 0; mask < 16; mask++) {
      const text = octets.map((o, i) => (mask & (1 << i) ? `0${o}` : o)).join('.');
      t.equal(canonicalIpv4(text), u32ToIpv4(ipv4ToU32(text)), text);
      t.equal(canonicalIpv4(text), ip, `${text} -> ${ip}`);
    }
  }
});

t.test('what ParseIPSloppy refuses is refused', async (t) => {
  for (const bad of [
    '',
    '10.0.0',
    '1.2.3.4.5',
    '10.0.0.256',
    '256.1.1.1',
    '0300.1.1.1',
    '10..0.1',
    '.1.2.3',
    '1.2.3.',
    '1.2.3.4.',
    ' 1.2.3.4',
    '1.2.3.4 ',
    '+1.2.3.4',
    '1.2.3.-4',
    '0x0a.1.1.1',
    'a.b.c.d',
    '10.0.0.1/32',
    '::1',
    '::ffff:10.0.0.1',
    '１.2.3.4',
  ]) {
    t.equal(parseIpv4(bad), -1, JSON.stringify(bad));
    t.equal(canonicalIpv4(bad), undefined, JSON.stringify(bad));
    t.throws(() => ipv4ToU32(bad), { message: /not an IPv4 address/ }, bad);
  }
});

t.test('CIDRs as ParseCIDRSloppy reads them: sloppy address, decimal prefix length up to 32', async (t) => {
  t.equal(canonicalCidrv4('10.0.0.0/8'), '10.0.0.0/8');
  t.equal(canonicalCidrv4('010.000.0.0/08'), '10.0.0.0/8', 'leading zeros in the address and the length');
  t.equal(canonicalCidrv4('10.1.2.3/8'), '10.1.2.3/8', 'host bits are kept here (the LPM key masks them)');
  t.equal(canonicalCidrv4('0.0.0.0/0'), '0.0.0.0/0');
  for (const bad of [
    '10.0.0.0',
    '10.0.0.0/33',
    '10.0.0.0/',
    '10.0.0.0/-1',
    '10.0.0.0/8/8',
    '10.0.0/8',
    '10.0.0.0/ 8',
    '10.0.0.0/0x8',
    '/8',
  ]) {
    t.equal(canonicalCidrv4(bad), undefined, JSON.stringify(bad));
  }
});
