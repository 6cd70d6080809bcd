// Keys to sets of strings with lone values stored as themselves
// (src/util/one-to-many.ts): through random adds and removes it answers as a
// Map of Sets does, values in the same (insertion) order, empty keys gone.
import t from 'tap';
import { OneToMany } from '../../src/util/one-to-many.ts';

t.test('answers as a Map of Sets through random adds, removes and clears', async (t) => {
  for (const seed of [1, 7, 99]) {
    let x = seed;
    const r = () => (x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const m = new OneToMany();
    const ref = new Map<string, Set<string>>();
    let agree = true;
    for (let step = 0; step < 20_000; step++) {
      const key = `k${Math.floor(r() * 20)}`;
      const value = `v${Math.floor(r() * 4)}`;
      const op = r();
      if (op < 0.5) {
        m.add(key, value);
        if (!ref.has(key)) ref.set(key, new Set());
        ref.get(key)!.add(value);
      } else if (op < 0.95) {
        m.remove(key, value);
        ref.get(key)?.delete(value);
        if (ref.get(key)?.size === 0) ref.delete(key);
      } else {
        m.clear(key);
        ref.delete(key);
      }
      if (JSON.stringify([...m.values(key)]) !== JSON.stringify([...(ref.get(key) ?? [])])) agree = false;
    }
    t.ok(agree, `seed ${seed}: the same values, in the same order, after every step`);
  }
  const m = new OneToMany();
  m.add('a', 'x');
  m.add('a', 'x');
  t.same([...m.values('a')], ['x'], 'a value added twice is there once');
  m.remove('a', 'y');
  t.same([...m.values('a')], ['x'], 'removing a value it does not hold changes nothing');
  m.remove('a', 'x');
  t.same([...m.values('a')], [], 'the last value gone: nothing');
});
