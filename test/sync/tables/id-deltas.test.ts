// IdDeltas (src/sync/tables/id-deltas.ts), a plan's reference changes by backend id:
// it sums as a Map<number, number> would, through growth, ids at the ends of
// the u32 range and ids whose hashes collide, and iterates in the order the
// ids came, as a Map does.
import t from 'tap';
import { IdDeltas } from '../../../src/sync/tables/id-deltas.ts';

t.test('sums and iterates as a Map, in insertion order', async (t) => {
  let x = 12345;
  const next = () => (x = (Math.imul(x, 1103515245) + 12345) >>> 0);
  const d = new IdDeltas();
  const ref = new Map<number, number>();
  const edges = [0, 1, 2, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff];
  let agree = true;
  for (let step = 0; step < 50000; step++) {
    // Mostly few ids (sums of many adds), some from the whole range.
    const r = next();
    const id = step % 97 === 0 ? edges[r % edges.length]! : r % 3 === 0 ? r : 1 + (r % 5000);
    const v = (r >>> 8) % 2 ? 1 : -1;
    d.add(id, v);
    ref.set(id, (ref.get(id) ?? 0) + v);
    if (d.get(id) !== ref.get(id)) agree = false;
  }
  t.ok(agree, 'each sum as the Map has it, at every step');
  t.equal(d.size, ref.size);
  t.same([...d], [...ref], 'the same entries in the same order');
  t.same([...d.keys()], [...ref.keys()]);
  t.equal(d.get(4_000_000_000), ref.get(4_000_000_000), 'an id never added: undefined');
  const zero = new IdDeltas();
  zero.add(7, 1);
  zero.add(7, -1);
  t.equal(zero.get(7), 0, 'a sum of zero is kept (the id was touched)');
  t.same([...zero.keys()], [7]);
});
