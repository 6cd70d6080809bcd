// What the Kubernetes source does for a user when the API server misbehaves
// or a Service is not svcmap's, end to end: `svcmap agent --kubeconfig` (the
// real CLI, the real client-node informers) against the test API server
// (lab/apiserver, which can be stopped, restarted and compacted at will),
// objects created through the API, real connections from a client pod in the
// hooks' cgroup to the echo pods.
//  - a Service labelled service.kubernetes.io/service-proxy-name (another
//    proxy's) is not served; with the label removed it is;
//  - the API server stopped while a loop of connections runs: 0 failures (a
//    map is never emptied); a slice changed while it is down, and a Service
//    created after it returns, are served once it is back (its watch cache
//    starts empty: the resumed watches get 410 and relist);
//  - a 410 on running watches (history compacted, watches cut): the relist
//    brings the change made meanwhile, connections follow it.
// Each step waits for the agent's sync of it; no step is timed.
import t from 'tap';
import { type ApiServer, endpointSlice, node, service } from '../../lab/apiserver/index.ts';
import { type Cluster, POD_IPS, POD_NAMES, TCP_PORT } from './fixtures/cluster.ts';
import { type K8sCluster, startK8sCluster } from './fixtures/k8s-cluster.ts';

const WEB = '10.96.0.10';
const THEIRS = '10.96.0.11';
const AFTER = '10.96.0.12';
const PROXY_NAME = 'service.kubernetes.io/service-proxy-name';
/** Generous guards against a hang (an agent that never syncs): the waits end on the agent's sync, not on time. */
const HANG_GUARD_MS = 120_000;

const svc = (name: string, ip: string, labels?: Record<string, string>) =>
  service(name, { clusterIP: ip, ports: [{ name: 'tcp', port: 80, targetPort: TCP_PORT }], ...(labels ? { labels } : {}) });
const slice = (name: string, addrs: readonly string[] = POD_IPS) =>
  endpointSlice(`${name}-abc`, {
    service: name,
    ports: [{ name: 'tcp', port: TCP_PORT }],
    endpoints: addrs.map((a) => ({ addresses: [a], nodeName: 'node' })),
  });

let c: Cluster;
let server: ApiServer;
let k8s: K8sCluster | undefined;
t.before(async () => {
  k8s = await startK8sCluster([node('node', { internalIP: '10.244.0.100' }), svc('web', WEB), slice('web')]);
  ({ c, server } = k8s);
});
t.teardown(async () => {
  await k8s?.destroy();
});

/** The agent's next sync after `from` that leaves `frontends` frontends with `backends` backends. */
function synced(from: number, frontends: number, backends: number, what: string) {
  return c.agent.waitFor(
    (l) => l.msg === 'sync done' && l.frontends === frontends && (l.entries as { backends: number }).backends === backends,
    { from, timeoutMs: HANG_GUARD_MS, what },
  );
}

/** `count` connections to ip:80: the pods reached, each connection answered. */
async function reached(ip: string, count = 60): Promise<string[]> {
  const r = await c.client.tcpConnect({ ip, port: 80, count, timeoutMs: 2000, concurrency: 4 });
  if (r.ok !== count) throw new Error(`connections to ${ip}:80 failed: ${JSON.stringify(r)}`);
  return Object.keys(r.byPod).sort();
}

/** Deletes a Service and its EndpointSlice (no garbage collector runs here). */
function remove(name: string): void {
  server.delete('Service', 'default', name);
  server.delete('EndpointSlice', 'default', `${name}-abc`);
}

/** The frontend addresses svcmap dump lists. */
function dumped(): string[] {
  const d = JSON.parse(c.svcmap('dump', '-o', 'json')) as { frontends: Array<{ address: string }> };
  return d.frontends.map((f) => f.address);
}

t.test('a Service of another proxy (service-proxy-name) is not served; without the label it is', async (t) => {
  t.same(await reached(WEB), POD_NAMES, 'web (created before the agent started) reaches the three pods');
  const from = c.agent.mark();
  server.create(svc('theirs', THEIRS, { [PROXY_NAME]: 'other-proxy' }));
  server.create(slice('theirs'));
  // A Service of svcmap's after it: once that is served, the other proxy's (delivered before it) was passed over.
  server.create(svc('after', AFTER));
  server.create(slice('after'));
  await synced(from, 2, 3, 'sync of "after"');
  t.same(await reached(AFTER), POD_NAMES, 'the Service created after it is served');
  t.notOk(dumped().includes(THEIRS), "svcmap dump has no frontend for the other proxy's Service");
  const r = await c.client.tcpConnect({ ip: THEIRS, port: 80, count: 1, timeoutMs: 500 });
  t.same([r.ok, r.byPod], [0, {}], 'its ClusterIP is not translated: no pod answers');
  const unlabelled = c.agent.mark();
  server.update(svc('theirs', THEIRS));
  await synced(unlabelled, 3, 3, 'sync of "theirs" without the label');
  t.same(await reached(THEIRS), POD_NAMES, 'the label removed: served');
  for (const name of ['theirs', 'after']) remove(name);
  await synced(unlabelled, 1, 3, 'removal of "theirs" and "after"');
});

t.test('the API server stopped during a loop of connections: 0 failures; what changed meanwhile is served when it is back', async (t) => {
  const loop = c.client.tcpLoop({ ip: WEB, port: 80, count: 1500, timeoutMs: 2000 });
  const down = server.mark();
  await server.stop();
  server.update(slice('web', [POD_IPS[0]!, POD_IPS[2]!])); // pod-b leaves while the API server is down
  const from = c.agent.mark();
  await server.restart(); // its watch cache starts empty: watches resuming from before get 410 and relist
  await synced(from, 1, 2, 'the change made while the API server was down');
  t.ok(server.lists('EndpointSlice', down).length > 0, 'the agent listed the EndpointSlices again');
  const r = await loop;
  t.equal(r.failed, 0, `connections during the outage and the relist: ${JSON.stringify(r.errors)}`);
  t.equal(r.ok, 1500, 'every connection of the loop answered');
  const after = await c.client.tcpConnect({ ip: WEB, port: 80, count: 60, timeoutMs: 2000, concurrency: 4 });
  t.equal(after.ok, 60, 'connections after the relist answered');
  t.notOk(after.byPod[POD_NAMES[1]!], 'pod-b (removed while the API server was down) gets no new connection');
  const created = c.agent.mark();
  server.create(svc('after', AFTER));
  server.create(slice('after'));
  await synced(created, 2, 3, 'a Service created after the restart');
  t.same(await reached(AFTER), POD_NAMES, 'a Service created after the restart is served (the watches run again)');
  const removed = c.agent.mark();
  remove('after');
  await synced(removed, 1, 2, 'removal of "after"');
});

t.test('a 410 on running watches: the relist brings the change made meanwhile', async (t) => {
  const mark = server.mark();
  const from = c.agent.mark();
  server.cutWatches();
  server.update(slice('web', [POD_IPS[1]!])); // only pod-b, while no watch is open
  server.compact(); // the change's history gone: the watches resuming from before it get 410
  await synced(from, 1, 1, 'the slice change after the 410');
  t.ok(server.lists('EndpointSlice', mark).length > 0, 'the EndpointSlices were listed again');
  t.same(await reached(WEB), [POD_NAMES[1]], 'connections reach only pod-b');
  const back = c.agent.mark();
  server.update(slice('web'));
  await synced(back, 1, 3, 'all three pods back');
  t.same(await reached(WEB), POD_NAMES, 'and all three again');
});
