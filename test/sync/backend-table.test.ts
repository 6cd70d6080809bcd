// The sync engine's backends by id, stored as columns (src/sync/backend-table.ts):
// it answers as a Map<number, BackendValue> would through random sets and
// deletes (rows reused, columns grown), and refuses a value the backends
// map's fields cannot hold.
import t from 'tap';
import { BackendTable } from '../../src/sync/backend-table.ts';
import type { BackendValue } from '../../src/maps/codecs.ts';

function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    return x / 2 ** 32;
  };
}

t.test('answers as a Map through random sets and deletes', async (t) => {
  for (const seed of [1, 2, 3, 42]) {
    const r = rng(seed);
    const table = new BackendTable();
    const ref = new Map<number, BackendValue>();
    let agree = true;
    for (let step = 0; step < 5000; step++) {
      const id = 1 + Math.floor(r() * 400);
      if (r() < 0.6) {
        const v: BackendValue = {
          addr: r() < 0.5 ? `10.${Math.floor(r() * 256)}.0.${Math.floor(r() * 256)}` : `fd00::${Math.floor(r() * 65536).toString(16)}`,
          port: Math.floor(r() * 65536), proto: r() < 0.5 ? 6 : 17, state: Math.floor(r() * 3), flags: Math.floor(r() * 256), zone: Math.floor(r() * 65536),
        };
        table.set(id, v);
        ref.set(id, { ...v });
      } else if (table.delete(id) !== ref.delete(id)) agree = false;
      if (table.size !== ref.size || table.has(id) !== ref.has(id)) agree = false;
      const got = table.get(id);
      const want = ref.get(id);
      if (JSON.stringify(got) !== JSON.stringify(want)) agree = false;
    }
    t.ok(agree, `seed ${seed}: size, has, get and delete agree with a Map at every step`);
    t.same([...table].sort((a, b) => a[0] - b[0]), [...ref].sort((a, b) => a[0] - b[0]), `seed ${seed}: the same entries at the end`);
    t.same([...table.keys()].sort((a, b) => a - b), [...ref.keys()].sort((a, b) => a - b), `seed ${seed}: the same keys`);
  }
});

t.test('a value the backends map cannot hold is refused, naming the backend', async (t) => {
  const table = new BackendTable();
  const ok: BackendValue = { addr: '10.0.0.1', port: 8080, proto: 6, state: 0, flags: 0, zone: 0 };
  for (const bad of [{ port: 65536 }, { proto: 256 }, { state: -1 }, { flags: 300 }, { zone: 70000 }]) {
    t.throws(() => table.set(7, { ...ok, ...bad }), /backend 7: a field does not fit/, JSON.stringify(bad));
  }
  t.equal(table.size, 0, 'nothing stored');
  table.set(7, ok);
  t.same(table.get(7), ok);
  t.not(table.get(7), table.get(7), 'each get builds its own value: changing it changes nothing stored');
});
