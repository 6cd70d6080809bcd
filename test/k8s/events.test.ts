// Kubernetes Events on the real API server (lab/cluster: Kubernetes' own
// etcd, kube-apiserver and kube-controller-manager, v1.34, no kubelets): the
// agent's Kubernetes path as agent.ts composes it (informers -> incremental
// model -> sync loop, problems and deferred frontends -> Events written as
// plain events.k8s.io/v1 requests by src/agent/events/k8s-sink.ts), over
// in-memory maps instead of BPF maps, since what is checked here is what
// reaches the API server.
//
//   - an invalid EndpointSlice: one Warning Event about it (reason, note
//     naming the field, the slice's uid, so `kubectl describe` shows it); each
//     time it is seen again the same Event's series count grows; other
//     Services are programmed all along
//   - two Services claiming one externalIP:port: FrontendConflict on the loser
//   - a full backends map: MapFull on the Service that does not fit
//
// The invalid object: an EndpointSlice port of 70000. v1.34's EndpointSlice
// validation never checks a port's number (only its name and protocol), so
// the API server stores it; svcmap's schema refuses it. (An address with
// leading zeros, "010.…", is no example: the API server stores it under
// legacy validation, and svcmap reads it as kube-proxy does, as decimal.)
import { pino } from 'pino';
import t, { type Test } from 'tap';
import * as z from 'zod';
import { AgentEvents } from '../../src/agent/events/agent-events.ts';
import { REPORTING_CONTROLLER, startKubernetesEvents } from '../../src/agent/events/k8s-sink.ts';
import { SyncLoop } from '../../src/agent/loops/sync-loop.ts';
import { AgentMetrics } from '../../src/agent/http/metrics.ts';
import { countingProblemReporter } from '../../src/agent/loops/problems-log.ts';
import { KubernetesSource } from '../../src/sources/kubernetes/source.ts';
import type { Capacity } from '../../src/sync/plan.ts';
import { Syncer } from '../../src/sync/syncer.ts';
import { MemoryMaps } from '../sync/helpers.ts';
import { NODE, type RealApiServer, startRealApiServer } from './fixtures-cluster.ts';

let api: RealApiServer;
t.before(async () => {
  const t0 = Date.now();
  api = await startRealApiServer();
  t.comment(`control plane up in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});
t.teardown(async () => {
  await api?.down();
});

// What the test reads back from the API server, checked as it arrives.
const EventSchema = z.object({
  metadata: z.object({ name: z.string(), namespace: z.string() }),
  type: z.string(),
  reason: z.string(),
  note: z.string(),
  action: z.string(),
  reportingController: z.string(),
  reportingInstance: z.string(),
  eventTime: z.string(),
  regarding: z.object({ apiVersion: z.string(), kind: z.string(), namespace: z.string(), name: z.string(), uid: z.string().optional() }),
  series: z.object({ count: z.int(), lastObservedTime: z.string() }).optional(),
});
type Event = z.infer<typeof EventSchema>;
const EventList = z.object({ items: z.array(EventSchema) });
const Uid = z.object({ metadata: z.object({ uid: z.string() }) });

interface Harness {
  syncer: Syncer;
  metrics: AgentMetrics;
  events: AgentEvents;
  /** True when the Service's ClusterIP:80 frontend is in the maps. */
  programmed(vip: string): boolean;
  /** The backend count of that frontend (undefined when it is not in the maps). */
  backendCount(vip: string): number | undefined;
}

/** The agent's Kubernetes path (agent.ts's composition) over in-memory maps; stopped in teardown. */
function harness(t: Test, cap?: Partial<Capacity>): Harness {
  const log = pino({ level: 'silent' });
  const metrics = new AgentMetrics();
  const maps = new MemoryMaps();
  maps.cap = { ...maps.cap, ...cap };
  const syncer = new Syncer(maps);
  // As in agent.ts: the Events hook into the SyncStatus (deferred frontends)
  // and the ProblemReporter (the model's problems).
  const events = startKubernetesEvents(api.kubeConfig(), NODE, log, metrics);
  const status = events.syncStatus(metrics, log);
  const problems = countingProblemReporter(log, metrics, events.problems);
  let loop: SyncLoop | undefined;
  const source = new KubernetesSource(api.kubeConfig(), NODE, {
    changed: () => loop?.poke(),
    informerError: () => {},
  });
  source.model.setNode({ name: NODE, addresses: [] });
  loop = new SyncLoop(source, syncer, status, metrics, problems, log, { minIntervalMs: 0, syncPeriodMs: 3_600_000 });
  loop.start();
  source.start();
  t.teardown(async () => {
    loop?.stop();
    source.stop();
    events.stop();
    await events.recorder.idle();
  });
  return {
    syncer,
    metrics,
    events,
    programmed: (vip) => [...syncer.state.frontends.keys()].some((id) => id.startsWith(`${vip}:80/`)),
    backendCount: (vip) => [...syncer.state.frontends].find(([id]) => id.startsWith(`${vip}:80/`))?.[1].master.count,
  };
}

async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined, limitMs = 30_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`not within ${limitMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** events.k8s.io/v1 Events of a namespace about one object. */
async function eventsAbout(ns: string, name: string): Promise<Event[]> {
  const list = EventList.parse(await api.kubectl.json(['get', 'events.v1.events.k8s.io', '-n', ns]));
  return list.items.filter((e) => e.regarding.name === name && e.reportingController === REPORTING_CONTROLLER);
}

/** A namespace of the test's own, deleted afterwards so later tests' agents do not report on its objects. */
async function namespace(t: Test, name: string): Promise<string> {
  const ns = await api.namespace(name);
  t.teardown(() => api.kubectl.run(['delete', 'namespace', ns, '--wait=false']).then(() => {}));
  return ns;
}

async function createService(ns: string, name: string, spec: Record<string, unknown>): Promise<string> {
  await api.kubectl.run(['create', '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: ns },
      spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP' }], ...spec },
    }),
  });
  return Uid.parse(await api.kubectl.json(['get', 'service', name, '-n', ns])).metadata.uid;
}

/** An EndpointSlice of Service `service` in `ns`, written as a user (or another controller) would. */
async function createSlice(ns: string, name: string, service: string, port: number, addresses: string[]): Promise<string> {
  await api.kubectl.run(['create', '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      addressType: 'IPv4',
      metadata: { name, namespace: ns, labels: { 'kubernetes.io/service-name': service } },
      ports: [{ name: 'http', port, protocol: 'TCP' }],
      endpoints: addresses.map((a) => ({ addresses: [a] })),
    }),
  });
  return Uid.parse(await api.kubectl.json(['get', 'endpointslice', name, '-n', ns])).metadata.uid;
}

