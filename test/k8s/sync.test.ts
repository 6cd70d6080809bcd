// The Kubernetes source end to end down to the real BPF maps, on
// lab/apiserver (our protocol-speaking API server), for what a real API
// server cannot be made to do. The real client-node informers, the agent's
// sync loop and maps loaded in the kernel, with every map write recorded and
// checked element by element (fixtures.ts): no intermediate state has fewer
// backends than both the old and the new state.
//
// Here, because only a fake (or a proxy in front of it) can do it:
//   - objects a real server refuses to store (port 70000, IP 10.244.1.300, a
//     Service without spec): reported, counted, and blocking nothing;
//   - a watch stream cut in the middle of an event (fixtures-faults.ts);
//   - a stalled connection: open, silent, never closed (fixtures-faults.ts);
//   - answers of 503, and connection refused (the loopback forward to the real
//     server accepts every connection before it finds the server gone).
// On the real kube-apiserver, with slices written by the real endpointslice
// controller (real-apiserver.test.ts): create, scale up/down, readiness,
// delete, multi-slice, terminating endpoints, a start on existing objects,
// kube-apiserver kill -9 + restart, watches cut (an outage), a real 410 Gone
// from an etcd compaction, and the network programming latency.
import t, { type Test } from 'tap';
import { writeKubeconfig } from '../../lab/apiserver/kubeconfig.ts';
import { endpointSlice, node, service } from '../../lab/apiserver/objects.ts';
import { kubeConfigFor } from '../../lab/apiserver/informers.ts';
import { startServer } from '../../lab/apiserver/testing.ts';
import { KubeConfig } from '@kubernetes/client-node';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { eventually, startSync, tmpKubeDir } from './fixtures.ts';
import { startFaultProxy } from './fixtures-faults.ts';

const VIP = '10.96.0.10';
const ips = (n: number, from = 1) => Array.from({ length: n }, (_, i) => `10.244.1.${from + i}`);
const web = () => service('web', { clusterIP: VIP, ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
const slice = (name: string, addrs: string[]) =>
  endpointSlice(name, { service: 'web', ports: [{ name: 'http', port: 8080 }], endpoints: addrs.map((a) => ({ addresses: [a] })) });
const expectWeb = (addrs: string[]) => addrs.map((a) => `${a}:8080 active`).sort();
const node1 = () => node('node1', { internalIP: '192.168.1.1' });

t.test('malformed objects are reported with namespace/name and field, counted, and block nothing', async (t) => {
  const server = await startServer(t, { objects: [web(), slice('web-a', ips(2)), node1()] });
  const kc = await kubeConfigFor(t, server);
  const h = startSync(kc);
  t.teardown(() => h.stop());
  t.equal(h.status.health.ready, false, 'not ready before the informers listed');
  await h.source.synced;
  await eventually(() => (h.status.health.ready ? undefined : 'no full sync yet'));
  t.ok(h.status.health.lastSyncAt > 0, 'ready after the first full sync');
  server.create(service('bad-port', { clusterIP: '10.96.0.20', ports: [{ name: 'x', port: 70000, targetPort: 80 }] }));
  server.create(service('zero-port', { clusterIP: '10.96.0.21', ports: [{ name: 'x', port: 0, targetPort: 80 }] }));
  server.create(
    endpointSlice('bad-ip', { service: 'web', ports: [{ name: 'http', port: 8080 }], endpoints: [{ addresses: ['10.244.1.300'] }] }),
  );
  server.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'no-spec', namespace: 'default' } });
  server.create(
    endpointSlice('orphan', { service: 'nope', ports: [{ name: 'http', port: 8080 }], endpoints: [{ addresses: ['10.244.9.9'] }] }),
  );
  server.create(service('good', { clusterIP: '10.96.0.30', ports: [{ name: 'http', port: 80, targetPort: 8080 }] }));
  server.create(
    endpointSlice('good-a', { service: 'good', ports: [{ name: 'http', port: 8080 }], endpoints: [{ addresses: ['10.244.3.1'] }] }),
  );
  await eventually(() => (h.frontends().get('10.96.0.30:80/TCP')?.length === 1 ? undefined : 'good service not programmed'));
  t.same(h.frontends().get(`${VIP}:80/TCP`), expectWeb(ips(2)), 'web keeps its valid slice');
  const byName = (n: string) => h.invalid.find((p) => p.name === n);
  t.match(byName('bad-port'), { kind: 'Service', namespace: 'default', path: 'spec.ports[0].port' });
  t.match(byName('zero-port'), { kind: 'Service', path: 'spec.ports[0].port' });
  t.match(byName('bad-ip'), { kind: 'EndpointSlice', path: 'endpoints[0].addresses[0]' });
  t.match(byName('no-spec'), { kind: 'Service', namespace: 'default' });
  const metric = await h.metrics.registry.getSingleMetricAsString('svcmap_sync_errors_total');
  t.match(metric, /svcmap_sync_errors_total\{kind="invalid_object"\} [4-9]/, 'counted in the metric');
  t.notOk(h.frontends().has('10.96.0.20:70000/TCP'));
  t.same(h.syncer.violations, []);
});

