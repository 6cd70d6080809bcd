// The health endpoints fed by the real SyncStatus: /readyz says when the last
// sync succeeded and, while syncs fail and are retried, how many failed in a
// row; the failure counter is split by kind; /healthz says the node's lb mode. Then what a healthCheckNodePort
// counts and answers.
import pino from 'pino';
import t from 'tap';
import { healthCheckBody, healthCheckOf } from '../../src/agent/http/health-check-ports.ts';
import { serveHealth } from '../../src/agent/http/http-servers.ts';
import { askAgent } from '../../src/cli/agent-health.ts';
import { AgentMetrics } from '../../src/agent/http/metrics.ts';
import { SyncStatus } from '../../src/agent/loops/sync-status.ts';
import { buildDesiredState } from '../model/desired.ts';
import type { EndpointSlice, Service } from '../../src/model/schemas.ts';
import { validateObject } from '../../src/model/validate.ts';
import { ApplyError } from '../../src/sync/apply.ts';
import type { SyncReport } from '../../src/sync/syncer.ts';

const report = (full: boolean): SyncReport => ({
  full,
  changed: 1,
  deferred: [],
  durationMs: 1,
  ops: {
    backendUpserts: 0,
    revNatUpserts: 0,
    srcRangeUpserts: 0,
    slotUpserts: 0,
    masterUpserts: 1,
    masterDeletes: 0,
    slotDeletes: 0,
    revNatDeletes: 0,
    srcRangeDeletes: 0,
    backendDeletes: 0,
  },
  entries: { services: 1, backends: 0, revNat: 1, srcRanges: 0 },
});
const capacity = { services: 10, backends: 10, revNat: 10, srcRanges: 10 };

t.test('/readyz: the last successful sync, and the failures since', async (t) => {
  const metrics = new AgentMetrics();
  const status = new SyncStatus(metrics, pino({ level: 'silent' }));
  const { server, port } = await serveHealth(() => status.health, 60_000, { bindAddress: '127.0.0.1', port: 0 });
  t.teardown(() => server.close());
  const readyz = async () => {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`);
    return { code: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  let r = await readyz();
  t.equal(r.code, 503, 'not ready before the first full sync');
  t.equal(r.body['lastSuccessfulSync'], '', 'no sync yet');

  status.succeeded(report(true), capacity, 1);
  const at = new Date(status.health.lastSyncAt).toISOString();
  r = await readyz();
  t.equal(r.code, 200);
  t.equal(r.body['lastSuccessfulSync'], at, 'the time of the sync that succeeded');
  t.notOk('consecutiveSyncFailures' in r.body, 'no failures to report');

  const err = new ApplyError('slots', new Error('ENOMEM'));
  status.failed(err, { kind: 'partial', failures: 1, retryInMs: 1000, next: 'partial' });
  status.failed(err, { kind: 'partial', failures: 2, retryInMs: 2000, next: 'partial' });
  status.failed(err, { kind: 'full', failures: 3, retryInMs: 4000, next: 'full' });
  r = await readyz();
  t.equal(r.code, 200, 'still ready: the maps hold the last good state, partly updated');
  t.equal(r.body['lastSuccessfulSync'], at, 'a failed sync does not move it');
  t.equal(r.body['consecutiveSyncFailures'], 3);
  const text = await metrics.registry.getSingleMetricAsString('svcmap_sync_failures_total');
  t.match(text, /svcmap_sync_failures_total\{kind="partial"\} 2$/m);
  t.match(text, /svcmap_sync_failures_total\{kind="full"\} 1$/m);

  status.succeeded(report(false), capacity, 1);
  r = await readyz();
  t.notOk('consecutiveSyncFailures' in r.body, 'a success ends the run of failures');
  t.equal(r.body['lastSuccessfulSync'], new Date(status.health.lastSyncAt).toISOString());
});

t.test("/healthz says the node's --lb-mode, svcmap status reads it, and svcmap_lb_mode_info carries it", async (t) => {
  for (const lbMode of ['snat', 'dsr', 'hybrid'] as const) {
    const metrics = new AgentMetrics({ lbMode });
    const status = new SyncStatus(metrics, pino({ level: 'silent' }));
    const { server, port } = await serveHealth(() => status.health, 60_000, { bindAddress: '127.0.0.1', port: 0, lbMode });
    t.teardown(() => server.close());
    const body = (await (await fetch(`http://127.0.0.1:${port}/healthz`)).json()) as Record<string, unknown>;
    t.equal(body['lbMode'], lbMode, `/healthz: ${lbMode}`);
    t.match(await askAgent(`127.0.0.1:${port}`), { healthy: true, lbMode }, 'as svcmap status reads it');
    t.equal(
      (await metrics.registry.getSingleMetricAsString('svcmap_lb_mode_info'))
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .join('\n'),
      `svcmap_lb_mode_info{mode="${lbMode}"} 1`,
      'the metric: one sample, the mode',
    );
  }
  const metrics = new AgentMetrics();
  t.match(await metrics.registry.getSingleMetricAsString('svcmap_lb_mode_info'), /^svcmap_lb_mode_info\{mode="snat"\} 1$/m, 'default snat');
});

