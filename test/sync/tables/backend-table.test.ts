// The sync engine's backends by id, stored as columns (src/sync/tables/backend-table.ts):
// it answers as a Map<number, BackendValue> would through random sets and
// deletes (rows reused, columns grown, its hash tables grown and shrunk by
// backward shift), its address index and reference counts answer as the
// Maps they replace did (first id per address, IPv4 by value, IPv6 by text;
// counts that outlive their backend), and it refuses a value the backends
// map's fields cannot hold.
import t from 'tap';
import { BackendTable } from '../../../src/sync/tables/backend-table.ts';
import type { BackendValue } from '../../../src/maps/codecs.ts';

function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
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
          port: Math.floor(r() * 65536),
          proto: r() < 0.5 ? 6 : 17,
          state: Math.floor(r() * 3),
          flags: Math.floor(r() * 256),
          zone: Math.floor(r() * 65536),
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
    t.same(
      [...table].sort((a, b) => a[0] - b[0]),
      [...ref].sort((a, b) => a[0] - b[0]),
      `seed ${seed}: the same entries at the end`,
    );
    t.same(
      [...table.keys()].sort((a, b) => a - b),
      [...ref.keys()].sort((a, b) => a - b),
      `seed ${seed}: the same keys`,
    );
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

/** The Maps the table replaces: first id by address ("addr:port/proto"; IPv4 by value), references by id. */
class Reference {
  readonly backends = new Map<number, BackendValue>();
  readonly idByAddr = new Map<string, number>();
  readonly refs = new Map<number, number>();
  static key(b: { addr: string; port: number; proto: number }): string {
    // IPv4 by value: leading zeros ("010.0.0.1") name the same address.
    const a = b.addr.includes(':') ? b.addr : b.addr.split('.').map(Number).join('.');
    return `${a}:${b.port}/${b.proto}`;
  }
  set(id: number, v: BackendValue): void {
    const had = this.backends.get(id);
    if (had && Reference.key(had) !== Reference.key(v) && this.idByAddr.get(Reference.key(had)) === id)
      this.idByAddr.delete(Reference.key(had));
    this.backends.set(id, { ...v });
    if (!this.idByAddr.has(Reference.key(v))) this.idByAddr.set(Reference.key(v), id);
  }
  delete(id: number): boolean {
    const had = this.backends.get(id);
    if (had && this.idByAddr.get(Reference.key(had)) === id) this.idByAddr.delete(Reference.key(had));
    return this.backends.delete(id);
  }
  addRefs(id: number, d: number): void {
    const n = (this.refs.get(id) ?? 0) + d;
    if (n > 0) this.refs.set(id, n);
    else this.refs.delete(id);
  }
}

t.test('the address index and reference counts answer as the Maps they replace, IPv4 and IPv6, ids reused', async (t) => {
  for (const seed of [7, 8, 9, 1234]) {
    const r = rng(seed);
    const table = new BackendTable();
    const ref = new Reference();
    // Few addresses and ids, so that ids are reused, addresses move between
    // ids, and two ids hold one address; both families; enough entries to
    // grow the tables several times.
    const addr = () => {
      const n = Math.floor(r() * 40);
      if (r() < 0.5) return r() < 0.1 ? `010.1.0.0${n}` : `10.1.0.${n}`;
      return `fd00::${n.toString(16)}`;
    };
    let problems = 0;
    for (let step = 0; step < 20000; step++) {
      const id = 1 + Math.floor(r() * (step < 10000 ? 3000 : 120));
      const x = r();
      if (x < 0.4) {
        const v: BackendValue = { addr: addr(), port: 8000 + Math.floor(r() * 4), proto: r() < 0.8 ? 6 : 17, state: 0, flags: 0, zone: 0 };
        table.set(id, v);
        ref.set(id, v);
      } else if (x < 0.55) {
        if (table.delete(id) !== ref.delete(id)) problems++;
      } else if (x < 0.8) {
        const d = r() < 0.7 ? 1 : -1;
        table.addRefs(id, d);
        ref.addRefs(id, d);
      } else if (x < 0.82) {
        table.clearRefs(id);
        ref.refs.delete(id);
      }
      const probe = { addr: addr(), port: 8000 + Math.floor(r() * 4), proto: r() < 0.8 ? 6 : 17 };
      if (table.idOf(probe) !== ref.idByAddr.get(Reference.key(probe))) problems++;
      if (table.refs(id) !== (ref.refs.get(id) ?? 0)) problems++;
      if (table.size !== ref.backends.size) problems++;
    }
    t.equal(problems, 0, `seed ${seed}: idOf, refs and size agree with the Maps at every step`);
    for (const [id, be] of ref.backends) {
      if (ref.idByAddr.get(Reference.key(be)) === id && table.idOf(be) !== id)
        t.fail(`seed ${seed}: ${id} not named for ${Reference.key(be)}`);
    }
    t.same(
      [...table.refEntries()].sort((a, b) => a[0] - b[0]),
      [...ref.refs].sort((a, b) => a[0] - b[0]),
      `seed ${seed}: the same reference counts at the end`,
    );
    t.same(
      [...table].sort((a, b) => a[0] - b[0]),
      [...ref.backends].sort((a, b) => a[0] - b[0]),
      `seed ${seed}: the same backends at the end`,
    );
  }
});

t.test(
  'an address is named by the first id that holds it; another id holding it is named once that one goes only if set again',
  async (t) => {
    const table = new BackendTable();
    const v4: BackendValue = { addr: '10.0.0.1', port: 80, proto: 6, state: 0, flags: 0, zone: 0 };
    const v6: BackendValue = { ...v4, addr: 'fd00::1' };
    table.set(5, v4).set(6, v4).set(7, v6);
    t.equal(table.idOf(v4), 5, 'the first id');
    t.equal(table.idOf({ addr: '010.000.0.01', port: 80, proto: 6 }), 5, 'IPv4 by value');
    t.equal(table.idOf({ ...v4, proto: 17 }), undefined, 'the protocol is part of the address');
    t.equal(table.idOf({ ...v4, port: 81 }), undefined, 'so is the port');
    t.equal(table.idOf(v6), 7, 'IPv6');
    t.equal(table.idOf({ ...v6, addr: 'fd00::2' }), undefined);
    table.delete(5);
    t.equal(table.idOf(v4), undefined, 'as the Map did: the deleted id is no longer named, and no other takes its place');
    table.set(6, { ...v4, state: 1 });
    t.equal(table.idOf(v4), 6, 'setting the other id again names it');
    table.set(6, { ...v4, addr: '10.0.0.2' });
    t.equal(table.idOf(v4), undefined, 'an id whose address changes is no longer named by the old one');
    t.equal(table.idOf({ ...v4, addr: '10.0.0.2' }), 6);
  },
);

t.test('references outlive their backend (a slot may name a missing id) and come back with it', async (t) => {
  const table = new BackendTable();
  const v: BackendValue = { addr: 'fd00::9', port: 80, proto: 6, state: 0, flags: 0, zone: 0 };
  table.addRefs(3, 2);
  t.equal(table.refs(3), 2, 'counted without a backend');
  table.set(3, v);
  t.equal(table.refs(3), 2, 'kept when the backend arrives');
  table.addRefs(3, -1);
  table.delete(3);
  t.equal(table.refs(3), 1, 'kept when it goes');
  table.set(3, v);
  t.equal(table.refs(3), 1);
  table.clearRefs(3);
  t.equal(table.refs(3), 0);
  t.same([...table.refEntries()], []);
  table.addRefs(4, -1);
  t.same([...table.refEntries()], [], 'never below zero');
});