/** The harness on a fake server reached through a fault proxy. */
async function throughProxy(t: Test) {
  const server = await startServer(t, { objects: [web(), slice('web-a', ips(4)), node1()] });
  const proxy = await startFaultProxy(server.url);
  t.teardown(() => proxy.close());
  const dir = tmpKubeDir();
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const kc = new KubeConfig();
  kc.loadFromFile(await writeKubeconfig(join(dir, 'kubeconfig'), proxy.url));
  const h = startSync(kc);
  t.teardown(() => h.stop());
  await h.source.synced;
  await eventually(() =>
    JSON.stringify(h.frontends().get(`${VIP}:80/TCP`)) === JSON.stringify(expectWeb(ips(4))) ? undefined : 'initial sync',
  );
  // The informers' lists are done by now, but a watch may still be on its way (a loaded machine).
  await eventually(() => (proxy.openWatches() >= 3 ? undefined : `${proxy.openWatches()} of the 3 watches open`));
  return { server, proxy, h };
}

t.test('a watch stream cut in the middle of an event: the half event is dropped, the whole one comes again', async (t) => {
  const { server, proxy, h } = await throughProxy(t);
  const cut = proxy.cutNextEvent();
  server.update(slice('web-a', ips(5)));
  await cut;
  await eventually(() => (h.informerErrors.some((e) => e.startsWith('EndpointSlice:')) ? undefined : 'the cut was not reported'));
  t.pass(`the cut is an informer error (${h.informerErrors.join('; ')})`);
  await eventually(() =>
    JSON.stringify(h.frontends().get(`${VIP}:80/TCP`)) === JSON.stringify(expectWeb(ips(5))) ? undefined : 'the event never came',
  );
  t.pass('after the restarted watch: 5 backends');
  t.equal(h.invalid.length, 0, 'no half object was taken for an object');
  t.same(h.syncer.violations, []);
});

t.test('a stalled connection (open, silent): the maps keep their state until the watch times out and resumes', async (t) => {
  const { server, proxy, h } = await throughProxy(t);
  t.equal(proxy.stall(), 3, 'the three watches (Services, EndpointSlices, Nodes) stalled');
  const held = proxy.heldBack();
  server.update(slice('web-a', ips(2, 10)));
  await held;
  t.same(
    h.frontends().get(`${VIP}:80/TCP`),
    expectWeb(ips(4)),
    'while stalled (the server sent the change, the proxy holds it): unchanged',
  );
  t.same(h.informerErrors, [], 'a stall is no error: nothing tells the client');
  // client-node's Watch gives up on a connection silent for 30 s and resumes from its resourceVersion.
  await eventually(
    () =>
      JSON.stringify(h.frontends().get(`${VIP}:80/TCP`)) === JSON.stringify(expectWeb(ips(2, 10))) ? undefined : 'the change never came',
    90_000,
  );
  t.ok(proxy.stalledGivenUp() >= 1, `the change came after the client gave up a stalled watch (${proxy.stalledGivenUp()} given up)`);
  t.same(h.syncer.violations, []);
});

t.test('503 answers, then connection refused: the maps keep their state, the changes made meanwhile arrive', async (t) => {
  const server = await startServer(t, { objects: [web(), slice('web-a', ips(4)), node1()] });
  const kc = await kubeConfigFor(t, server);
  const h = startSync(kc);
  t.teardown(() => h.stop());
  await h.source.synced;
  await eventually(() => (h.frontends().get(`${VIP}:80/TCP`)?.length === 4 ? undefined : 'initial sync'));

  // Each outage lasts until the test ends it; what the test waits on is the
  // client's own errors: the outage noticed, then an attempt refused after the change.
  const errorsAfter = async (n: number, what: string) => eventually(() => (h.informerErrors.length > n ? undefined : what), 60_000);

  // 503 ServiceUnavailable (an overloaded or starting API server): watches cut, every request refused with 503.
  const outage = server.unavailable(600_000, { mode: '503' });
  await eventually(() => (h.informerErrors.some((e) => /503|Unavailable/i.test(e)) ? undefined : 'the 503s were not noticed'), 60_000);
  t.pass(`the 503s were noticed (${h.informerErrors.at(-1)})`);
  server.update(slice('web-a', ips(3, 20)));
  await errorsAfter(h.informerErrors.length, 'no attempt refused after the change');
  t.same(h.frontends().get(`${VIP}:80/TCP`), expectWeb(ips(4)), 'during the 503s the maps keep their state');
  server.endOutage();
  await outage;
  await eventually(
    () => (JSON.stringify(h.frontends().get(`${VIP}:80/TCP`)) === JSON.stringify(expectWeb(ips(3, 20))) ? undefined : 'not after the 503s'),
    60_000,
  );
  t.pass('after the 503s the changed state is in the maps');

  // Connection refused: the port closed.
  const refused = server.unavailable(600_000);
  await errorsAfter(h.informerErrors.length, 'the refusals were not noticed');
  t.pass(`the refusals were noticed (${h.informerErrors.at(-1)})`);
  server.create(service('api', { clusterIP: '10.96.0.11', ports: [{ name: 'http', port: 443, targetPort: 8443 }] }));
  server.create(
    endpointSlice('api-a', { service: 'api', ports: [{ name: 'http', port: 8443 }], endpoints: [{ addresses: ['10.244.2.1'] }] }),
  );
  await errorsAfter(h.informerErrors.length, 'no attempt refused after the change');
  t.same(h.frontends().get(`${VIP}:80/TCP`), expectWeb(ips(3, 20)), 'while refused the maps keep their state');
  server.endOutage();
  await refused;
  await eventually(() => (h.frontends().get('10.96.0.11:443/TCP')?.length === 1 ? undefined : 'not after the refusals'), 60_000);
  t.pass('after the refusals the new Service is in the maps');
  t.same(h.syncer.violations, []);
});
