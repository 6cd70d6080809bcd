// How a conntrack GC pass reads the backends map (src/agent/datapath/conn-counts.ts
// backendLookup): by id, each id once, only the ids the pass asks for, and
// past BACKENDS_FULL_READ distinct ids one read of the whole map instead.
// The map is the test's (a Map behind get/entries that counts its calls); the
// pass itself against real maps is test/bpf/tc-conn-counts.test.ts.
import t from 'tap';
import { BACKENDS_FULL_READ, backendLookup } from '../../src/agent/datapath/conn-counts.ts';
import type { BackendValue } from '../../src/maps/codecs.ts';

function countingMap(n: number) {
  const data = new Map<number, BackendValue>();
  for (let id = 1; id <= n; id++)
    data.set(id, { addr: `10.0.${(id >> 8) & 255}.${id & 255}`, port: 8080, proto: 6, state: 0, flags: 0, zone: 0 });
  const calls = { get: 0, entries: 0 };
  return {
    data,
    calls,
    map: {
      get: (id: number) => (calls.get++, data.get(id)),
      entries: (): Array<[number, BackendValue]> => (calls.entries++, [...data]),
    },
  };
}

t.test('an idle pass reads nothing; each id asked for is read once', async (t) => {
  const { map, calls, data } = countingMap(100_000);
  backendLookup(map);
  t.same(calls, { get: 0, entries: 0 }, 'nothing asked, nothing read (an idle node: no flows, no sockets, no counts)');
  const backend = backendLookup(map);
  t.same(backend(7), data.get(7), 'a backend that exists');
  t.same(backend(7), data.get(7), 'asked again');
  t.equal(backend(200_000), undefined, 'an id the map does not hold');
  t.equal(backend(200_000), undefined, 'asked again: still none');
  t.same(calls, { get: 2, entries: 0 }, 'one lookup per distinct id, the whole map never');
});

t.test(`past ${BACKENDS_FULL_READ} distinct ids the whole map is read once`, async (t) => {
  const { map, calls, data } = countingMap(3 * BACKENDS_FULL_READ);
  const backend = backendLookup(map);
  for (let id = 1; id <= BACKENDS_FULL_READ; id++) backend(id);
  t.same(calls, { get: BACKENDS_FULL_READ, entries: 0 }, 'up to the limit: by id');
  let same = true;
  for (let id = 1; id <= 3 * BACKENDS_FULL_READ + 5; id++) {
    const be = backend(id);
    if (be !== data.get(id)) same = false;
  }
  t.ok(same, "every answer, before and after the switch, is the map's (absent ids too)");
  t.same(calls, { get: BACKENDS_FULL_READ, entries: 1 }, 'then one read of the whole map, and no more lookups');
});
