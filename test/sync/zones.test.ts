// The zone-name table (src/sync/zones.ts) against a map that records every
// write: a name is written before an id is used (publish), kept while a
// backend holds it, deleted after none does (prune), read back at start,
// and names that cannot be stored get id 0 with one report each.
import t from 'tap';
import type { ZoneName } from '../../src/maps/codecs.ts';
import { SVCMAP_ZONE_NAME_LEN, SVCMAP_ZONES_MAX } from '../../src/maps/constants.ts';
import { type ZoneMap, ZoneNames } from '../../src/sync/zones.ts';

class RecordingMap implements ZoneMap {
  readonly held = new Map<number, string>();
  readonly writes: string[] = [];
  failPuts = false;
  entries(): Array<[number, ZoneName]> {
    return [...this.held].map(([id, name]) => [id, { name }]);
  }
  put(id: number, v: ZoneName): void {
    if (this.failPuts) throw new Error('injected: map update failed');
    this.held.set(id, v.name);
    this.writes.push(`put ${id}=${v.name}`);
  }
  delete(id: number): boolean {
    this.writes.push(`delete ${id}`);
    return this.held.delete(id);
  }
}

t.test('ids are handed out once per name and written by publish, not before', async (t) => {
  const m = new RecordingMap();
  const z = new ZoneNames(m);
  const a = z.id('zone-a');
  const b = z.id('zone-b');
  t.equal(z.id('zone-a'), a, 'one id per name');
  t.not(a, b);
  t.ok(a > 0 && b > 0, 'ids start at 1 (0 is "none")');
  t.equal(z.id(undefined), 0, 'no zone: 0');
  t.equal(z.id(''), 0, 'an empty zone: 0');
  t.same(m.writes, [], 'nothing is written while ids are handed out');
  z.publish();
  t.same(
    [...m.held].sort(),
    [
      [a, 'zone-a'],
      [b, 'zone-b'],
    ].sort(),
    'publish writes every new name',
  );
  z.publish();
  t.equal(m.writes.length, 2, 'a second publish writes nothing again');
});

t.test('a failed publish keeps the names pending; the next one writes them', async (t) => {
  const m = new RecordingMap();
  const z = new ZoneNames(m);
  const a = z.id('zone-a');
  m.failPuts = true;
  t.throws(() => z.publish(), /injected/, 'the failure reaches the caller (the sync does not run)');
  m.failPuts = false;
  z.prune(new Set());
  t.same(m.writes, [], 'prune leaves a pending name alone');
  z.publish();
  t.same([...m.held], [[a, 'zone-a']]);
});

t.test('prune deletes only the names no backend holds, and their ids are free again', async (t) => {
  const m = new RecordingMap();
  const z = new ZoneNames(m);
  const [a, b] = [z.id('zone-a'), z.id('zone-b')];
  z.publish();
  z.prune(new Set([b]));
  t.same([...m.held], [[b, 'zone-b']], 'zone-a went, zone-b stays');
  t.same([...z.names], [[b, 'zone-b']]);
  t.equal(z.id('zone-c'), a, 'the freed id is reused for a new name');
  t.not(z.id('zone-a'), a, 'zone-a, back later, gets another id');
});

t.test('a restarted agent reads the names back and keeps their ids', async (t) => {
  const m = new RecordingMap();
  const first = new ZoneNames(m);
  const [a, b] = [first.id('zone-a'), first.id('zone-b')];
  first.publish();
  const again = new ZoneNames(m);
  t.equal(again.id('zone-b'), b);
  t.equal(again.id('zone-a'), a);
  const c = again.id('zone-c');
  t.ok(c !== a && c !== b, 'a new name gets an id no pinned name has');
});

t.test('names that cannot be stored get 0 and one report each', async (t) => {
  const reports: string[] = [];
  const m = new RecordingMap();
  const z = new ZoneNames(m, (msg, name) => reports.push(`${name.length}: ${msg}`));
  const long = 'z'.repeat(SVCMAP_ZONE_NAME_LEN);
  t.equal(z.id(long), 0, 'a name of SVCMAP_ZONE_NAME_LEN bytes does not fit (the NUL)');
  t.equal(z.id(long), 0);
  t.equal(z.id('z'.repeat(SVCMAP_ZONE_NAME_LEN - 1)), 1, 'SVCMAP_ZONE_NAME_LEN - 1 bytes fit');
  const ids = Array.from({ length: SVCMAP_ZONES_MAX - 1 }, (_, i) => z.id(`zone-${i + 2}`));
  t.same(
    ids,
    Array.from({ length: SVCMAP_ZONES_MAX - 1 }, (_, i) => i + 2),
    'ids 2..ZONES_MAX for the next names',
  );
  t.equal(z.id('one-too-many'), 0, 'past SVCMAP_ZONES_MAX: 0');
  t.equal(reports.length, 2, 'one report per name');
  t.match(reports[0], /longer than 63 bytes/);
  t.match(reports[1], /more than 1024 zones/);
});
