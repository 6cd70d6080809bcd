// The HTTP protocol without a client library: status codes, Status bodies, list shape,
// pagination, resourceVersion semantics, selectors, writes; and the watch protocol:
// event stream shape, resuming from an RV, 410 as an ERROR event, bookmarks, selectors
// at their edges, timeouts and cuts.

import t from 'tap';
import { endpointSlice, http, node, rawWatch, service, startServer, waitFor } from '../../lab/apiserver/index.ts';

t.test('list shape: kind/apiVersion on the list, not on items; ListMeta RV; key order', async (t) => {
  const server = await startServer(t, { initialResourceVersion: 100 });
  server.create(service('b', { namespace: 'x' }));
  server.create(service('a', { namespace: 'y' }));
  server.create(service('z', { namespace: 'x' }));
  server.create(endpointSlice('b-1', { namespace: 'x', service: 'b', endpoints: [{ addresses: ['10.1.0.1'] }], ports: [{ port: 80 }] }));
  const r = await http(server, 'GET', '/api/v1/services');
  t.equal(r.status, 200);
  t.match(r.headers.get('content-type'), /^application\/json/);
  t.same(Object.keys(r.body).sort(), ['apiVersion', 'items', 'kind', 'metadata']);
  t.equal(r.body.kind, 'ServiceList');
  t.equal(r.body.apiVersion, 'v1');
  t.same(r.body.metadata, { resourceVersion: '104' }, 'the RV of the whole store, no continue');
  t.same(
    r.body.items.map((i: any) => `${i.metadata.namespace}/${i.metadata.name}`),
    ['x/b', 'x/z', 'y/a'],
  );
  for (const i of r.body.items) {
    t.equal(i.kind, undefined, 'items carry no kind, like the real apiserver');
    t.equal(i.apiVersion, undefined);
  }
  const ns = await http(server, 'GET', '/api/v1/namespaces/x/services');
  t.same(
    ns.body.items.map((i: any) => i.metadata.name),
    ['b', 'z'],
  );
  const slices = await http(server, 'GET', '/apis/discovery.k8s.io/v1/namespaces/x/endpointslices');
  t.match(slices.body, {
    kind: 'EndpointSliceList',
    apiVersion: 'discovery.k8s.io/v1',
    items: [{ metadata: { name: 'b-1' }, addressType: 'IPv4' }],
  });
  const empty = await http(server, 'GET', '/api/v1/nodes');
  t.same(empty.body, { kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion: '104' }, items: [] });
});

