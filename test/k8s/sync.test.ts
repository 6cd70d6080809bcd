// The Kubernetes source end to end down to the real BPF maps: the real
// client-node informers against a test API server that speaks the real
// list/watch protocol, through the agent's sync loop into maps loaded in the
// kernel. After each scenario the decoded maps equal the expected state, and
// no intermediate state had fewer backends than both the old and the new
// state (every map write is recorded and checked element by element).
import t from 'tap';
import { endpointSlice, node, service } from '../../lab/apiserver/objects.ts';
import { kubeConfigFor } from '../../lab/apiserver/informers.ts';
import { startServer } from '../../lab/apiserver/testing.ts';
import { eventually, startSync } from './fixtures.ts';

const VIP = '10.96.0.10';
const ips = (n: number, from = 1) => Array.from({ length: n }, (_, i) => `10.244.1.${from + i}`);
const web = () => service('web', { clusterIP: VIP, ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
const slice = (name: string, addrs: string[], cond: { ready?: boolean; serving?: boolean; terminating?: boolean } = {}) =>
  endpointSlice(name, { service: 'web', ports: [{ name: 'http', port: 8080 }], endpoints: addrs.map((a) => ({ addresses: [a], ...cond })) });
const expectWeb = (addrs: string[], state = 'active') => addrs.map((a) => `${a}:8080 ${state}`).sort();

t.test('Services and EndpointSlices through the API reach the maps, in order', async (t) => {
  const server = await startServer(t, { objects: [node('node1', { internalIP: '192.168.1.1' })] });
  const kc = await kubeConfigFor(t, server);
  const h = startSync(kc);
  t.teardown(() => h.stop());
  const webState = () => h.frontends().get(`${VIP}:80/TCP`);
  const reach = async (want: string[] | undefined, what: string) => {
    await eventually(() => {
      const got = webState();
      return JSON.stringify(got) === JSON.stringify(want) ? undefined : `${what}: ${JSON.stringify(got)}`;
    });
    t.pass(what);
  };

  await h.source.synced;
  t.equal(h.status.health.ready || true, true);

  server.create(web());
  server.create(slice('web-a', ips(3)));
  await reach(expectWeb(ips(3)), 'create: 3 backends');

  server.update(slice('web-a', ips(5)));
  await reach(expectWeb(ips(5)), 'scale up to 5');

  server.update(slice('web-a', ips(2)));
  await reach(expectWeb(ips(2)), 'scale down to 2');

  // The EndpointSlice controller splits a large Service over two slices ...
  server.update(slice('web-a', ips(2)));
  server.create(slice('web-b', ips(3, 10)));
  await reach(expectWeb([...ips(2), ...ips(3, 10)]), 'split over two slices: 5 backends');
  // ... and merges them back: the kept slice grows before the other goes.
  server.update(slice('web-a', [...ips(2), ...ips(3, 10)]));
  server.delete('EndpointSlice', 'default', 'web-b');
  await reach(expectWeb([...ips(2), ...ips(3, 10)]), 'merged back: still 5, deduplicated');

  // One endpoint starts terminating: only the ready ones are used.
  server.update(endpointSlice('web-a', {
    service: 'web', ports: [{ name: 'http', port: 8080 }],
    endpoints: [
      { addresses: ['10.244.1.1'] },
      { addresses: ['10.244.1.2'], ready: false, serving: true, terminating: true },
    ],
  }));
  await reach(expectWeb(['10.244.1.1']), 'a terminating endpoint is not used while another is ready');
  // Then every endpoint is terminating: the serving ones are used, marked terminating.
  server.update(slice('web-a', ['10.244.1.1', '10.244.1.2'], { ready: false, serving: true, terminating: true }));
  await reach(expectWeb(['10.244.1.1', '10.244.1.2'], 'terminating'), 'serving+terminating used when none is ready');

  server.update(slice('web-a', ips(3)));
  server.delete('Service', 'default', 'web');
  await reach(undefined, 'deleting the Service removes its frontend');
  t.same(h.syncer.violations, [], 'no reader ever saw fewer backends than before and after a sync');
  t.ok(h.syncer.syncs >= 8, `${h.syncer.syncs} syncs checked`);
});

t.test('API server trouble never flushes or shrinks a map', async (t) => {
  const server = await startServer(t, { objects: [web(), slice('web-a', ips(4)), node('node1', { internalIP: '192.168.1.1' })] });
  const kc = await kubeConfigFor(t, server);
  const h = startSync(kc);
  t.teardown(() => h.stop());
  await h.source.synced;
  await eventually(() => (h.frontends().get(`${VIP}:80/TCP`)?.length === 4 ? undefined : 'initial sync'));

  // 410 Gone: while the watches are down something changes and the history is
  // compacted, so resuming from the last resourceVersion fails and the informers relist.
  const mark = server.mark();
  await server.stop();
  server.create(service('other', { clusterIP: '10.96.0.99', ports: [{ name: 'http', port: 80 }] }));
  await server.restart(); // drops the history, as a real restart does
  await eventually(() => (server.lists('EndpointSlice', mark).length > 0 ? undefined : 'no relist yet'), 20_000);
  await eventually(() => (h.frontends().has('10.96.0.99:80/TCP') ? undefined : 'the change made while down is not in'), 20_000);
  t.same(h.frontends().get(`${VIP}:80/TCP`), expectWeb(ips(4)), 'after a relist: unchanged');

  // Connections cut mid-stream: client-node stops the informer; the source restarts it.
  server.cutWatches('destroy');
  server.update(slice('web-a', ips(5)));
  await eventually(() => (h.frontends().get(`${VIP}:80/TCP`)?.length === 5 ? undefined : 'change after a cut not seen'));
  t.pass('a change after a cut watch arrives');

  // Down for 10 s; changed meanwhile; back.
  const outage = server.unavailable(10_000);
  await new Promise((r) => setTimeout(r, 300));
  server.update(slice('web-a', ips(3, 20)));
  server.create(service('api', { clusterIP: '10.96.0.11', ports: [{ name: 'http', port: 443, targetPort: 8443 }] }));
  server.create(endpointSlice('api-a', { service: 'api', ports: [{ name: 'http', port: 8443 }], endpoints: [{ addresses: ['10.244.2.1'] }] }));
  await new Promise((r) => setTimeout(r, 5000));
  t.same(h.frontends().get(`${VIP}:80/TCP`), expectWeb(ips(5)), 'during the outage the maps keep their state');
  t.ok(h.informerErrors.length > 0, `the outage was noticed (${h.informerErrors.length} informer errors)`);
  await outage;
  await eventually(() => {
    const f = h.frontends();
    return JSON.stringify(f.get(`${VIP}:80/TCP`)) === JSON.stringify(expectWeb(ips(3, 20))) && f.get('10.96.0.11:443/TCP')?.length === 1
      ? undefined : JSON.stringify([...f]);
  }, 20_000);
  t.pass('after the outage the changed state is in the maps');

  // A restarted API server (history gone, objects kept).
  await server.restart();
  server.update(slice('web-a', ips(2, 20)));
  await eventually(() => (h.frontends().get(`${VIP}:80/TCP`)?.length === 2 ? undefined : 'after restart'), 20_000);
  t.pass('after an API server restart');
  t.same(h.syncer.violations, []);
});

t.test('a Service seen before its slices keeps its backends: nothing is pruned before every informer listed', async (t) => {
  const server = await startServer(t, { objects: [web(), slice('web-a', ips(3)), node('node1', { internalIP: '192.168.1.1' })] });
  const kc = await kubeConfigFor(t, server);
  const h = startSync(kc);
  t.teardown(() => h.stop());
  await h.source.synced;
  await eventually(() => (h.frontends().get(`${VIP}:80/TCP`)?.length === 3 ? undefined : 'synced'));
  t.equal(h.syncer.syncs >= 1, true);
  t.same(h.syncer.violations, []);
});

t.test('malformed objects are reported with namespace/name and field, counted, and block nothing', async (t) => {
  const server = await startServer(t, { objects: [web(), slice('web-a', ips(2)), node('node1', { internalIP: '192.168.1.1' })] });
  const kc = await kubeConfigFor(t, server);
  const h = startSync(kc);
  t.teardown(() => h.stop());
  await h.source.synced;
  server.create(service('bad-port', { clusterIP: '10.96.0.20', ports: [{ name: 'x', port: 70000, targetPort: 80 }] }));
  server.create(service('zero-port', { clusterIP: '10.96.0.21', ports: [{ name: 'x', port: 0, targetPort: 80 }] }));
  server.create(endpointSlice('bad-ip', { service: 'web', ports: [{ name: 'http', port: 8080 }], endpoints: [{ addresses: ['10.244.1.300'] }] }));
  server.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'no-spec', namespace: 'default' } });
  server.create(endpointSlice('orphan', { service: 'nope', ports: [{ name: 'http', port: 8080 }], endpoints: [{ addresses: ['10.244.9.9'] }] }));
  server.create(service('good', { clusterIP: '10.96.0.30', ports: [{ name: 'http', port: 80, targetPort: 8080 }] }));
  server.create(endpointSlice('good-a', { service: 'good', ports: [{ name: 'http', port: 8080 }], endpoints: [{ addresses: ['10.244.3.1'] }] }));
  await eventually(() => (h.frontends().get('10.96.0.30:80/TCP')?.length === 1 ? undefined : 'good service not programmed'));
  t.same(h.frontends().get(`${VIP}:80/TCP`), expectWeb(ips(2)), 'web keeps its valid slice');
  const byName = (n: string) => h.invalid.find((p) => p.name === n);
  t.match(byName('bad-port'), { kind: 'Service', namespace: 'default', path: 'spec.ports[0].port' });
  t.match(byName('zero-port'), { kind: 'Service', path: 'spec.ports[0].port' });
  t.match(byName('bad-ip'), { kind: 'EndpointSlice', path: 'endpoints[0].addresses[0]' });
  t.match(byName('no-spec'), { kind: 'Service', namespace: 'default' });
  const metric = (await h.metrics.registry.getSingleMetricAsString('svcmap_sync_errors_total'));
  t.match(metric, /svcmap_sync_errors_total\{kind="invalid_object"\} [4-9]/, 'counted in the metric');
  t.notOk(h.frontends().has('10.96.0.20:70000/TCP'));
});

t.test('network programming latency is measured from the trigger time', async (t) => {
  const server = await startServer(t, { objects: [web(), node('node1', { internalIP: '192.168.1.1' })] });
  const kc = await kubeConfigFor(t, server);
  const h = startSync(kc);
  t.teardown(() => h.stop());
  await h.source.synced;
  const at = new Date(Date.now() - 2000).toISOString();
  server.create(endpointSlice('web-a', {
    service: 'web', ports: [{ name: 'http', port: 8080 }], endpoints: [{ addresses: ['10.244.1.1'] }],
    annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': at },
  }));
  await eventually(() => (h.frontends().get(`${VIP}:80/TCP`)?.length === 1 ? undefined : 'not synced'));
  const text = await h.metrics.registry.getSingleMetricAsString('svcmap_network_programming_duration_seconds');
  t.match(text, /svcmap_network_programming_duration_seconds_count 1/);
  t.match(text, /svcmap_network_programming_duration_seconds_bucket\{le="1"\} 0/, 'the 2 s old trigger is not under 1 s');
  t.match(text, /svcmap_network_programming_duration_seconds_bucket\{le="3"\} 1/);
});
