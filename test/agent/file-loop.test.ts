// The file source through the agent's sync loop, with the real Syncer over
// in-memory maps: what each change writes (which Services a partial sync
// covers), bad files, removed files, atomic renames and ConfigMap-style
// ..data swaps; and that the incremental model always equals a full read of
// the directory; and that zone names are in svcmap_zones before any backend
// names their id, and go after a full sync leaves none naming it. Every step
// waits for the sync it caused; nothing is timed.
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import t, { type Test } from 'tap';
import { AgentMetrics } from '../../src/agent/http/metrics.ts';
import { ProblemReporter } from '../../src/agent/loops/problems-log.ts';
import { SyncLoop } from '../../src/agent/loops/sync-loop.ts';
import { SyncStatus } from '../../src/agent/loops/sync-status.ts';
import { buildDesiredState } from '../model/desired.ts';
import type { EndpointSlice, Service } from '../../src/model/schemas.ts';
import type { Problem } from '../../src/model/types.ts';
import { FileSource } from '../../src/sources/file/file-source.ts';
import { loadManifestDir } from '../../src/sources/file/load.ts';
import { Syncer, type SyncReport } from '../../src/sync/syncer.ts';
import { type ZoneMap, ZoneNames } from '../../src/sync/zones.ts';
import type { FrontendTarget } from '../../src/sync/targets.ts';
import { MemoryMaps } from '../sync/helpers.ts';

/** A Service and its slice, as JSON documents (clusterIP 10.96.<i/250>.<i%250+1>). */
function objects(name: string, i: number, endpoints: string[], zone?: string): object[] {
  const ip = `10.96.${Math.floor(i / 250)}.${(i % 250) + 1}`;
  return [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: 'default' },
      spec: { clusterIP: ip, ports: [{ name: 'http', port: 80, targetPort: 8080 }] },
    },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      addressType: 'IPv4',
      metadata: { name: `${name}-1`, namespace: 'default', labels: { 'kubernetes.io/service-name': name } },
      ports: [{ name: 'http', port: 8080 }],
      endpoints: endpoints.map((a) => ({ addresses: [a], ...(zone ? { zone } : {}) })),
    },
  ];
}

const list = (items: object[]) => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });

/** A file of `count` Services named `${prefix}-k`, starting at clusterIP index `base`. */
function fileOf(prefix: string, base: number, count: number, endpoint = (_k: number) => ['10.244.0.1']): string {
  const items: object[] = [];
  for (let k = 0; k < count; k++) items.push(...objects(`${prefix}-${k}`, base + k, endpoint(k)));
  return list(items);
}

class RecordingSyncer extends Syncer {
  /** Each sync: full, or the Services a partial one covered. */
  readonly syncs: Array<{ full: true } | { full: false; owners: string[] }> = [];
  override sync(targets: readonly FrontendTarget[]): SyncReport {
    const r = super.sync(targets);
    this.syncs.push({ full: true });
    return r;
  }
  override syncOwners(changes: ReadonlyMap<string, readonly FrontendTarget[]>): SyncReport {
    const r = super.syncOwners(changes);
    this.syncs.push({ full: false, owners: [...changes.keys()].sort() });
    return r;
  }
}

