// Conversion of map entries between layouts by field name
// (src/maps/migration/convert.ts): the recorded layouts of svcmap_be, this
// build's and the test layout's, both ways; and the rules on made-up ones.
import t from 'tap';
import { backendValue } from '../../src/maps/codecs.ts';
import { LAYOUTS, TEST_LAYOUTS } from '../../src/maps/generated/layouts.gen.ts';
import type { MapLayout } from '../../src/maps/layout-versions.ts';
import { converter, fieldChanges, fieldCopies } from '../../src/maps/migration/convert.ts';
import { backendsMap } from '../../src/maps/registry.ts';

const v1 = LAYOUTS[backendsMap.name]![1]!;
const test = TEST_LAYOUTS[backendsMap.name]!;

function backendBytes(): { key: Buffer; value: Buffer } {
  const key = Buffer.alloc(4);
  key.writeUInt32LE(7);
  const value = Buffer.alloc(12);
  backendValue.encode({ addr: '10.244.2.10', port: 8080, proto: 6, state: 1, flags: 2, zone: 3 }, value, 0);
  return { key, value };
}

t.test('a backend value gains reserved_test as zero, every other field kept, and loses it on the way back', async (t) => {
  const { key, value } = backendBytes();
  const up = converter(v1, test).convert(key, value)!;
  t.equal(up.value.length, 16);
  t.same(up.key, key, 'the key (backend id) is the same');
  t.same(up.value.subarray(0, 12), value, 'addr, port, proto, state, flags, pad, zone: the same bytes');
  t.same(up.value.subarray(12), Buffer.alloc(4), 'reserved_test is zero');
  const marked = Buffer.from(up.value);
  marked.writeUInt32LE(0xdeadbeef, 12);
  const down = converter(test, v1).convert(key, marked)!;
  t.same(down.value, value, 'back: the same 12 bytes, reserved_test dropped');
  t.same(fieldChanges(v1, test), { dropped: [], zeroed: ['value.reserved_test'] });
  t.same(fieldChanges(test, v1), { dropped: ['value.reserved_test'], zeroed: [] });
});

t.test('the same layout converts to the same bytes (a resize)', async (t) => {
  const { key, value } = backendBytes();
  const same = converter(v1, v1).convert(key, value)!;
  t.equal(same.value, value, 'the buffer itself: nothing to convert');
  t.same(fieldChanges(v1, v1), { dropped: [], zeroed: [] });
});

const layout = (fields: Array<[string, number, number]>, size: number): MapLayout => ({
  type: 1,
  flags: 0,
  keySize: 4,
  valueSize: size,
  key: { type: '__u32', size: 4, fields: [['value', 0, 4]] },
  value: { type: 'v', size, fields },
});

t.test('fields move by name; one whose size changed is not copied (an override converts it)', async (t) => {
  const from = layout(
    [
      ['a', 0, 4],
      ['b', 4, 2],
      ['c', 6, 2],
    ],
    8,
  );
  const to = layout(
    [
      ['c', 0, 2],
      ['new', 2, 2],
      ['a', 4, 4],
      ['b', 8, 4],
    ],
    12,
  );
  t.same(
    fieldCopies(from.value, to.value).map((c) => c.field),
    ['c', 'a'],
  );
  const v = Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]);
  const out = converter(from, to).convert(Buffer.alloc(4), v)!.value;
  t.same([...out], [7, 8, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0], 'c to offset 0, new zero, a to 4, b (2 -> 4 bytes) zero');
  t.same(fieldChanges(from, to), { dropped: ['value.b'], zeroed: ['value.new', 'value.b'] });
  const override = converter(from, to, (k, val) => ({ key: k, value: Buffer.concat([val, Buffer.alloc(4)]) }));
  t.same([...override.convert(Buffer.alloc(4), v)!.value], [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0], 'an override converts whole entries');
});
