// The two labels kube-proxy's informers select away
// (`!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless`),
// as the upstream specs "Services should implement
// service.kubernetes.io/headless" and "... service-proxy-name" check them:
// the real agent on the Kubernetes source (the test API server, real
// client-node informers), real connections from a client namespace. One
// Service is created with the label (it must never be served, though it has
// a cluster IP and endpoints), one without; then the label is put on the
// second (the watch delivers it as DELETED: no longer served) and taken off
// again (ADDED: served by the same pods). The slices carry no label, as a
// hand-made slice would not: the Service's own label must be enough. Every
// step waits for the agent's sync.
import t, { type Test } from 'tap';
import { endpointSlice, node, service } from '../../lab/apiserver/index.ts';
import { HEADLESS_LABEL, SERVICE_PROXY_NAME_LABEL } from '../../src/model/proxied.ts';
import { POD_IPS, POD_NAMES, TCP_PORT } from './fixtures/cluster.ts';
import { startK8sCluster } from './fixtures/k8s-cluster.ts';

const { c, server, destroy } = await startK8sCluster([node('node', { internalIP: '10.244.0.100' })]);
t.teardown(destroy);

const svc = (name: string, vip: string, labels?: Record<string, string>) =>
  service(name, { clusterIP: vip, ports: [{ name: 'tcp', port: 80, targetPort: TCP_PORT }], ...(labels ? { labels } : {}) });
const slice = (name: string) =>
  endpointSlice(`${name}-abc`, {
    service: name,
    ports: [{ name: 'tcp', port: TCP_PORT }],
    endpoints: POD_IPS.map((a) => ({ addresses: [a], nodeName: 'node' })),
  });

/** Waits for the first sync, after `from`, that leaves `frontends` frontends with `backends` backends in the maps. */
async function synced(from: number, frontends: number, backends: number, what: string): Promise<void> {
  await c.agent.waitFor(
    (l) => l.msg === 'sync done' && l.frontends === frontends && (l.entries as { backends: number }).backends === backends,
    { from, what },
  );
}

/** The Service at vip answers, spread over the three pods. */
async function up(t: Test, vip: string, what: string): Promise<void> {
  const r = await c.client.tcpConnect({ ip: vip, port: 80, count: 30, timeoutMs: 2000, concurrency: 4 });
  t.equal(r.ok, 30, `${what} is up: ${JSON.stringify(r.errors)}`);
  t.same(Object.keys(r.byPod).sort(), POD_NAMES, `${what}: every pod answers`);
}

/** No connection to vip reaches a pod: nothing translates it. */
async function down(t: Test, vip: string, what: string): Promise<void> {
  const r = await c.client.tcpConnect({ ip: vip, port: 80, count: 3, timeoutMs: 500 });
  t.equal(r.ok, 0, `${what} is not up`);
  t.same(r.byPod, {}, `${what}: no pod reached`);
}

for (const [i, { label, value }] of [
  { label: HEADLESS_LABEL, value: '' },
  { label: SERVICE_PROXY_NAME_LABEL, value: 'foo-bar' },
].entries()) {
  t.test(`a Service labelled ${label} is not served; putting the label on and off a served one takes it out and back`, async (t) => {
    const labelled = `labelled-${i}`;
    const toggled = `toggled-${i}`;
    const labelledVip = `10.96.1.${10 + i * 2}`;
    const toggledVip = `10.96.1.${11 + i * 2}`;
    // The labelled one first: once the second is synced, the first one's events (earlier in each watch) are behind the agent.
    let from = c.agent.mark();
    server.create(svc(labelled, labelledVip, { [label]: value }));
    server.create(slice(labelled));
    server.create(svc(toggled, toggledVip));
    server.create(slice(toggled));
    await synced(from, 1, 3, `${toggled} synced, ${labelled} not`);
    await up(t, toggledVip, toggled);
    await down(t, labelledVip, labelled);

    from = c.agent.mark();
    server.update(svc(toggled, toggledVip, { [label]: value }));
    await synced(from, 0, 0, `${toggled} removed once labelled`);
    await down(t, toggledVip, `${toggled}, labelled`);

    from = c.agent.mark();
    server.update(svc(toggled, toggledVip));
    await synced(from, 1, 3, `${toggled} back once the label is gone`);
    await up(t, toggledVip, `${toggled}, the label removed`);
    await down(t, labelledVip, `${labelled}, still`);

    from = c.agent.mark();
    for (const name of [labelled, toggled]) {
      server.delete('Service', 'default', name);
      server.delete('EndpointSlice', 'default', `${name}-abc`);
    }
    await synced(from, 0, 0, 'both removed');
  });
}