async function harness(
  t: Test,
  files: Record<string, string>,
  opts: { zones?: ZoneNames; syncPeriodMs?: number; onWrite?: (maps: MemoryMaps, what: string) => void } = {},
) {
  const root = mkdtempSync(join(tmpdir(), 'svcmap-fileloop-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const dir = join(root, 'manifests');
  mkdirSync(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const log = pino({ level: 'silent' });
  const metrics = new AgentMetrics();
  const problems: Problem[] = [];
  const reporter = new ProblemReporter(log, (p) => {
    problems.push(p);
    wake?.();
  });
  const maps = new MemoryMaps();
  const onWrite = opts.onWrite;
  if (onWrite) maps.onWrite = (what) => onWrite(maps, what);
  const syncer = new RecordingSyncer(maps);
  let wake: (() => void) | undefined;
  const status = new SyncStatus(metrics, log);
  const loop: SyncLoop = new SyncLoop(
    {
      get isSynced() {
        return src.isSynced;
      },
      get model() {
        return src.model;
      },
    },
    syncer,
    status,
    metrics,
    reporter,
    log,
    {
      minIntervalMs: 0,
      syncPeriodMs: opts.syncPeriodMs ?? 3_600_000,
      ...(opts.zones ? { zones: opts.zones } : {}),
      onServices: () => wake?.(),
    },
  );
  const src = new FileSource({ dir, nodeName: 'node-a', debounceMs: 10, changed: () => loop.poke() });
  loop.start();
  t.teardown(() => {
    loop.stop();
    src.stop();
  });
  /** Waits until the syncs satisfy `done`. */
  const until = async (done: () => boolean) => {
    while (!done()) await new Promise<void>((r) => (wake = r));
  };
  /** The Services whose frontends the maps hold (by clusterIP), via the syncer's state. */
  const vips = () => [...syncer.state.frontends.values()].map((f) => f.key.addr).sort();
  await src.start();
  await until(() => syncer.syncs.length > 0);
  /** The incremental model equals a full read of the directory. */
  const sameAsFullRead = async (t: Test) => {
    const loaded = await loadManifestDir(dir);
    const services: Service[] = [];
    const slices: EndpointSlice[] = [];
    for (const { obj } of loaded.objects) {
      if (obj.kind === 'Service') services.push(obj);
      else if (obj.kind === 'EndpointSlice') slices.push(obj);
    }
    const full = buildDesiredState({ services, slices, node: { name: 'node-a', addresses: [] } }).state;
    const mine = new Map<string, unknown>();
    for (const l of src.model.allFrontends().values()) for (const f of l) mine.set(f.key, f);
    t.same([...mine.keys()].sort(), [...full.frontends.keys()].sort(), 'the same frontends as a full read');
    for (const [k, f] of full.frontends) t.same(mine.get(k), f, `frontend ${k} as a full read has it`);
  };
  return { dir, syncer, maps, problems, until, vips, sameAsFullRead, src };
}

t.test('a changed file is one partial sync of only its Services', async (t) => {
  const h = await harness(t, { 'a.json': fileOf('a', 0, 20), 'b.json': fileOf('b', 100, 20) });
  t.same(h.syncer.syncs, [{ full: true }], 'the first sync is full, once every file is read');
  t.equal(h.vips().length, 40);

  // Two of a's Services get another endpoint; the rest of a, and all of b, are as they were.
  writeFileSync(
    join(h.dir, 'a.json'),
    fileOf('a', 0, 20, (k) => (k === 3 || k === 7 ? ['10.244.0.1', '10.244.0.2'] : ['10.244.0.1'])),
  );
  await h.until(() => h.syncer.syncs.length > 1);
  t.same(h.syncer.syncs.slice(1), [{ full: false, owners: ['default/a-3', 'default/a-7'] }], 'only the Services that changed are written');
  t.equal(h.maps.backends.size, 2, 'the new endpoint is in the maps');
  await h.sameAsFullRead(t);
});

t.test('a malformed file is reported with its path and field; the other files stay programmed', async (t) => {
  const h = await harness(t, {
    'a.json': fileOf('a', 0, 3),
    'b.yaml': 'apiVersion: v1\nkind: Service\nmetadata: {name: b}\nspec: {clusterIP: 10.96.9.9, ports: [{port: 80}]}\n',
  });
  t.equal(h.vips().length, 4);
  // b.yaml breaks: a bad port, then a YAML syntax error.
  writeFileSync(
    join(h.dir, 'b.yaml'),
    'apiVersion: v1\nkind: Service\nmetadata: {name: b}\nspec: {clusterIP: 10.96.9.9, ports: [{port: 0}]}\n',
  );
  await h.until(() => h.problems.length > 0);
  t.match(h.problems, [{ kind: 'Service', name: 'b', path: 'spec.ports[0].port', source: join(h.dir, 'b.yaml'), severity: 'error' }]);
  await h.until(() => h.syncer.syncs.length > 1);
  t.same(h.syncer.syncs.slice(1), [{ full: false, owners: ['default/b'] }], 'b is removed, nothing else is written');
  t.same(h.vips(), ['10.96.0.1', '10.96.0.2', '10.96.0.3'], "a's Services are still programmed");

  writeFileSync(join(h.dir, 'b.yaml'), 'apiVersion: v1\nkind: Service\nmetadata: {name: b\n');
  await h.until(() => h.problems.length > 1);
  t.match(h.problems[1], { source: join(h.dir, 'b.yaml'), message: /YAML syntax error at line \d+/ });
  t.same(h.vips(), ['10.96.0.1', '10.96.0.2', '10.96.0.3']);
  await h.sameAsFullRead(t);
});

t.test('a removed file removes its Services only; a duplicate in an earlier file then wins', async (t) => {
  const h = await harness(t, {
    'a.json': fileOf('a', 0, 3),
    // b redefines a-0 (another clusterIP): the later file wins.
    'b.json': list([...objects('a-0', 50, ['10.244.0.1']), ...objects('b-0', 51, ['10.244.0.1'])]),
  });
  t.same(h.vips(), ['10.96.0.2', '10.96.0.3', '10.96.0.51', '10.96.0.52']);
  t.match(h.problems, [
    {
      severity: 'warning',
      name: 'a-0',
      message: `also defined in ${join(h.dir, 'a.json')}; this later definition wins`,
      source: join(h.dir, 'b.json'),
    },
  ]);
  unlinkSync(join(h.dir, 'b.json'));
  await h.until(() => h.syncer.syncs.length > 1);
  t.same(h.syncer.syncs.slice(1), [{ full: false, owners: ['default/a-0', 'default/b-0'] }]);
  t.same(h.vips(), ['10.96.0.1', '10.96.0.2', '10.96.0.3'], "b-0 is gone, a-0 is a.json's again");
  await h.sameAsFullRead(t);
});

t.test('an atomic rename (editors, kubectl cp) and a ConfigMap ..data swap are followed', async (t) => {
  const h = await harness(t, { 'a.json': fileOf('a', 0, 2), 'b.json': fileOf('b', 10, 2) });
  // Write a temp file, rename it over a.json: a-1 moves to another endpoint.
  writeFileSync(
    join(h.dir, '.a.json.tmp'),
    fileOf('a', 0, 2, (k) => [k === 1 ? '10.244.0.9' : '10.244.0.1']),
  );
  renameSync(join(h.dir, '.a.json.tmp'), join(h.dir, 'a.json'));
  await h.until(() => h.syncer.syncs.some((s) => !s.full && s.owners.includes('default/a-1')));
  t.same(
    h.syncer.syncs.slice(1).flatMap((s) => (s.full ? ['full'] : s.owners)),
    ['default/a-1'],
  );
  await h.sameAsFullRead(t);

  // A ConfigMap volume: c.json -> ..data/c.json, ..data -> ..v1; the update swaps ..data to ..v2.
  const v1 = join(h.dir, '..v1');
  const v2 = join(h.dir, '..v2');
  mkdirSync(v1);
  mkdirSync(v2);
  writeFileSync(join(v1, 'c.json'), fileOf('c', 20, 1));
  writeFileSync(join(v2, 'c.json'), fileOf('c', 30, 1));
  symlinkSync('..v1', join(h.dir, '..data'));
  symlinkSync('..data/c.json', join(h.dir, 'c.json'));
  await h.until(() => h.vips().includes('10.96.0.21'));
  symlinkSync('..v2', join(h.dir, '..data_tmp'));
  renameSync(join(h.dir, '..data_tmp'), join(h.dir, '..data'));
  await h.until(() => h.vips().includes('10.96.0.31'));
  t.notOk(h.vips().includes('10.96.0.21'), 'the old version is gone');
  await h.sameAsFullRead(t);
});

t.test('zone names reach svcmap_zones before any backend names their id, and go after a full sync leaves none naming them', async (t) => {
  const names = new Map<number, string>();
  const zoneWrites: string[] = [];
  const zoneMap: ZoneMap = {
    entries: () => [...names].map(([id, name]) => [id, { name }]),
    put: (id, v) => {
      names.set(id, v.name);
      zoneWrites.push(`+${v.name}`);
    },
    delete: (id) => {
      zoneWrites.push(`-${names.get(id)}`);
      return names.delete(id);
    },
  };
  const broken: string[] = [];
  const zoned = (zone: string) =>
    list([...objects('web', 0, ['10.244.0.1', '10.244.0.2'], zone), ...objects('db', 1, ['10.244.0.3'], 'zone-a')]);
  const h = await harness(
    t,
    { 'a.json': zoned('zone-a') },
    {
      zones: new ZoneNames(zoneMap),
      syncPeriodMs: 300, // periodic full syncs: what prunes
      // After every single map write: every zone id a backend holds has its name.
      onWrite: (maps, what) => {
        for (const [id, b] of maps.backends) if (b.zone && !names.has(b.zone)) broken.push(`${what}: backend ${id} names zone ${b.zone}`);
      },
    },
  );
  t.same([...names.values()], ['zone-a'], 'zone-a named');
  t.ok(
    [...h.maps.backends.values()].every((b) => names.get(b.zone) === 'zone-a'),
    "every backend carries zone-a's id",
  );

  writeFileSync(join(h.dir, 'a.json'), zoned('zone-b'));
  await h.until(() => [...h.maps.backends.values()].filter((b) => names.get(b.zone) === 'zone-b').length === 2);
  t.same([...names.values()].sort(), ['zone-a', 'zone-b'], 'zone-b written; zone-a kept (db still names it)');

  writeFileSync(join(h.dir, 'a.json'), list(objects('web', 0, ['10.244.0.1', '10.244.0.2'], 'zone-b')));
  const fulls = () => h.syncer.syncs.filter((s) => s.full).length;
  const before = fulls();
  await h.until(() => h.maps.backends.size === 2 && fulls() > before && ![...names.values()].includes('zone-a'));
  t.same([...names.values()], ['zone-b'], 'db gone: the next full sync deletes zone-a, the name no backend holds');
  t.same(broken, [], 'no backend ever named a zone id without a name');
  t.same(zoneWrites, ['+zone-a', '+zone-b', '-zone-a'], 'each name written once, the unused one deleted once');
});