t.test('an invalid EndpointSlice: one Warning Event naming the field, its series grows, the rest keeps working', async (t) => {
  const ns = await namespace(t, 'events-invalid');
  await createService(ns, 'web', { clusterIP: '10.96.110.1' });
  // Valid to both: the API server stores the leading zeros, svcmap reads them as decimal.
  await createService(ns, 'zeros', { clusterIP: '10.96.110.2', externalIPs: ['010.96.110.3'] });
  // No selector: the test writes the slice, with a port the API server does not check.
  await createService(ns, 'bad', { clusterIP: '10.96.110.4' });
  const uid = await createSlice(ns, 'bad-1', 'bad', 70000, ['10.244.10.1']);
  const h = harness(t);

  await until('web programmed', () => (h.programmed('10.96.110.1') ? true : undefined));
  t.pass('a valid Service next to the invalid slice is programmed');
  await until('zeros programmed', () => (h.programmed('10.96.110.3') ? true : undefined));
  t.pass('an externalIP written 010.96.110.3 is programmed as 10.96.110.3, as kube-proxy reads it');
  await until('bad programmed', () => (h.programmed('10.96.110.4') ? true : undefined));
  t.equal(h.backendCount('10.96.110.4'), 0, "the invalid slice's endpoint is not a backend of its Service");

  const [ev, ...more] = await until('an Event about bad-1', async () => {
    const list = await eventsAbout(ns, 'bad-1');
    return list.length ? list : undefined;
  });
  t.same(more, [], 'one Event');
  t.match(
    ev,
    {
      type: 'Warning',
      reason: 'InvalidObject',
      action: 'Program',
      reportingController: 'svcmap.io/agent',
      reportingInstance: NODE,
      regarding: { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', namespace: ns, name: 'bad-1', uid },
    },
    'a Warning, reason InvalidObject, from svcmap on this node, about the EndpointSlice (with its uid)',
  );
  t.match(ev!.note, /^ports\[0\]\.port: must be between 1 and 65535, got 70000/, `the note names the field and the value: ${ev!.note}`);
  t.match(ev!.eventTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/, 'eventTime with microseconds');
  t.equal(ev!.series, undefined, 'seen once: no series yet');
  t.same(await eventsAbout(ns, 'zeros'), [], 'no Event about the Service with leading zeros');
  const described = await api.kubectl.run(['describe', 'endpointslice', 'bad-1', '-n', ns]);
  t.match(described, /Warning\s+InvalidObject\s+.*ports\[0\]\.port/, '`kubectl describe endpointslice` shows it');

  // Each update is a new version the agent evaluates, still invalid: the same
  // Event's series counts it, no new Event is made.
  for (const count of [2, 3]) {
    await api.kubectl.run(['label', 'endpointslice', 'bad-1', '-n', ns, '--overwrite', `round=${count}`]);
    const list = await until(`series count ${count}`, async () => {
      const l = await eventsAbout(ns, 'bad-1');
      return l[0]?.series?.count === count ? l : undefined;
    });
    t.equal(list.length, 1, `seen ${count} times: still one Event`);
    t.equal(list[0]!.metadata.name, ev!.metadata.name, 'the same one');
    t.ok(list[0]!.series!.lastObservedTime >= ev!.eventTime, `lastObservedTime ${list[0]!.series!.lastObservedTime}`);
  }
  t.match(
    await h.metrics.registry.getSingleMetricAsString('svcmap_sync_errors_total'),
    /kind="invalid_object"} 1\n/,
    'counted (and logged) once as a sync error, while the Event counts every sighting',
  );

  // The sync loop still programs what changes.
  await createService(ns, 'later', { clusterIP: '10.96.110.5' });
  await until('later programmed', () => (h.programmed('10.96.110.5') ? true : undefined));
  t.pass('a Service created afterwards is programmed');

  // Fixed: no further Events, and the slice's endpoint is a backend.
  await api.kubectl.run([
    'patch',
    'endpointslice',
    'bad-1',
    '-n',
    ns,
    '--type=json',
    '-p',
    JSON.stringify([{ op: 'replace', path: '/ports/0/port', value: 8080 }]),
  ]);
  await until('bad has its backend once fixed', () => (h.backendCount('10.96.110.4') === 1 ? true : undefined));
  await h.events.recorder.idle();
  const after = await eventsAbout(ns, 'bad-1');
  t.same(
    after.map((e) => [e.metadata.name, e.series?.count]),
    [[ev!.metadata.name, 3]],
    'once valid: no new Event, no more counts',
  );
  t.match(await h.metrics.registry.getSingleMetricAsString('svcmap_events_dropped_total'), /reason="api_error"} 0/, 'no write failed');
});

