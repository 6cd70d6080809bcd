// Copying a map's entries into its new map (src/maps/migration/copy.ts) on
// the real kernel: a Maglev map of maps (the new map refers to the same
// lookup tables), the merge of what the old programs changed after the copy
// (added, rewritten, removed; an entry the new side changed keeps its
// version), counters by what they grew, and a map too small for its entries.
import t from 'tap';
import { compileBpf } from '../../src/bpf/compile.ts';
import { BpfMap } from '../../src/bpf/map.ts';
import { BpfObject } from '../../src/bpf/object.ts';
import { LAYOUTS } from '../../src/maps/generated/layouts.gen.ts';
import { MaglevTables } from '../../src/maps/maglev-tables.ts';
import { converter } from '../../src/maps/migration/convert.ts';
import { CapacityError, addCounted, copyAll, mergeChanges } from '../../src/maps/migration/copy.ts';
import { backendConnsMap, backendsMap, maglevMap } from '../../src/maps/registry.ts';

const HASH = 1;
const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
};
const value = (n: number, size = 12) => Buffer.alloc(size, n);
const be = LAYOUTS[backendsMap.name]![1]!;
const same = converter(be, be);
function backends(max = 100): BpfMap {
  return BpfMap.create(HASH, 'svcmap_test_be', be.keySize, be.valueSize, max, be.flags);
}

t.test('a Maglev map of maps: the new map holds the same tables', async (t) => {
  // Two private copies of the object (no pin directory): the old map and the new one.
  const path = compileBpf({ program: 'sock' }).path;
  const objects = [BpfObject.open(path), BpfObject.open(path)];
  t.teardown(() => {
    for (const o of objects) o.close();
  });
  for (const o of objects) o.load();
  const [from, to] = objects.map((o) => o.map(maglevMap.name)) as [BpfMap, BpfMap];
  const table = Uint16Array.from([7, 1, 2, 3, 1, 2, 3, 1]);
  new MaglevTables(from).publish(42, table);
  const l = LAYOUTS[maglevMap.name]![1]!;
  t.equal(copyAll(from, to, converter(l, l)).size, 1);
  t.same(new MaglevTables(to).read(42), table, 'frontend 42 has its table in the new map');
  t.same(from.entries()[0]![1], to.entries()[0]![1], 'the same inner map (by id), not a copy');
});

t.test('the merge carries what the old side changed since the copy, unless the new side changed it too', async (t) => {
  const [from, to] = [backends(), backends()];
  t.teardown(() => {
    from.close();
    to.close();
  });
  for (const k of [1, 2, 3, 4]) from.update(u32(k), value(k));
  const copied = copyAll(from, to, same);
  from.update(u32(1), value(11)); // rewritten by the old side only
  from.update(u32(2), value(12)); // rewritten by both
  to.update(u32(2), value(22));
  from.delete(u32(3)); // gone from the old side
  from.update(u32(5), value(5)); // new on the old side
  to.update(u32(6), value(6)); // new on the new side
  const { changed } = mergeChanges(from, to, same, copied);
  const now = new Map(to.entries().map(([k, v]) => [k.readUInt32LE(), v[0]]));
  t.same(
    [...now].sort((a, b) => a[0] - b[0]),
    [
      [1, 11],
      [2, 22],
      [4, 4],
      [5, 5],
      [6, 6],
    ],
    '1 rewritten, 2 keeps the new side, 3 removed, 4 as copied, 5 added, 6 kept',
  );
  t.equal(changed, 3);
});

t.test('counters: the new map gets what the old side counted since the copy, beside its own counts', async (t) => {
  const l = LAYOUTS[backendConnsMap.name]![1]!;
  const make = () => BpfMap.create(HASH, 'svcmap_test_cn', l.keySize, l.valueSize, 100, l.flags);
  const [from, to] = [make(), make()];
  t.teardown(() => {
    from.close();
    to.close();
  });
  const conns = (sock: bigint, tc: bigint) => {
    const b = Buffer.alloc(16);
    b.writeBigInt64LE(sock, 0);
    b.writeBigInt64LE(tc, 8);
    return b;
  };
  from.update(u32(1), conns(5n, 2n));
  const copied = copyAll(from, to, converter(l, l));
  from.update(u32(1), conns(7n, 1n)); // old side: +2 socket, -1 tc
  to.update(u32(1), conns(6n, 2n)); // new side: +1 socket
  from.update(u32(2), conns(3n, 0n)); // a backend the old side started counting
  addCounted(from, to, converter(l, l), copied);
  const read = (k: number) => {
    const v = to.lookup(u32(k))!;
    return [v.readBigInt64LE(0), v.readBigInt64LE(8)];
  };
  t.same(read(1), [8n, 1n], '6 + 2 sockets, 2 - 1 tc flows');
  t.same(read(2), [3n, 0n]);
});

t.test('a new map smaller than the entries it would take: CapacityError, nothing written', async (t) => {
  const [from, to] = [backends(), backends(2)];
  t.teardown(() => {
    from.close();
    to.close();
  });
  for (const k of [1, 2, 3]) from.update(u32(k), value(k));
  t.throws(() => copyAll(from, to, same), CapacityError);
  t.throws(() => copyAll(from, to, same), /holds 3 entries, more than the 2 the new map has/);
  t.equal(to.entries().length, 0);
});