// healthCheckOf over what the model builds from a Service and its slices
// (the e2e test, test/e2e/health-check-node-port.test.ts, asks the servers).
const object = <T>(o: unknown): T => {
  const r = validateObject(o);
  if (!r.ok) throw new Error(JSON.stringify(r));
  return r.obj as T;
};
const lbService = object<Service>({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'lb', namespace: 'default' },
  spec: {
    type: 'LoadBalancer',
    clusterIP: '10.96.0.5',
    externalTrafficPolicy: 'Local',
    healthCheckNodePort: 32000,
    ports: [
      { name: 'a', port: 80, targetPort: 8080, nodePort: 30080 },
      { name: 'b', port: 81, targetPort: 8081, nodePort: 30081 },
    ],
  },
});
const lbSlice = (endpoints: Array<{ ip: string; node: string; ready: boolean; terminating?: boolean }>) =>
  object<EndpointSlice>({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    addressType: 'IPv4',
    metadata: { name: 'lb-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'lb' } },
    ports: [
      { name: 'a', port: 8080 },
      { name: 'b', port: 8081 },
    ],
    endpoints: endpoints.map((e) => ({
      addresses: [e.ip],
      nodeName: e.node,
      conditions: { ready: e.ready, serving: true, terminating: e.terminating ?? false },
    })),
  });
const countOn = (endpoints: Parameters<typeof lbSlice>[0]) => {
  const { state } = buildDesiredState({
    services: [lbService],
    slices: [lbSlice(endpoints)],
    node: { name: 'n1', addresses: ['192.168.0.1'] },
  });
  return healthCheckOf([...state.frontends.values()]);
};

t.test("healthCheckOf: the node's ready endpoints by address (two ports, one endpoint); terminating ones do not count", async (t) => {
  t.same(
    countOn([
      { ip: '10.0.0.1', node: 'n1', ready: true },
      { ip: '10.0.0.2', node: 'n2', ready: true },
    ]),
    { namespace: 'default', name: 'lb', port: 32000, localEndpoints: 1 },
    'one local pod behind both ports, one remote',
  );
  t.equal(
    countOn([
      { ip: '10.0.0.1', node: 'n1', ready: true },
      { ip: '10.0.0.3', node: 'n1', ready: false, terminating: true },
    ])?.localEndpoints,
    1,
    'a terminating one beside a ready one',
  );
  const { state } = buildDesiredState({
    services: [lbService],
    slices: [lbSlice([{ ip: '10.0.0.3', node: 'n1', ready: false, terminating: true }])],
    node: { name: 'n1', addresses: ['192.168.0.1'] },
  });
  const external = [...state.frontends.values()].filter((f) => f.healthCheckNodePort !== undefined && f.scope === 'external');
  t.ok(
    external.length > 0 && external.every((f) => f.backends.length === 1 && f.backends[0]!.state === 'terminating'),
    'only terminating: still the backend (the fallback)',
  );
  t.equal(healthCheckOf([...state.frontends.values()])?.localEndpoints, 0, 'but the check counts none');
});

t.test("healthCheckBody: kube-proxy's text, tab-indented without a final newline", async (t) => {
  t.equal(
    healthCheckBody({ namespace: 'ns', name: 'web' }, 2, true),
    '{\n\t"service": {\n\t\t"namespace": "ns",\n\t\t"name": "web"\n\t},\n\t"localEndpoints": 2,\n\t"serviceProxyHealthy": true\n}',
  );
});
