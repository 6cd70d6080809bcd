// The Kubernetes sync loop when map writes fail, on a fake clock: the real
// model, the real Syncer over in-memory maps behind a layer that fails on
// purpose, the real runner with injected timers. Which syncs are attempted
// when (partial retries of the failed Services, with backoff 1, 2, 4 s, a
// full resync after three failures in a row, the backoff reset by a
// success), the failure metric and health state, and the programming
// latency metric: observed once per change, only for changes after the
// start, only when the Service's frontends changed, and only once written.
import pino from 'pino';
import t, { type Test } from 'tap';
import { endpointSlice, service } from '../../lab/apiserver/objects.ts';
import { SyncLoop } from '../../src/agent/loops/sync-loop.ts';
import { AgentMetrics } from '../../src/agent/http/metrics.ts';
import { ProblemReporter } from '../../src/agent/loops/problems-log.ts';
import { SyncStatus } from '../../src/agent/loops/sync-status.ts';
import { IncrementalModel } from '../../src/model/incremental.ts';
import { type EndpointSlice, type Service } from '../../src/model/schemas.ts';
import { validateObject } from '../../src/model/validate.ts';
import type { KubernetesSource } from '../../src/sources/kubernetes/source.ts';
import { Syncer, type SyncReport } from '../../src/sync/syncer.ts';
import { FailingMaps } from '../sync/failing-maps.ts';
import { FakeClock } from '../sync/fake-clock.ts';
import { MemoryMaps } from '../sync/helpers.ts';

function valid<T>(raw: unknown): T {
  const r = validateObject(raw, 'api');
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.obj as T;
}

