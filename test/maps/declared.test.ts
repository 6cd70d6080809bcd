// What is pinned is declared once, in C (LIBBPF_PIN_BY_NAME in bpf/lib/maps*.h);
// which object has which map follows from what each entry file includes.
// The TypeScript registry (src/maps/registry.ts) lists the pinned maps with
// what only TypeScript needs (codecs, purposes, size options) and is held
// here to the compiled objects: a map of any object is pinned by name exactly
// when the registry has it (an unpinned map is an object's private working
// set), every registry entry is in some object, and a map several objects
// have is one definition. Then the loader on the real kernel: it pins what
// the objects declare, shares it, and sizes new maps by the registry's options.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { claimPinDir, ensureBpffs } from '../../lab/pins.ts';
import { BPF_PROGRAMS, compileBpf } from '../../src/bpf/compile.ts';
import { loadPinned } from '../../src/bpf/loader.ts';
import { BpfMap } from '../../src/bpf/map.ts';
import { BpfObject } from '../../src/bpf/object.ts';
import {
  ALL_MAPS,
  IPV6_MAPS,
  type MapSpec,
  TC6_MAPS,
  affinityMap,
  mapSize,
  revNatMap,
  servicesMap,
  skBackend6Map,
  skRevNat6Map,
  skRevNatMap,
} from '../../src/maps/registry.ts';

const paths = Object.fromEntries(BPF_PROGRAMS.map((p) => [p, compileBpf({ program: p }).path])) as Record<
  (typeof BPF_PROGRAMS)[number],
  string
>;

/** Each object's maps as opened (not loaded): name -> pin path and sizes. */
function declared(pinDir?: string): Map<string, Map<string, { pinPath: string | undefined; shape: string }>> {
  const out = new Map<string, Map<string, { pinPath: string | undefined; shape: string }>>();
  for (const program of BPF_PROGRAMS) {
    const o = BpfObject.open(paths[program], pinDir);
    try {
      out.set(
        program,
        new Map(
          o.maps().map((m) => [
            m.name,
            {
              pinPath: m.pinPath,
              shape: `key ${o.mapKeySize(m.name)} value ${o.mapValueSize(m.name)} max ${o.mapMaxEntries(m.name)}`,
            },
          ]),
        ),
      );
    } finally {
      o.close();
    }
  }
  return out;
}

t.test('the registry names exactly the maps the objects pin, each pinned by name and defined once', async (t) => {
  const dir = '/sys/fs/bpf/svcmap-declared-test'; // only a path: nothing is loaded or pinned here
  const objects = declared(dir);
  const registry = new Set(ALL_MAPS.map((m) => m.name));
  const shapes = new Map<string, string>();
  for (const [program, maps] of objects) {
    for (const [name, m] of maps) {
      if (registry.has(name)) t.equal(m.pinPath, join(dir, name), `${program}.o: ${name} is declared pinned by name`);
      else t.equal(m.pinPath, undefined, `${program}.o: ${name} is not in the registry, so it must be the object's own (not pinned)`);
      const shape = shapes.get(name);
      if (shape === undefined) shapes.set(name, m.shape);
      else t.equal(m.shape, shape, `${program}.o: ${name} has the definition the other objects have`);
    }
  }
  t.same(
    [...registry].filter((n) => !shapes.has(n)),
    [],
    'every registry entry is a map of some object',
  );
  const [sock, tc] = [objects.get('sock')!, objects.get('tc')!];
  t.ok(sock.has(skRevNatMap.name) && !tc.has(skRevNatMap.name), 'the per-socket reverse NAT map is not in the tc object');
  for (const m of [servicesMap, revNatMap, affinityMap]) t.ok(sock.has(m.name) && tc.has(m.name), `${m.name} is in both datapaths`);
  const perSocket6 = [skRevNat6Map, skBackend6Map] as readonly MapSpec[];
  for (const m of IPV6_MAPS.filter((x) => !perSocket6.includes(x)))
    t.ok(sock.has(m.name) && tc.has(m.name), `${m.name} is in both datapaths`);
  for (const m of perSocket6) t.ok(sock.has(m.name) && !tc.has(m.name), `the IPv6 per-socket map ${m.name} is not in the tc object`);
  for (const m of TC6_MAPS) t.ok(tc.has(m.name) && !sock.has(m.name), `${m.name} is the tc object's only`);
});

