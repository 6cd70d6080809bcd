// The Kubernetes sync loop's scheduling, with the real model, the real
// Syncer over in-memory maps and real timers: which runs are full syncs, and
// what the health check hook is told.
import pino from 'pino';
import t from 'tap';
import { service, endpointSlice } from '../../lab/apiserver/objects.ts';
import { SyncLoop } from '../../src/agent/loops/sync-loop.ts';
import { AgentMetrics } from '../../src/agent/http/metrics.ts';
import { ProblemReporter, syncErrorKind } from '../../src/agent/loops/problems-log.ts';
import { SyncStatus } from '../../src/agent/loops/sync-status.ts';
import { IncrementalModel } from '../../src/model/incremental.ts';
import { type EndpointSlice, type Service } from '../../src/model/schemas.ts';
import { validateObject } from '../../src/model/validate.ts';
import type { KubernetesSource } from '../../src/sources/kubernetes/source.ts';
import { Syncer, type SyncReport } from '../../src/sync/syncer.ts';
import { MemoryMaps } from '../sync/helpers.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Resolves once done() holds, checked every 5 ms: waits for the loop's run itself (tap's timeout ends one that never comes). */
async function until(done: () => boolean): Promise<void> {
  while (!done()) await sleep(5);
}

function valid<T>(raw: unknown): T {
  const r = validateObject(raw, 'api');
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.obj as T;
}

class CountingSyncer extends Syncer {
  readonly reports: SyncReport[] = [];
  reloads = 0;
  override reload(): void {
    this.reloads++;
    super.reload();
  }
  override sync(...a: Parameters<Syncer['sync']>): SyncReport {
    const r = super.sync(...a);
    this.reports.push(r);
    return r;
  }
  override syncOwners(...a: Parameters<Syncer['syncOwners']>): SyncReport {
    const r = super.syncOwners(...a);
    this.reports.push(r);
    return r;
  }
}

function harness(syncPeriodMs: number, problems?: ProblemReporter) {
  const model = new IncrementalModel();
  model.setNode({ name: 'node1', addresses: [] });
  const source = { isSynced: true, model } as unknown as KubernetesSource;
  const syncer = new CountingSyncer(new MemoryMaps());
  const log = pino({ level: 'silent' });
  const metrics = new AgentMetrics();
  const told: boolean[] = [];
  const loop = new SyncLoop(source, syncer, new SyncStatus(metrics, log), metrics, problems ?? new ProblemReporter(log), log, {
    minIntervalMs: 0,
    syncPeriodMs,
    onServices: (_changed, full) => told.push(full),
  });
  const setEndpoints = (n: number) => {
    model.upsertSlice(
      valid<EndpointSlice>(
        endpointSlice('web-a', {
          service: 'web',
          ports: [{ name: 'http', port: 8080 }],
          endpoints: Array.from({ length: n }, (_, i) => ({ addresses: [`10.244.1.${i + 1}`] })),
        }),
      ),
    );
    loop.poke();
  };
  model.upsertService(valid<Service>(service('web', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80, targetPort: 8080 }] })));
  return { loop, syncer, told, setEndpoints, model };
}

t.test('the first run is a full sync, later changes are partial', async (t) => {
  const h = harness(3_600_000);
  h.loop.start();
  t.teardown(() => h.loop.stop());
  h.setEndpoints(1);
  await until(() => h.syncer.reports.length === 1);
  h.setEndpoints(2);
  await until(() => h.syncer.reports.length === 2);
  t.same(
    h.syncer.reports.map((r) => r.full),
    [true, false],
  );
  t.same(h.told, [true, false], 'the health check hook hears which kind of sync it was');
  t.equal(h.syncer.reloads, 0, 'no map re-read before the period is over');
});

t.test('a full resync still comes every sync period while changes never stop', async (t) => {
  // The runner's own periodic wake-up is pushed back by every run; the loop
  // itself must notice that the last full sync is older than the period.
  const h = harness(300);
  h.loop.start();
  t.teardown(() => h.loop.stop());
  for (let i = 0; i < 24; i++) {
    h.setEndpoints(1 + (i % 3));
    await sleep(50);
  }
  const fulls = h.syncer.reports.filter((r) => r.full).length;
  t.ok(h.syncer.reports.length >= 20, `runs: ${h.syncer.reports.length}`);
  t.ok(fulls >= 3, `full syncs during 1.2 s of changes every 50 ms with a 300 ms period: ${fulls}`);
  t.ok(h.syncer.reloads >= 2, `maps re-read on each periodic full sync: ${h.syncer.reloads}`);
});

t.test('invalid objects and frontend conflicts: reported once while they last, counted by kind, cleared on recovery', async (t) => {
  const logged: string[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => logged.push(JSON.parse(line).msg as string) });
  const counted: string[] = [];
  const reporter = new ProblemReporter(log, (p) => {
    const kind = syncErrorKind(p);
    if (kind) counted.push(`${kind} ${p.kind} ${p.name}`);
  });
  const h = harness(3_600_000, reporter);
  h.loop.start();
  t.teardown(() => h.loop.stop());
  const badPort = [
    {
      kind: 'Service',
      namespace: 'default',
      name: 'bad',
      path: 'spec.ports[0].port',
      message: 'spec.ports[0].port: too big',
      severity: 'error' as const,
    },
  ];
  // What the Kubernetes source does with an object that fails validation, delivered twice (a relist).
  for (let i = 0; i < 2; i++) {
    h.model.deleteService('default', 'bad');
    h.model.reject('Service', 'default', 'bad', badPort);
    h.loop.poke();
    await sleep(20);
  }
  // A valid Service that wants web's ClusterIP:port (web sorts first and keeps it).
  h.model.upsertService(
    valid<Service>(service('zz-thief', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80, targetPort: 8080 }] })),
  );
  h.loop.poke();
  await sleep(20);
  t.same(counted, ['invalid_object Service bad', 'frontend_conflict Service zz-thief'], 'each problem counted once, by kind');
  t.equal(
    logged.filter((m) => /spec\.ports\[0\]\.port: too big/.test(m)).length,
    1,
    'the invalid object is logged once, not on every delivery',
  );

  // Recovery: a valid version of the rejected object arrives.
  h.model.accept('Service', 'default', 'bad');
  h.model.upsertService(valid<Service>(service('bad', { clusterIP: '10.96.0.11', ports: [{ name: 'http', port: 80, targetPort: 8080 }] })));
  h.loop.poke();
  await sleep(20);
  t.ok(logged.includes('problems resolved'), 'its recovery is logged');
  // Broken again later: a new problem, counted again.
  h.model.deleteService('default', 'bad');
  h.model.reject('Service', 'default', 'bad', badPort);
  h.loop.poke();
  await sleep(20);
  t.equal(counted.filter((c) => c === 'invalid_object Service bad').length, 2);
});
