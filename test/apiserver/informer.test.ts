// The real @kubernetes/client-node informers against the test API server: the normal
// life of a list + watch, pagination, bookmarks, selectors, all three resources.

import t from 'tap';
import { CoreV1Api, makeInformer, type V1Service } from '@kubernetes/client-node';
import {
  endpointSlice,
  kubeConfigFor,
  node,
  recordingInformer,
  serverState,
  service,
  startServer,
  waitFor,
} from '../../lab/apiserver/index.ts';

t.test('makeInformer: initial list as adds, then add/update/delete from the watch', async (t) => {
  const server = await startServer(t, {
    objects: [service('a', { clusterIP: '10.0.0.1' }), service('b', { namespace: 'x', clusterIP: '10.0.0.2' })],
  });
  const kc = await kubeConfigFor(t, server);
  const api = kc.makeApiClient(CoreV1Api);
  const informer = makeInformer<V1Service>(kc, '/api/v1/services', () => api.listServiceForAllNamespaces());
  const seen: string[] = [];
  informer.on('add', (o) => seen.push(`add ${o.metadata?.name}`));
  informer.on('update', (o) => seen.push(`update ${o.metadata?.name} ${o.spec?.clusterIP}`));
  informer.on('delete', (o) => seen.push(`delete ${o.metadata?.name}`));
  informer.on('error', (e) => seen.push(`error ${String(e)}`));
  t.teardown(() => informer.stop());
  await informer.start();
  t.same(seen.sort(), ['add a', 'add b'], 'the list is delivered before start() resolves');
  await server.waitForRequest({ watch: true });
  server.create(service('c', { clusterIP: '10.0.0.3' }));
  server.update(service('a', { clusterIP: '10.0.0.9' }));
  server.delete('Service', 'x', 'b');
  await waitFor(() => seen.length === 5, 'three watch events');
  t.same(seen.slice(2), ['add c', 'update a 10.0.0.9', 'delete b']);
  t.same(
    informer
      .list()
      .map((o) => o.metadata?.name)
      .sort(),
    ['a', 'c'],
  );
  t.equal(informer.get('a', 'default')?.metadata?.resourceVersion, server.get('Service', 'default', 'a')!.metadata.resourceVersion);
  t.same(server.lists('Service').length, 1);
  t.same(
    server.watches('Service').map((r) => r.query),
    [{ watch: 'true', resourceVersion: '1002' }],
    'watch from the list RV',
  );
});

t.test('pagination: a list function that follows continue tokens', async (t) => {
  const objects = Array.from({ length: 7 }, (_, i) =>
    endpointSlice(`s-${i}`, { service: 'web', endpoints: [{ addresses: [`10.1.0.${i + 1}`] }], ports: [{ port: 80 }] }),
  );
  const server = await startServer(t, { objects });
  const kc = await kubeConfigFor(t, server);
  const rec = recordingInformer(t, kc, 'EndpointSlice', { limit: 3 });
  await rec.informer.start();
  const lists = server.lists('EndpointSlice');
  t.same(
    lists.map((r) => r.query['limit']),
    ['3', '3', '3'],
    'three pages',
  );
  t.equal(lists[0]!.query['continue'], undefined);
  t.ok(lists[1]!.query['continue'] && lists[2]!.query['continue']);
  t.same(rec.cache(), serverState(server, 'EndpointSlice'));
  t.equal(rec.events.filter((e) => e.type === 'add').length, 7);
});

t.test('bookmarks (requested through the watch path) advance the informer RV', async (t) => {
  const server = await startServer(t, { bookmarkIntervalMs: 0, objects: [service('a')] });
  const kc = await kubeConfigFor(t, server);
  const rec = recordingInformer(t, kc, 'Service', { watchQuery: 'allowWatchBookmarks=true' });
  await rec.informer.start();
  await server.waitForRequest({ watch: true });
  t.same(server.watches()[0]!.query, { allowWatchBookmarks: 'true', watch: 'true', resourceVersion: '1001' }, 'the path query survives');
  server.create(node('n1')); // other kinds move the global RV
  server.create(node('n2'));
  t.equal(rec.informer.latestResourceVersion(), '1001');
  t.equal(server.sendBookmarks(), 1);
  await waitFor(() => rec.informer.latestResourceVersion() === '1003', 'the bookmark RV');
  const mark = server.mark();
  server.cutWatches('end');
  const again = await server.waitForRequest({ watch: true, since: mark });
  t.equal(again.query['resourceVersion'], '1003', 'the next watch resumes from the bookmark');
  t.same(
    rec.events.filter((e) => e.type !== 'connect').map((e) => e.type),
    ['add'],
    'a bookmark is no object event',
  );
});

