// The whole agent on the Kubernetes source: `svcmap agent --kubeconfig` (the
// real CLI, the real client-node informers) against the test API server;
// objects created through the API drive real connections from a client
// namespace to pods in namespaces. Also the agent's metrics and health
// endpoints as an operator would scrape them.
import t from 'tap';
import { type ApiServer, endpointSlice, node, service } from '../../lab/apiserver/index.ts';
import { type Cluster, POD_IPS, POD_NAMES, TCP_PORT } from './fixtures/cluster.ts';
import { type K8sCluster, startK8sCluster } from './fixtures/k8s-cluster.ts';

const VIP = '10.96.0.10';
const slice = (addrs: readonly string[]) =>
  endpointSlice('web-abc', {
    service: 'web',
    ports: [{ name: 'tcp', port: TCP_PORT }],
    endpoints: addrs.map((a) => ({ addresses: [a], nodeName: 'node' })),
  });

let c: Cluster;
let server: ApiServer;
let k8s: K8sCluster | undefined;
t.before(async () => {
  k8s = await startK8sCluster([node('node', { internalIP: '10.244.0.100' })]);
  ({ c, server } = k8s);
});
t.teardown(async () => {
  await k8s?.destroy();
});

async function metricsText(): Promise<string> {
  const l = c.agent.lines.find((x) => x.msg === 'serving metrics and health')!;
  return (await fetch(`http://127.0.0.1:${String(l.metricsPort)}/metrics`)).text();
}

async function health(path: string): Promise<number> {
  const l = c.agent.lines.find((x) => x.msg === 'serving metrics and health')!;
  return (await fetch(`http://127.0.0.1:${String(l.healthPort)}${path}`)).status;
}

t.test('a Service created through the API is reachable', async (t) => {
  const from = c.agent.mark();
  server.create(service('web', { clusterIP: VIP, ports: [{ name: 'tcp', port: 80, targetPort: TCP_PORT }] }));
  server.create(slice(POD_IPS));
  await c.agent.waitFor((l) => l.msg === 'sync done' && (l.entries as { backends: number }).backends === 3, {
    from,
    what: 'sync with 3 backends',
  });
  const r = await c.client.tcpConnect({ ip: VIP, port: 80, count: 90, timeoutMs: 2000, concurrency: 4 });
  t.equal(r.ok, 90, JSON.stringify(r.errors));
  t.same(Object.keys(r.byPod).sort(), POD_NAMES);
});

t.test('scale down during a loop of connections: 0 failures, the removed pod gets no new ones', async (t) => {
  const loop = c.client.tcpLoop({ ip: VIP, port: 80, count: 1500, timeoutMs: 2000 });
  await new Promise((r) => setTimeout(r, 100));
  const from = c.agent.mark();
  server.update(slice([POD_IPS[0]!, POD_IPS[2]!]));
  await c.agent.waitFor((l) => l.msg === 'sync done' && (l.entries as { backends: number }).backends === 2, {
    from,
    what: 'scale-down synced',
  });
  const r = await loop;
  t.equal(r.failed, 0, JSON.stringify(r.errors));
  t.equal(r.ok, 1500);
  const after = await c.client.tcpConnect({ ip: VIP, port: 80, count: 60, timeoutMs: 2000, concurrency: 4 });
  t.equal(after.ok, 60);
  t.notOk(after.byPod[POD_NAMES[1]!], 'no new connection to the removed pod');
});

t.test('deleting the Service: connections to its VIP are no longer translated', async (t) => {
  const from = c.agent.mark();
  server.delete('Service', 'default', 'web');
  await c.agent.waitFor((l) => l.msg === 'sync done' && (l.entries as { services: number }).services === 0, {
    from,
    what: 'removal synced',
  });
  const r = await c.client.tcpConnect({ ip: VIP, port: 80, count: 1, timeoutMs: 500 });
  t.equal(r.ok, 0);
  server.create(service('web', { clusterIP: VIP, ports: [{ name: 'tcp', port: 80, targetPort: TCP_PORT }] }));
});

t.test('metrics and health endpoints', async (t) => {
  t.equal(await health('/readyz'), 200, 'ready after the first full sync');
  t.equal(await health('/healthz'), 200);
  t.equal(await health('/livez'), 200);
  const m = await metricsText();
  for (const name of [
    'svcmap_sync_duration_seconds_bucket',
    'svcmap_network_programming_duration_seconds_bucket',
    'svcmap_map_entries{map="svcmap_svc"}',
    'svcmap_map_capacity{map="svcmap_be"} 65536',
    'svcmap_map_capacity{map="svcmap_be6"} 65536',
    'svcmap_sync_errors_total{kind="invalid_object"}',
    'process_resident_memory_bytes',
  ]) {
    t.ok(m.includes(name), `exposes ${name}`);
  }
});

t.test(
  '/healthz: 503 while the Node is tainted for deletion by the cluster autoscaler (nodeEligible false), /livez unaffected',
  async (t) => {
    const healthz = async (path = '/healthz') => {
      const l = c.agent.lines.find((x) => x.msg === 'serving metrics and health')!;
      const r = await fetch(`http://127.0.0.1:${String(l.healthPort)}${path}`);
      return { status: r.status, body: (await r.json()) as Record<string, unknown> };
    };
    const tainted = node('node', { internalIP: '10.244.0.100' });
    tainted.spec = { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', value: '1700000000', effect: 'NoSchedule' }] };
    let from = c.agent.mark();
    server.update(tainted);
    await c.agent.waitFor((l) => l.msg === 'node is being deleted: /healthz answers 503', { from, what: 'the taint seen' });
    let r = await healthz();
    t.equal(r.status, 503);
    t.match(r.body, { nodeEligible: false, healthy: true }, 'the proxy itself is healthy; the node is not eligible');
    t.equal((await healthz('/livez')).status, 200, "/livez ignores the node, as kube-proxy's");

    from = c.agent.mark();
    server.update(node('node', { internalIP: '10.244.0.100' }));
    await c.agent.waitFor((l) => l.msg === 'node eligible again', { from, what: 'the taint removed' });
    r = await healthz();
    t.equal(r.status, 200);
    t.match(r.body, { nodeEligible: true });
  },
);