t.test("opened without a pin directory, an object pins nothing (a private copy never meets the node's maps)", async (t) => {
  for (const [program, maps] of declared()) {
    t.same(
      [...maps].filter(([, m]) => m.pinPath !== undefined).map(([n]) => n),
      [],
      `${program}.o`,
    );
  }
});

t.test('the size options the registry gives each map', async (t) => {
  const sizes = { maxServices: 100, maxBackends: 200, maxConntrack: 300, maxAffinity: 400 };
  t.equal(mapSize(sizes, servicesMap.name), 100);
  t.equal(mapSize(sizes, revNatMap.name), 100, 'reverse NAT ids are one per service: --max-services sizes both');
  t.equal(mapSize(sizes, 'svcmap_be'), 200);
  t.equal(mapSize(sizes, 'svcmap_ct'), 300);
  t.equal(mapSize(sizes, affinityMap.name), 400);
  t.equal(mapSize(sizes, skRevNatMap.name), undefined, 'no option: the C default');
  t.equal(mapSize({}, servicesMap.name), undefined, 'an option not given: the C default');
});

t.test('loading pins every declared map once; the second object and a restart reuse them', async (t) => {
  ensureBpffs();
  const pins = claimPinDir('declared');
  const objects: BpfObject[] = [];
  t.teardown(() => {
    for (const o of objects) o.close();
    pins.release();
  });
  const sizes = new Map([
    [servicesMap.name, 1000],
    [affinityMap.name, 512],
  ]);
  const load = (program: 'sock' | 'tc', maxEntries = (name: string) => sizes.get(name)) => {
    const r = loadPinned({ objectPath: paths[program], pinDir: pins.dir, maxEntries });
    objects.push(r.object);
    return r;
  };
  const sock = load('sock');
  t.same(sock.reusedMaps, [], 'a fresh directory: every map is new');
  const tc = load('tc');
  const sockNames = sock.object.maps().map((m) => m.name);
  t.same(
    tc.reusedMaps.sort(),
    tc.object
      .maps()
      .map((m) => m.name)
      .filter((n) => sockNames.includes(n))
      .sort(),
    'tc.o reuses the maps it shares with sock.o',
  );
  // Every map but an object's own working set (not in the registry, not pinned: tc.o's IPv6 scratch entry).
  const registered = new Set(ALL_MAPS.map((m) => m.name));
  t.same(
    readdirSync(pins.dir).sort(),
    [...new Set([...sockNames, ...tc.object.maps().map((m) => m.name)])].filter((n) => registered.has(n)).sort(),
    'one pin per map, named as in C',
  );

  const pinned = (name: string) => {
    const m = BpfMap.openPinned(join(pins.dir, name));
    try {
      return m.maxEntries;
    } finally {
      m.close();
    }
  };
  t.equal(pinned(servicesMap.name), 1000, 'a new map gets the asked capacity');
  t.equal(pinned(affinityMap.name), 512);
  t.equal(pinned(skRevNatMap.name), sock.object.mapMaxEntries(skRevNatMap.name), 'one not asked for keeps its C size');

  const again = load('sock', () => 2000);
  t.same(again.reusedMaps.sort(), [...sockNames].sort(), 'a restart reuses every pin');
  t.match(
    again.notes.join('\n'),
    /map svcmap_svc is pinned with 1000 entries; keeping that size rather than 2000/,
    'a pinned map keeps its size, and says so',
  );
  t.equal(pinned(servicesMap.name), 1000);
});