t.test('two Services claiming one externalIP:port: FrontendConflict on the one that lost', async (t) => {
  const ns = await namespace(t, 'events-conflict');
  // The same externalIP on both; "aa" sorts first and keeps it.
  await createService(ns, 'aa', { clusterIP: '10.96.111.1', externalIPs: ['10.96.111.9'] });
  const uid = await createService(ns, 'zz', { clusterIP: '10.96.111.2', externalIPs: ['10.96.111.9'] });
  const h = harness(t);
  const [ev, ...more] = await until('an Event about zz', async () => {
    const list = await eventsAbout(ns, 'zz');
    return list.length ? list : undefined;
  });
  t.same(more, [], 'one Event');
  t.match(ev, { type: 'Warning', reason: 'FrontendConflict', regarding: { kind: 'Service', name: 'zz', uid } }, 'FrontendConflict on zz');
  t.match(
    ev!.note,
    new RegExp(`^spec\\.ports\\[0\\]: frontend 10\\.96\\.111\\.9:80/TCP \\(ExternalIP\\) is already used by Service ${ns}/aa`),
    `the note names the field and the winner: ${ev!.note}`,
  );
  t.same(await eventsAbout(ns, 'aa'), [], 'none on the winner');
  t.ok(h.programmed('10.96.111.2'), "the loser's ClusterIP is still programmed (only the contested frontend is skipped)");
});

t.test('a full backends map: MapFull on the Service that does not fit', async (t) => {
  const ns = await namespace(t, 'events-mapfull');
  await createService(ns, 'small', { clusterIP: '10.96.112.1' });
  // No selector: the test writes the EndpointSlice, with more endpoints than the map has room for.
  const uid = await createService(ns, 'big', { clusterIP: '10.96.112.2' });
  await createSlice(
    ns,
    'big-1',
    'big',
    8080,
    Array.from({ length: 20 }, (_, i) => `10.244.9.${i + 1}`),
  );
  // Room for the cluster's own `kubernetes` Service's endpoint and a few more, not for 20.
  const h = harness(t, { backends: 8 });
  const [ev, ...more] = await until('an Event about big', async () => {
    const list = await eventsAbout(ns, 'big');
    return list.length ? list : undefined;
  });
  t.same(more, [], 'one Event');
  t.match(ev, { type: 'Warning', reason: 'MapFull', regarding: { kind: 'Service', name: 'big', uid } }, 'MapFull on big');
  t.match(ev!.note, /backends map is full \(8 entries\).*--max-backends/, `the note says which map and what to do: ${ev!.note}`);
  t.ok(h.programmed('10.96.112.1'), 'the Service that fits is programmed');
  t.notOk(h.programmed('10.96.112.2'), 'the one that does not is deferred');
});