t.test('selectors: label (makeInformer) and field (ListWatch) selectors filter list and watch', async (t) => {
  const server = await startServer(t, {
    objects: [
      service('web', { labels: { app: 'web' } }),
      service('db', { labels: { app: 'db' } }),
      service('mesh', { labels: { app: 'web', 'service.kubernetes.io/service-proxy-name': 'other' } }),
    ],
  });
  const kc = await kubeConfigFor(t, server);
  const sel = 'app=web,!service.kubernetes.io/service-proxy-name';
  const labels = recordingInformer(t, kc, 'Service', { labelSelector: sel });
  const fields = recordingInformer(t, kc, 'Service', { fieldSelector: 'metadata.name=db' });
  await labels.informer.start();
  await fields.informer.start();
  await waitFor(() => server.openWatches === 2, 'both watches');
  t.same(
    labels.cache().map((s) => s.split('@')[0]),
    ['default/web'],
  );
  t.same(
    fields.cache().map((s) => s.split('@')[0]),
    ['default/db'],
  );
  t.equal(server.watches().find((r) => r.query['labelSelector'])!.query['labelSelector'], sel);
  t.equal(server.watches().find((r) => r.query['fieldSelector'])!.query['fieldSelector'], 'metadata.name=db');
  server.update(service('mesh', { labels: { app: 'web' } })); // enters the label selection
  server.update(service('web', { labels: { app: 'web', 'service.kubernetes.io/service-proxy-name': 'x' } })); // leaves it
  server.update(service('db', { labels: { app: 'db', v: '2' } }));
  await waitFor(() => labels.events.filter((e) => e.type !== 'connect').length === 3, 'label-filtered events');
  await waitFor(() => fields.events.some((e) => e.type === 'update'), 'field-filtered update');
  t.same(
    labels.events.filter((e) => e.type !== 'connect').map((e) => `${e.type} ${e.name}`),
    ['add web', 'add mesh', 'delete web'],
  );
  t.same(
    labels.cache(),
    serverState(
      server,
      'Service',
      (o) => o.metadata.labels?.['app'] === 'web' && !o.metadata.labels['service.kubernetes.io/service-proxy-name'],
    ),
  );
  t.same(
    fields.cache(),
    serverState(server, 'Service', (o) => o.metadata.name === 'db'),
  );
});

t.test('services, endpointslices and nodes, cluster-wide and namespaced', async (t) => {
  const server = await startServer(t);
  const kc = await kubeConfigFor(t, server);
  const svc = recordingInformer(t, kc, 'Service', { namespace: 'prod' });
  const slices = recordingInformer(t, kc, 'EndpointSlice');
  const nodes = recordingInformer(t, kc, 'Node');
  for (const r of [svc, slices, nodes]) await r.informer.start();
  await waitFor(() => server.openWatches === 3, 'three watches');
  server.create(service('web', { namespace: 'prod', clusterIP: '10.0.0.1', ports: [{ port: 80 }] }));
  server.create(service('web', { namespace: 'dev', clusterIP: '10.0.0.2' }));
  server.create(
    endpointSlice('web-abc', {
      namespace: 'prod',
      service: 'web',
      endpoints: [{ addresses: ['10.1.0.1'], nodeName: 'n1' }],
      ports: [{ port: 8080 }],
    }),
  );
  server.create(node('n1', { internalIP: '192.168.1.1' }));
  await waitFor(
    () => svc.cache().length === 1 && slices.cache().length === 1 && nodes.cache().length === 1,
    'each informer to see its object',
  );
  t.same(
    svc.cache(),
    serverState(server, 'Service', (o) => o.metadata.namespace === 'prod'),
  );
  t.same(slices.cache(), serverState(server, 'EndpointSlice'));
  t.same(nodes.cache(), serverState(server, 'Node'));
  t.match(slices.informer.get('web-abc', 'prod'), { endpoints: [{ addresses: ['10.1.0.1'], nodeName: 'n1' }] });
  t.match(nodes.informer.get('n1'), { status: { addresses: [{ type: 'InternalIP', address: '192.168.1.1' }] } });
  t.same(
    server
      .watches()
      .map((r) => r.path)
      .sort(),
    ['/api/v1/namespaces/prod/services', '/api/v1/nodes', '/apis/discovery.k8s.io/v1/endpointslices'],
  );
});
