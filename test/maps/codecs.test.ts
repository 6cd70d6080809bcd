// Codecs round-trip, put bytes where the C structs have them, and use network
// byte order for addresses and ports.
import t from 'tap';
import * as c from '../../src/maps/codecs.ts';
import { ALL_MAPS } from '../../src/maps/registry.ts';
import { layoutProblems } from '../../src/maps/layout.ts';

const roundTrip = <T>(codec: c.Codec<T>, v: T): T => {
  const buf = Buffer.alloc(codec.layout.size + 8, 0xee);
  codec.encode(v, buf, 4);
  t.equal(buf[3], 0xee, `${codec.layout.cName}: does not write before its offset`);
  t.equal(buf[4 + codec.layout.size], 0xee, `${codec.layout.cName}: does not write past its size`);
  return codec.decode(buf, 4);
};

t.test('every codec round-trips', async (t) => {
  const key: c.SvcKey = { addr: '10.96.0.10', port: 443, slot: 7, proto: 6, scope: 1 };
  t.same(roundTrip(c.svcKey, key), key);
  const val: c.SvcValue = { backend_id: 0xfffffffe, rev_nat_id: 70000, count: 65535, flags: 0x2ff, algorithm: 0, affinity_timeout: 10800 };
  t.same(roundTrip(c.svcValue, val), val);
  const be: c.BackendValue = { addr: '255.255.255.254', port: 65535, proto: 17, state: 1, flags: 1, zone: 513 };
  t.same(roundTrip(c.backendValue, be), be);
  t.equal(roundTrip(c.backendId, 123456789), 123456789);
  t.same(roundTrip(c.revNatValue, { addr: '1.2.3.4', port: 53 }), { addr: '1.2.3.4', port: 53 });
  const sk: c.SkRevNatKey = { cookie: 0x1234_5678_9abc_def0n, addr: '10.244.1.2', port: 8080 };
  t.same(roundTrip(c.skRevNatKey, sk), sk);
  t.same(roundTrip(c.skRevNatValue, { addr: '10.96.0.1', port: 80, rev_nat_id: 9 }), { addr: '10.96.0.1', port: 80, rev_nat_id: 9 });
  const ak: c.AffinityKey = { netns_cookie: 0x1000_0000_0000_4097n, client_addr: '203.0.113.7', rev_nat_id: 0xfffffff0, origin: 2 };
  t.same(roundTrip(c.affinityKey, ak), ak);
  const av: c.AffinityValue = { last_used: 0xffff_ffff_ffffn, backend_id: 70000, slot: 65535 };
  t.same(roundTrip(c.affinityValue, av), av);
});

t.test('the IPv6 codecs round-trip and put the 16 address bytes first, in network order', async (t) => {
  const key: c.SvcKey = { addr: 'fd00:10:96::a', port: 443, slot: 7, proto: 6, scope: 1 };
  t.same(roundTrip(c.svc6Key, key), key);
  const be: c.BackendValue = { addr: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe', port: 65535, proto: 17, state: 1, flags: 1, zone: 513 };
  t.same(roundTrip(c.backend6Value, be), be);
  t.same(roundTrip(c.revNat6Value, { addr: '::1', port: 53 }), { addr: '::1', port: 53 });
  const buf = Buffer.alloc(24, 0xff);
  c.svc6Key.encode({ addr: 'fd00::1:2', port: 0x1f90, slot: 0x0102, proto: 17, scope: 0 }, buf, 0);
  t.same([...buf.subarray(0, 16)], [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2]);
  t.same([...buf.subarray(16, 18)], [0x1f, 0x90], 'port big-endian');
  t.equal(buf.readUInt16LE(18), 0x0102, 'slot in host order');
  t.same([...buf.subarray(20, 24)], [17, 0, 0, 0], 'proto, scope, zeroed padding');
});

t.test('a zone name is UTF-8, NUL-terminated, zero-filled; one that leaves no room for the NUL is refused', async (t) => {
  t.same(roundTrip(c.zoneNameValue, { name: 'eu-west-1a' }), { name: 'eu-west-1a' });
  t.same(roundTrip(c.zoneNameValue, { name: 'zöne' }), { name: 'zöne' }, 'UTF-8');
  const max = 'z'.repeat(c.zoneNameValue.layout.size - 1);
  t.same(roundTrip(c.zoneNameValue, { name: max }), { name: max }, '63 bytes fit');
  const buf = Buffer.alloc(64, 0xff);
  c.zoneNameValue.encode({ name: 'ab' }, buf, 0);
  t.same([...buf.subarray(0, 4)], [0x61, 0x62, 0, 0], 'the name, then zeros');
  t.ok(
    buf.subarray(2).every((b) => b === 0),
    'the rest zero-filled',
  );
  t.throws(() => c.zoneNameValue.encode({ name: 'z'.repeat(64) }, buf, 0), /zone_name\.name: .* is 64 bytes; at most 63 fit/);
});

t.test('the affinity key puts the client address in network order and zeroes its padding', async (t) => {
  const buf = Buffer.alloc(24, 0xff);
  c.affinityKey.encode({ netns_cookie: 5n, client_addr: '203.0.113.7', rev_nat_id: 3, origin: 1 }, buf, 0);
  t.equal(buf.readBigUInt64LE(0), 5n);
  t.same([...buf.subarray(8, 12)], [203, 0, 113, 7]);
  t.equal(buf.readUInt32LE(12), 3);
  t.equal(buf[16], 1);
  t.same([...buf.subarray(17, 24)], [0, 0, 0, 0, 0, 0, 0]);
});

t.test('addresses and ports are network byte order, ids host order', async (t) => {
  const buf = Buffer.alloc(12);
  c.svcKey.encode({ addr: '10.96.0.10', port: 0x1f90, slot: 0x0102, proto: 6, scope: 0 }, buf, 0);
  t.same([...buf.subarray(0, 4)], [10, 96, 0, 10], 'address bytes in order');
  t.same([...buf.subarray(4, 6)], [0x1f, 0x90], 'port big-endian');
  t.equal(buf.readUInt16LE(6), 0x0102, 'slot in host (little-endian) order');
  t.equal(buf[8], 6);
  t.same([...buf.subarray(10, 12)], [0, 0], 'padding is zero');
});

t.test('padding is zeroed even when the buffer was dirty', async (t) => {
  const buf = Buffer.alloc(20, 0xff);
  c.svcValue.encode({ backend_id: 1, rev_nat_id: 2, count: 3, flags: 4, algorithm: 5, affinity_timeout: 6 }, buf, 0);
  t.same([...buf.subarray(13, 16)], [0, 0, 0]);
});

t.test('layouts are well formed', async (t) => {
  for (const spec of ALL_MAPS) {
    t.same(layoutProblems(spec.key.layout), [], `${spec.name} key`);
    t.same(layoutProblems(spec.value.layout), [], `${spec.name} value`);
  }
});