t.test('GET one object; 404 Status; unknown paths', async (t) => {
  const server = await startServer(t);
  server.create(service('web', { clusterIP: '10.0.0.1' }));
  server.create(node('n1', { internalIP: '192.168.0.1' }));
  const r = await http(server, 'GET', '/api/v1/namespaces/default/services/web');
  t.equal(r.status, 200);
  t.match(r.body, { kind: 'Service', apiVersion: 'v1', metadata: { name: 'web', namespace: 'default' }, spec: { clusterIP: '10.0.0.1' } });
  t.match((await http(server, 'GET', '/api/v1/nodes/n1')).body, { kind: 'Node', metadata: { name: 'n1' } });
  const missing = await http(server, 'GET', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/nope');
  t.equal(missing.status, 404);
  t.same(missing.body, {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'endpointslices.discovery.k8s.io "nope" not found',
    reason: 'NotFound',
    details: { name: 'nope', group: 'discovery.k8s.io', kind: 'endpointslices' },
    code: 404,
  });
  t.equal((await http(server, 'GET', '/api/v1/configmaps')).status, 404, 'resource not served');
  t.equal((await http(server, 'GET', '/api/v1/services/web')).status, 404, 'a namespaced object needs its namespace');
  t.equal((await http(server, 'GET', '/api/v1/namespaces/default/nodes')).status, 404, 'nodes are cluster-scoped');
  t.equal((await http(server, 'GET', '/nonsense')).status, 404);
  t.match((await http(server, 'GET', '/version')).body, { major: '1' });
  t.equal((await http(server, 'GET', '/healthz')).body, 'ok');
});

t.test('POST creates: 201, identity filled in, AlreadyExists, namespace checks, status rules', async (t) => {
  const server = await startServer(t);
  const created = await http(server, 'POST', '/api/v1/namespaces/prod/services', {
    ...service('web', { clusterIP: '10.0.0.1', status: { loadBalancer: { ingress: [{ ip: '1.2.3.4' }] } } }),
    metadata: { name: 'web' },
  });
  t.equal(created.status, 201);
  t.match(created.body, {
    kind: 'Service',
    metadata: { name: 'web', namespace: 'prod', generation: 1, uid: /./, resourceVersion: server.resourceVersion },
  });
  t.equal(created.body.status, undefined, 'a Service is created without status (PrepareForCreate)');
  const again = await http(server, 'POST', '/api/v1/namespaces/prod/services', service('web', { namespace: 'prod' }));
  t.equal(again.status, 409);
  t.match(again.body, { reason: 'AlreadyExists', message: 'services "web" already exists', code: 409 });
  t.equal((await http(server, 'POST', '/api/v1/namespaces/prod/services', service('other', { namespace: 'dev' }))).status, 400);
  t.equal((await http(server, 'POST', '/api/v1/services', service('x'))).status, 405, 'no create on the all-namespaces path');
  const withRv = await http(server, 'POST', '/api/v1/namespaces/prod/services', {
    ...service('rv'),
    metadata: { name: 'rv', resourceVersion: '5' },
  });
  t.equal(withRv.status, 500, 'resourceVersion set on create: the real server answers 500');
  t.equal((await http(server, 'POST', '/api/v1/namespaces/prod/services', { kind: 'Service', metadata: {} })).status, 422);
  t.equal((await http(server, 'POST', '/api/v1/namespaces/prod/services', { kind: 'Node', metadata: { name: 'q' } })).status, 400);
  const n = await http(server, 'POST', '/api/v1/nodes', node('n1', { internalIP: '192.168.0.1' }));
  t.equal(n.status, 201);
  t.match(n.body.status, { addresses: [{ type: 'InternalIP', address: '192.168.0.1' }] }, 'a Node keeps the status it was created with');
  t.equal((await http(server, 'POST', '/api/v1/namespaces/prod/services', 'not json')).status, 400);
});

t.test('PUT: resourceVersion precondition -> 409 Conflict; status subresource', async (t) => {
  const server = await startServer(t);
  const v1 = server.create(service('web', { clusterIP: '10.0.0.1', status: { loadBalancer: { ingress: [{ ip: '1.2.3.4' }] } } }));
  const path = '/api/v1/namespaces/default/services/web';
  const ok = await http(server, 'PUT', path, { ...v1, spec: { ...(v1['spec'] as object), type: 'NodePort' }, status: {} });
  t.equal(ok.status, 200);
  t.equal(ok.body.spec.type, 'NodePort');
  t.equal(ok.body.metadata.generation, 2);
  t.same(ok.body.status, { loadBalancer: { ingress: [{ ip: '1.2.3.4' }] } }, 'PUT on the object keeps the stored status');
  const stale = await http(server, 'PUT', path, v1);
  t.equal(stale.status, 409);
  t.same(stale.body, {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message:
      'Operation cannot be fulfilled on services "web": the object has been modified; please apply your changes to the latest version and try again',
    reason: 'Conflict',
    details: { name: 'web', kind: 'services' },
    code: 409,
  });
  const { resourceVersion: _rv, ...noRv } = v1.metadata;
  const unconditional = await http(server, 'PUT', path, { ...v1, metadata: noRv });
  t.equal(unconditional.status, 200, 'no resourceVersion: unconditional update');
  t.equal(unconditional.body.spec.type, 'ClusterIP');
  const st = await http(server, 'PUT', path + '/status', {
    ...unconditional.body,
    spec: { type: 'LoadBalancer' },
    status: { loadBalancer: {} },
  });
  t.equal(st.status, 200);
  t.same(st.body.status, { loadBalancer: {} });
  t.equal(st.body.spec.type, 'ClusterIP', 'the status subresource writes only status');
  t.equal((await http(server, 'PUT', '/api/v1/namespaces/default/services/nope', service('nope'))).status, 404);
  t.equal((await http(server, 'PUT', path, service('other'))).status, 400, 'name mismatch');
  t.equal(
    (await http(server, 'PUT', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/x/status', {})).status,
    404,
    'no status subresource on slices',
  );
});

t.test('PATCH (merge patch) and DELETE', async (t) => {
  const server = await startServer(t);
  server.create(service('web', { clusterIP: '10.0.0.1', labels: { a: '1', b: '2' } }));
  const path = '/api/v1/namespaces/default/services/web';
  const p = await http(server, 'PATCH', path, { metadata: { labels: { a: null, c: '3' } } }, 'application/merge-patch+json');
  t.equal(p.status, 200);
  t.same(p.body.metadata.labels, { b: '2', c: '3' });
  t.equal((await http(server, 'PATCH', path, { metadata: {} }, 'application/strategic-merge-patch+json')).status, 415);
  const staleRv = await http(server, 'PATCH', path, { metadata: { resourceVersion: '1' } }, 'application/merge-patch+json');
  t.equal(staleRv.status, 409);

  const uid = server.get('Service', 'default', 'web')!.metadata.uid;
  t.equal((await http(server, 'DELETE', path, { preconditions: { uid: 'wrong' } })).status, 409);
  const d = await http(server, 'DELETE', path, { preconditions: { uid } });
  t.equal(d.status, 200);
  t.match(d.body, { kind: 'Service', metadata: { name: 'web' } }, 'a Service DELETE answers with the object');
  t.equal((await http(server, 'GET', path)).status, 404, 'gone at once (no finalizers)');
  t.equal((await http(server, 'DELETE', path)).status, 404);
  server.create(node('n1'));
  const dn = await http(server, 'DELETE', '/api/v1/nodes/n1');
  t.match(dn.body, { kind: 'Status', status: 'Success', details: { name: 'n1', kind: 'nodes' } }, 'other kinds answer with a Status');
  t.equal((await http(server, 'DELETE', '/api/v1/nodes')).status, 405);
});

t.test('pagination: limit + continue over one consistent snapshot', async (t) => {
  const server = await startServer(t, { initialResourceVersion: 0 });
  for (const n of ['a', 'b', 'c', 'd', 'e']) server.create(service(n));
  const p1 = await http(server, 'GET', '/api/v1/services?limit=2');
  t.same(
    p1.body.items.map((i: any) => i.metadata.name),
    ['a', 'b'],
  );
  t.equal(p1.body.metadata.resourceVersion, '5');
  t.equal(p1.body.metadata.remainingItemCount, 3);
  const token = JSON.parse(Buffer.from(p1.body.metadata.continue, 'base64url').toString());
  t.same(token, { v: 'meta.k8s.io/v1', rv: 5, start: 'default/b\u0000' }, 'the real token format');
  // Changes after the first page do not show in later pages.
  server.delete('Service', 'default', 'c');
  server.create(service('bb'));
  server.update(service('d', { labels: { changed: 'yes' } }));
  const p2 = await http(server, 'GET', `/api/v1/services?limit=2&continue=${p1.body.metadata.continue}`);
  t.same(
    p2.body.items.map((i: any) => i.metadata.name),
    ['c', 'd'],
  );
  t.equal(p2.body.items[1].metadata.labels, undefined, 'd as it was at RV 5');
  t.equal(p2.body.metadata.resourceVersion, '5');
  const p3 = await http(server, 'GET', `/api/v1/services?limit=2&continue=${p2.body.metadata.continue}`);
  t.same(
    p3.body.items.map((i: any) => i.metadata.name),
    ['e'],
  );
  t.equal(p3.body.metadata.continue, undefined, 'last page');
  t.equal(p3.body.metadata.remainingItemCount, undefined);

  const sel = await http(server, 'GET', '/api/v1/services?limit=1&labelSelector=changed%3Dyes');
  t.equal(sel.body.metadata.remainingItemCount, undefined, 'no count when a selector filters');
  const rv0 = await http(server, 'GET', '/api/v1/services?limit=2&resourceVersion=0');
  t.equal(rv0.body.items.length, 5, 'resourceVersion=0 is served from the watch cache, which ignores limit');

  // Compaction takes the snapshot away: 410 with an inconsistent continue token.
  const q1 = await http(server, 'GET', '/api/v1/services?limit=2');
  server.create(service('f'));
  server.compact();
  const gone = await http(server, 'GET', `/api/v1/services?limit=2&continue=${q1.body.metadata.continue}`);
  t.equal(gone.status, 410);
  t.match(gone.body, {
    kind: 'Status',
    reason: 'Expired',
    code: 410,
    message: /^The provided continue parameter is too old/,
    metadata: { continue: /./ },
  });
  const rest = await http(server, 'GET', `/api/v1/services?continue=${gone.body.metadata.continue}`);
  t.equal(rest.status, 200, 'the inconsistent token reads the latest state');
  t.same(
    rest.body.items.map((i: any) => i.metadata.name),
    ['bb', 'd', 'e', 'f'],
  );
  t.equal((await http(server, 'GET', '/api/v1/services?continue=garbage')).status, 400);
  t.equal((await http(server, 'GET', `/api/v1/services?continue=${q1.body.metadata.continue}&resourceVersion=3`)).status, 400);
});

t.test('pagination within a namespace and through a selector: every match once, in key order', async (t) => {
  const server = await startServer(t, { initialResourceVersion: 0 });
  // Namespaces whose keys sort next to "a/": "a-b/" before it, "a0/" and "ab/" after it.
  for (const ns of ['a', 'a-b', 'a0', 'ab'])
    for (const n of ['s1', 's2', 's3']) server.create(service(n, { namespace: ns, labels: { pick: n === 's2' ? 'yes' : 'no' } }));
  const names = async (path: string, limit: number) => {
    const seen: string[] = [];
    const counts: Array<number | undefined> = [];
    let cont: string | undefined;
    do {
      const r = await http(server, 'GET', `${path}${path.includes('?') ? '&' : '?'}limit=${limit}${cont ? `&continue=${cont}` : ''}`);
      t.equal(r.status, 200);
      seen.push(...r.body.items.map((i: any) => `${i.metadata.namespace}/${i.metadata.name}`));
      counts.push(r.body.metadata.remainingItemCount);
      cont = r.body.metadata.continue;
    } while (cont);
    return { seen, counts };
  };
  t.same(
    await names('/api/v1/namespaces/a/services', 2),
    { seen: ['a/s1', 'a/s2', 'a/s3'], counts: [1, undefined] },
    "one namespace's range only, counted",
  );
  t.same((await names('/api/v1/namespaces/a0/services', 1)).seen, ['a0/s1', 'a0/s2', 'a0/s3']);
  t.same(
    (await names('/api/v1/services?labelSelector=pick%3Dyes', 1)).seen,
    ['a/s2', 'a-b/s2', 'a0/s2', 'ab/s2'].sort(),
    'a selector across pages: every match once',
  );
  const all = await names('/api/v1/services', 5);
  t.equal(all.seen.length, 12);
  t.same(all.counts, [7, 2, undefined], 'remaining counts of the whole list');
});

t.test('list resourceVersion semantics', async (t) => {
  const server = await startServer(t, { initialResourceVersion: 0, tooLargeWaitMs: 20 });
  server.create(service('a'));
  server.create(service('b'));
  server.delete('Service', 'default', 'a');
  const exact = await http(server, 'GET', '/api/v1/services?resourceVersion=1&resourceVersionMatch=Exact');
  t.same(
    exact.body.items.map((i: any) => i.metadata.name),
    ['a'],
  );
  t.equal(exact.body.metadata.resourceVersion, '1');
  const notOlder = await http(server, 'GET', '/api/v1/services?resourceVersion=1');
  t.same(
    notOlder.body.items.map((i: any) => i.metadata.name),
    ['b'],
    'NotOlderThan (default) serves the latest',
  );
  t.equal(notOlder.body.metadata.resourceVersion, '3');
  const future = await http(server, 'GET', '/api/v1/services?resourceVersion=10');
  t.equal(future.status, 504);
  t.match(future.body, {
    reason: 'Timeout',
    message: 'Timeout: Too large resource version: 10, current: 3',
    details: { causes: [{ reason: 'ResourceVersionTooLarge' }], retryAfterSeconds: 1 },
  });
  const invalid = await http(server, 'GET', '/api/v1/services?resourceVersionMatch=Exact');
  t.equal(invalid.status, 422);
  t.match(invalid.body, { reason: 'Invalid', details: { causes: [{ field: 'resourceVersionMatch' }] } });
  t.equal((await http(server, 'GET', '/api/v1/services?resourceVersion=0&resourceVersionMatch=Exact')).status, 422);
  t.equal((await http(server, 'GET', '/api/v1/services?resourceVersion=1&resourceVersionMatch=Bogus')).status, 422);
  t.equal((await http(server, 'GET', '/api/v1/services?resourceVersion=abc')).status, 400);
  server.compact();
  const old = await http(server, 'GET', '/api/v1/services?resourceVersion=1&resourceVersionMatch=Exact');
  t.equal(old.status, 410);
  t.equal(old.body.reason, 'Expired');
});

t.test('a list for a future RV is served once the store gets there', async (t) => {
  const server = await startServer(t, { initialResourceVersion: 0, tooLargeWaitMs: 60_000 });
  const pending = http(server, 'GET', '/api/v1/services?resourceVersion=1');
  await server.waitForRequest({ method: 'GET', kind: 'Service' });
  server.create(service('a'));
  const r = await pending;
  t.equal(r.status, 200);
  t.same(
    r.body.items.map((i: any) => i.metadata.name),
    ['a'],
  );
});

t.test('selectors on lists', async (t) => {
  const server = await startServer(t);
  server.create(service('web', { namespace: 'a', labels: { app: 'web', tier: 'front' }, type: 'NodePort' }));
  server.create(service('db', { namespace: 'a', labels: { app: 'db' } }));
  server.create(service('web', { namespace: 'b', labels: { app: 'web', 'service.kubernetes.io/service-proxy-name': 'other' } }));
  const names = async (q: string) =>
    (await http(server, 'GET', `/api/v1/services?${q}`)).body.items.map((i: any) => `${i.metadata.namespace}/${i.metadata.name}`);
  t.same(await names('labelSelector=app%3Dweb'), ['a/web', 'b/web']);
  t.same(await names('labelSelector=app!%3Dweb'), ['a/db']);
  t.same(await names('labelSelector=tier'), ['a/web']);
  t.same(await names('labelSelector=!service.kubernetes.io/service-proxy-name'), ['a/db', 'a/web']);
  t.same(await names('labelSelector=app%3Dweb,!service.kubernetes.io/service-proxy-name'), ['a/web']);
  t.same(await names('fieldSelector=metadata.name%3Dweb'), ['a/web', 'b/web']);
  t.same(await names('fieldSelector=metadata.namespace%3Db'), ['b/web']);
  t.same(await names('fieldSelector=metadata.name%3Dweb,metadata.namespace!%3Db'), ['a/web']);
  t.same(await names('fieldSelector=spec.type%3DNodePort'), ['a/web']);
  const bad = await http(server, 'GET', '/api/v1/services?labelSelector=a%20b');
  t.equal(bad.status, 400);
  t.match(bad.body, { reason: 'BadRequest', message: /unable to parse requirement/ });
  const field = await http(server, 'GET', '/api/v1/services?fieldSelector=spec.foo%3Dx');
  t.equal(field.status, 400);
  t.equal(field.body.message, 'field label not supported: spec.foo');
});

t.test('bearer token check when the server is started with one', async (t) => {
  const server = await startServer(t, { token: 'sekret' });
  t.equal((await http(server, 'GET', '/api/v1/services')).status, 401);
  const ok = await fetch(server.url + '/api/v1/services', { headers: { Authorization: 'Bearer sekret' } });
  t.equal(ok.status, 200);
  await ok.arrayBuffer();
  t.equal(server.requests().at(-1)!.authorization, 'Bearer sekret', 'the request log keeps the header');
});

// ---- watch ----

t.test('no RV: synthetic ADDED for what exists, then changes; objects carry kind', async (t) => {
  const server = await startServer(t, { initialResourceVersion: 0 });
  server.create(service('a'));
  const w = await rawWatch(server, '/api/v1/services?watch=true');
  t.teardown(w.close);
  t.equal(w.status, 200);
  await w.until(1);
  server.create(service('b'));
  server.update(service('b', { labels: { v: '2' } }));
  server.delete('Service', 'default', 'a');
  await w.until(4);
  t.same(
    w.events.map((e) => `${e.type} ${e.object.metadata.name}@${e.object.metadata.resourceVersion}`),
    ['ADDED a@1', 'ADDED b@2', 'MODIFIED b@3', 'DELETED a@4'],
  );
  for (const e of w.events) t.match(e.object, { kind: 'Service', apiVersion: 'v1' });
  t.equal(server.openWatches, 1);
  t.same(
    server.watches('Service').map((r) => r.query),
    [{ watch: 'true' }],
    'request log',
  );
});

t.test('watch=1 and resourceVersion=N replay the history after N', async (t) => {
  const server = await startServer(t, { initialResourceVersion: 0 });
  server.create(service('a')); // 1
  server.create(service('b')); // 2
  server.delete('Service', 'default', 'a'); // 3
  const w = await rawWatch(server, '/api/v1/services?watch=1&resourceVersion=1');
  t.teardown(w.close);
  await w.until(2);
  t.same(
    w.events.map((e) => `${e.type} ${e.object.metadata.name}@${e.object.metadata.resourceVersion}`),
    ['ADDED b@2', 'DELETED a@3'],
  );
  const ns = await rawWatch(server, '/api/v1/namespaces/other/services?watch=true&resourceVersion=0');
  t.teardown(ns.close);
  server.create(service('c', { namespace: 'other' }));
  server.create(service('d'));
  await ns.until(1);
  await w.until(4);
  t.same(
    ns.events.map((e) => e.object.metadata.name),
    ['c'],
    'namespaced watch sees its namespace only',
  );
});

t.test('a too-old RV: HTTP 200, one ERROR event with a 410 Expired Status, end of stream', async (t) => {
  const server = await startServer(t, { initialResourceVersion: 0 });
  server.create(service('a'));
  server.create(service('b'));
  server.compact();
  const w = await rawWatch(server, '/api/v1/services?watch=true&resourceVersion=1');
  t.equal(w.status, 200, 'the real watch cache answers 200 and reports the error in the stream');
  await w.ended;
  t.same(w.events, [
    {
      type: 'ERROR',
      object: {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'too old resource version: 1 (2)',
        reason: 'Expired',
        code: 410,
      },
    },
  ]);
  t.equal(server.watches().at(-1)!.status, 200);
  const fine = await rawWatch(server, '/api/v1/services?watch=true&resourceVersion=2');
  t.teardown(fine.close);
  server.create(service('c'));
  await fine.until(1);
  t.equal(fine.events[0]!.type, 'ADDED', 'resuming from the compaction point itself works');
});

t.test('bookmarks: only with allowWatchBookmarks; kind, apiVersion and the current RV only', async (t) => {
  const server = await startServer(t, { initialResourceVersion: 0, bookmarkIntervalMs: 0 });
  server.create(service('a'));
  const plain = await rawWatch(server, '/api/v1/services?watch=true&resourceVersion=1');
  const bm = await rawWatch(server, '/apis/discovery.k8s.io/v1/endpointslices?watch=true&resourceVersion=1&allowWatchBookmarks=true');
  t.teardown(plain.close);
  t.teardown(bm.close);
  server.create(service('b'));
  await plain.until(1);
  t.equal(server.sendBookmarks(), 1);
  await bm.until(1);
  t.same(bm.events[0], {
    type: 'BOOKMARK',
    object: { kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', metadata: { resourceVersion: '2' } },
  });
  server.create(service('c'));
  await plain.until(2);
  t.same(
    plain.events.map((e) => e.type),
    ['ADDED', 'ADDED'],
    'no bookmarks unless asked for',
  );
});

t.test('bookmarks on an interval', async (t) => {
  const server = await startServer(t, { bookmarkIntervalMs: 20 });
  const w = await rawWatch(server, '/api/v1/services?watch=true&allowWatchBookmarks=true');
  t.teardown(w.close);
  await w.until(2);
  t.same(
    w.events.slice(0, 2).map((e) => e.type),
    ['BOOKMARK', 'BOOKMARK'],
  );
});

t.test('label selector edges: leaving the selection is DELETED, entering it is ADDED', async (t) => {
  const server = await startServer(t, { initialResourceVersion: 0 });
  server.create(service('a', { labels: { app: 'web' } })); // 1
  const w = await rawWatch(server, '/api/v1/services?watch=true&resourceVersion=1&labelSelector=app%3Dweb');
  const f = await rawWatch(server, '/api/v1/services?watch=true&resourceVersion=1&fieldSelector=metadata.name%3Db');
  t.teardown(w.close);
  t.teardown(f.close);
  server.update(service('a', { labels: { app: 'db' } })); // 2
  server.update(service('a', { labels: { app: 'web' } })); // 3
  server.update(service('a', { labels: { app: 'web' }, clusterIP: '10.0.0.9' })); // 4
  server.create(service('b')); // 5
  server.delete('Service', 'default', 'a'); // 6
  await w.until(4);
  await f.until(1);
  t.same(
    w.events.map((e) => `${e.type}@${e.object.metadata.resourceVersion}`),
    ['DELETED@2', 'ADDED@3', 'MODIFIED@4', 'DELETED@6'],
  );
  t.same(w.events[0]!.object.metadata.labels, { app: 'web' }, 'DELETED carries the last matching content, at the new RV');
  t.same(
    f.events.map((e) => `${e.type} ${e.object.metadata.name}`),
    ['ADDED b'],
  );
});

t.test('sendInitialEvents (watch-list): ADDED, then a BOOKMARK marking the end', async (t) => {
  const server = await startServer(t, { initialResourceVersion: 0 });
  server.create(service('a'));
  server.create(service('b'));
  const w = await rawWatch(
    server,
    '/api/v1/services?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan',
  );
  t.teardown(w.close);
  await w.until(3);
  t.same(
    w.events.map((e) => e.type),
    ['ADDED', 'ADDED', 'BOOKMARK'],
  );
  t.same(w.events[2]!.object.metadata, { resourceVersion: '2', annotations: { 'k8s.io/initial-events-end': 'true' } });
  const bad = await http(server, 'GET', '/api/v1/services?watch=true&sendInitialEvents=true');
  t.equal(bad.status, 422);
  t.equal((await http(server, 'GET', '/api/v1/services?watch=true&resourceVersion=1&resourceVersionMatch=NotOlderThan')).status, 422);
  t.equal((await http(server, 'GET', '/api/v1/services?watch=maybe')).status, 400);
  t.equal((await http(server, 'GET', '/api/v1/services?watch=true&resourceVersion=x')).status, 400);
});

t.test('timeoutSeconds and the server default end the stream cleanly', async (t) => {
  const server = await startServer(t, { watchTimeoutSeconds: 1 });
  const explicit = await rawWatch(server, '/api/v1/services?watch=true&timeoutSeconds=1');
  const implicit = await rawWatch(server, '/api/v1/nodes?watch=true');
  await explicit.ended;
  await implicit.ended;
  t.pass('both ended without error');
  await waitFor(() => server.openWatches === 0, 'watches to be forgotten');
});

t.test('cutWatches: end is a clean end of stream, destroy and reset break it', async (t) => {
  const server = await startServer(t);
  for (const [mode, clean] of [
    ['end', true],
    ['destroy', false],
    ['reset', false],
  ] as const) {
    const w = await rawWatch(server, '/api/v1/services?watch=true');
    await waitFor(() => server.openWatches === 1, 'the watch to open');
    t.equal(server.cutWatches(mode), 1);
    if (clean) await t.resolves(w.ended, mode);
    else await t.rejects(w.ended, mode);
    await waitFor(() => server.openWatches === 0, 'the cut watch to be forgotten');
  }
});

t.test('requests while stopped are refused; writes still go to the store', async (t) => {
  const server = await startServer(t);
  const port = server.port;
  await server.stop();
  t.notOk(server.listening);
  await t.rejects(fetch(server.url + '/api/v1/services'), { cause: { code: 'ECONNREFUSED' } });
  server.create(service('while-down'));
  await server.restart();
  t.equal(server.port, port, 'same port after restart');
  const r = await http(server, 'GET', '/api/v1/services');
  t.same(
    r.body.items.map((i: any) => i.metadata.name),
    ['while-down'],
  );
  const outage = server.unavailable(60_000, { mode: '503' });
  const u = await http(server, 'GET', '/api/v1/services');
  t.equal(u.status, 503);
  t.equal(u.body.reason, 'ServiceUnavailable');
  await server.restart(); // cancels the outage
  await outage;
  t.equal((await http(server, 'GET', '/api/v1/services')).status, 200);
  const refused = server.unavailable(60_000);
  await waitFor(() => !server.listening, 'the port to close');
  await t.rejects(fetch(server.url + '/version'), { cause: { code: 'ECONNREFUSED' } });
  await server.restart(); // ends a connection-refused outage early too
  await refused;
  t.ok(server.listening);
  t.equal((await http(server, 'GET', '/version')).status, 200);
});