/** Records every sync attempted (kind, Services, fake time) and every re-read of the maps. */
class RecordingSyncer extends Syncer {
  readonly attempts: string[] = [];
  readonly reloads: number[] = [];
  readonly #clock: FakeClock;
  constructor(maps: FailingMaps, clock: FakeClock) {
    super(maps);
    this.#clock = clock;
  }
  override reload(): void {
    this.reloads.push(this.#clock.t);
    super.reload();
  }
  override sync(...a: Parameters<Syncer['sync']>): SyncReport {
    this.attempts.push(`${this.#clock.t} full`);
    return super.sync(...a);
  }
  override syncOwners(...a: Parameters<Syncer['syncOwners']>): SyncReport {
    this.attempts.push(
      `${this.#clock.t} partial ${[...a[0].keys()]
        .map((k) => k.replace('default/', ''))
        .sort()
        .join(',')}`,
    );
    return super.syncOwners(...a);
  }
}

const VIPS: Record<string, string> = { web: '10.96.0.10', api: '10.96.0.11' };

function harness(t: Test) {
  const clock = new FakeClock();
  const model = new IncrementalModel();
  model.setNode({ name: 'node1', addresses: [] });
  const source = { isSynced: true, model } as unknown as KubernetesSource;
  const mem = new MemoryMaps();
  const maps = new FailingMaps(mem);
  const syncer = new RecordingSyncer(maps, clock);
  const log = pino({ level: 'silent' });
  const metrics = new AgentMetrics();
  const status = new SyncStatus(metrics, log);
  const told: boolean[] = [];
  const startedAt = Date.now();
  const loop = new SyncLoop(source, syncer, status, metrics, new ProblemReporter(log), log, {
    minIntervalMs: 0,
    syncPeriodMs: 3_600_000,
    timers: clock,
    startedAt,
    onServices: (_c, full) => told.push(full),
  });
  for (const [name, vip] of Object.entries(VIPS)) {
    model.upsertService(valid<Service>(service(name, { clusterIP: vip, ports: [{ name: 'http', port: 80, targetPort: 8080 }] })));
  }
  /** The Service's slice now has n endpoints; `trigger` is its last-change-trigger-time, handed on as the source does. */
  const setEndpoints = (svc: string, n: number, trigger?: number) => {
    model.upsertSlice(
      valid<EndpointSlice>(
        endpointSlice(`${svc}-a`, {
          service: svc,
          ports: [{ name: 'http', port: 8080 }],
          endpoints: Array.from({ length: n }, (_, i) => ({ addresses: [`10.244.1.${i + 1}`] })),
        }),
      ),
    );
    if (trigger !== undefined) loop.trigger(`default/${svc}`, trigger);
    loop.poke();
  };
  const backends = (svc: string) => mem.resolve().get(`${VIPS[svc]}:80/6/0`);
  const metric = async (name: string) => metrics.registry.getSingleMetricAsString(name);
  const failures = async (kind: string) =>
    Number(new RegExp(`svcmap_sync_failures_total\\{kind="${kind}"\\} (\\d+)`).exec(await metric('svcmap_sync_failures_total'))?.[1]);
  const observed = async () => Number(/_count (\d+)/.exec(await metric('svcmap_network_programming_duration_seconds'))?.[1]);
  loop.start();
  t.teardown(() => loop.stop());
  return { clock, maps, syncer, status, told, startedAt, setEndpoints, backends, failures, observed };
}

t.test('a failed partial sync is retried alone with backoff; three failures in a row make it a full resync', async (t) => {
  const h = harness(t);
  h.setEndpoints('web', 1);
  h.setEndpoints('api', 1);
  h.clock.advance(0);
  t.same(h.syncer.attempts, ['0 full'], 'the first sync is full');

  h.maps.fail = () => 0; // every map write fails from here
  h.setEndpoints('web', 2);
  h.clock.advance(0);
  h.clock.advance(500);
  h.setEndpoints('api', 2); // waits for the retry, and joins it
  h.clock.advance(500);
  t.equal(h.status.health.consecutiveFailures, 2);
  h.clock.advance(2000);
  t.equal(h.status.health.consecutiveFailures, 3);
  h.clock.advance(4000);
  h.maps.fail = () => undefined; // the maps work again
  h.clock.advance(8000);
  t.same(h.syncer.attempts, [
    '0 full',
    '0 partial web', // fails: retried in 1 s
    '1000 partial api,web', // the failed Service and the one changed meanwhile; fails: 2 s
    '3000 partial api,web', // third failure in a row: the retry is a full resync, in 4 s
    '7000 full', // fails: 8 s
    '15000 full', // succeeds
  ]);
  t.same(h.syncer.reloads, [7000, 15000], 'the maps are re-read by the full resyncs after failures only');
  t.equal(h.status.health.consecutiveFailures, 0);
  t.same(h.backends('web')?.length, 2);
  t.same(h.backends('api')?.length, 2);
  t.equal(await h.failures('partial'), 3);
  t.equal(await h.failures('full'), 1);

  // A success reset the backoff: the next failure is retried after 1 s again, as a partial sync.
  h.maps.fail = () => 0;
  h.setEndpoints('web', 3);
  h.clock.advance(0);
  h.maps.fail = () => undefined;
  h.clock.advance(999);
  t.equal(h.syncer.attempts.length, 7, 'not before 1 s');
  h.clock.advance(1);
  t.same(h.syncer.attempts.slice(6), ['15000 partial web', '16000 partial web']);
  t.same(h.backends('web')?.length, 3);
  t.same(h.told, [true, true, false], 'the health check hook hears of the successful syncs only');
  t.equal(await h.failures('partial'), 4);
});

t.test(
  'programming latency: old trigger times, and changes that change nothing, are never observed; a change is, once, when written',
  async (t) => {
    const h = harness(t);
    // The initial list: slices whose trigger times are older than the agent.
    h.setEndpoints('web', 1, h.startedAt - 3_600_000);
    h.setEndpoints('api', 1, h.startedAt - 1);
    h.clock.advance(0);
    t.equal(await h.observed(), 0, 'the initial list: trigger times before the start are not observed');

    // A relist delivers the same slice again, with a trigger time after the start: the frontends do not change.
    h.setEndpoints('web', 1, h.startedAt + 1);
    h.clock.advance(0);
    t.equal(await h.observed(), 0, 'a slice that changes no frontend is not observed');

    // A real change whose write fails: observed only once the retry wrote it.
    h.maps.fail = () => 0;
    h.setEndpoints('web', 2, Date.now());
    h.clock.advance(0);
    t.equal(await h.observed(), 0, 'not observed while its write failed');
    h.maps.fail = () => undefined;
    h.clock.advance(1000);
    t.same(h.backends('web')?.length, 2);
    t.equal(await h.observed(), 1, 'observed when the retry wrote it');

    // Later syncs of other changes do not observe it again.
    h.setEndpoints('api', 2);
    h.clock.advance(0);
    t.same(h.backends('api')?.length, 2);
    t.equal(await h.observed(), 1, 'observed once');
  },
);
