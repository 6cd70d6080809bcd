// IdIndex (src/sync/tables/id-index.ts): values by id answer as a Map would,
// whether the id sits in the dense array (small ids) or the hash table
// (ids that climbed far past the count held: a long-running agent's), across
// the dense array's growth (hashed ids move into it) and deletions by
// backward shift in the hash table.
import t, { type Test } from 'tap';
import { IdIndex } from '../../../src/sync/tables/id-index.ts';

function check(t: Test, seed: number, pick: (r: number, step: number) => number): void {
  let x = seed;
  const next = () => (x = (Math.imul(x, 1103515245) + 12345) >>> 0);
  const index = new IdIndex();
  const ref = new Map<number, number>();
  let problems = 0;
  for (let step = 0; step < 40000; step++) {
    const r = next();
    const id = pick(r, step);
    if (r % 5 < 3) {
      if (ref.has(id)) {
        index.replace(id, step);
      } else index.add(id, step);
      ref.set(id, step);
    } else {
      index.delete(id);
      ref.delete(id);
    }
    if (index.get(id) !== (ref.get(id) ?? -1) || index.size !== ref.size) problems++;
    const other = pick(next(), step);
    if (index.get(other) !== (ref.get(other) ?? -1)) problems++;
  }
  let all = 0;
  for (const [id, v] of ref) if (index.get(id) !== v) all++;
  t.equal(problems, 0, `seed ${seed}: get and size agree with a Map at every step`);
  t.equal(all, 0, `seed ${seed}: every entry found at the end`);
}

t.test('answers as a Map: small ids (dense), high ids (hashed), both, and ids that climb', async (t) => {
  check(t, 1, (r) => r % 3000);
  check(t, 2, (r) => 3_000_000_000 + (r % 5000));
  check(t, 3, (r) => (r % 2 ? r % 2000 : 0xffffffff - (r % 2000)));
  // Ids handed out in sequence and freed behind: the dense array grows past
  // ids that were hashed while it was small.
  check(t, 4, (r, step) => Math.max(0, 40 * step - (r % 4000)));
  check(t, 5, (r) => ((r >>> 3) % 64) * 1024); // hash collisions in a small table: ids of one stride
});

t.test('an id hashed while the dense array was small is found once the array grows past it', async (t) => {
  const index = new IdIndex();
  index.add(5000, 1); // far past the count held: hashed
  index.add(70_000, 2);
  for (let id = 0; id < 6000; id++) if (id !== 5000) index.add(id, 10 + id);
  t.equal(index.get(5000), 1, 'moved into the dense array as it grew');
  t.equal(index.get(70_000), 2, 'still hashed');
  t.equal(index.get(4999), 10 + 4999);
  index.delete(5000);
  t.equal(index.get(5000), -1);
  t.equal(index.size, 6000);
});
