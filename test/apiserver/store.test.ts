// The store on its own (resourceVersion counter, identity fields, no-op updates,
// history, snapshots at an older RV, compaction, the history limit) and the selector
// grammar (labels.Parse / fields.ParseSelector).

import t from 'tap';
import { Store } from '../../lab/apiserver/store.ts';
import { resourceFor } from '../../lab/apiserver/resources.ts';
import { ApiError } from '../../lab/apiserver/status.ts';
import { endpointSlice, node, service } from '../../lab/apiserver/objects.ts';
import { parseFieldSelector, parseLabelSelector } from '../../lab/apiserver/selectors.ts';

const SVC = resourceFor('Service');
const SLICE = resourceFor('EndpointSlice');
const NODE = resourceFor('Node');

t.test('one global counter; identity filled in on create and kept on update', async (t) => {
  const s = new Store({ initialResourceVersion: 50 });
  const a = s.create(SVC, service('a', { clusterIP: '10.0.0.1' }));
  const sl = s.create(SLICE, endpointSlice('a-1', { service: 'a', endpoints: [{ addresses: ['10.1.0.1'] }] }));
  const n = s.create(NODE, { ...node('n1'), metadata: { name: 'n1', namespace: 'ignored' } });
  t.same([a.metadata.resourceVersion, sl.metadata.resourceVersion, n.metadata.resourceVersion], ['51', '52', '53']);
  t.equal(n.metadata.namespace, undefined, 'cluster-scoped objects drop a namespace');
  t.match(a.metadata, {
    namespace: 'default',
    generation: 1,
    uid: /^[0-9a-f-]{36}$/,
    creationTimestamp: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/,
  });
  const a2 = s.update(SVC, { ...service('a', { clusterIP: '10.0.0.1' }), metadata: { name: 'a', labels: { x: 'y' } } });
  t.equal(a2.metadata.resourceVersion, '54');
  t.equal(a2.metadata.uid, a.metadata.uid);
  t.equal(a2.metadata.generation, 1, 'metadata-only change keeps generation');
  const a3 = s.update(SVC, service('a', { clusterIP: '10.0.0.1', ports: [{ port: 80 }] }));
  t.equal(a3.metadata.generation, 2, 'spec change bumps generation');
  t.equal(s.resourceVersion, 55);
});

t.test('an update that changes nothing writes nothing', async (t) => {
  const s = new Store();
  const seen: string[] = [];
  s.subscribe((c) => seen.push(c.type));
  s.create(SVC, service('a', { clusterIP: '10.0.0.1', ports: [{ port: 80 }] }));
  const rv = s.resourceVersion;
  // Same content, different key order.
  const same = s.update(SVC, {
    spec: { ports: [{ targetPort: 80, protocol: 'TCP', port: 80 }], clusterIPs: ['10.0.0.1'], clusterIP: '10.0.0.1', type: 'ClusterIP' },
    metadata: { namespace: 'default', name: 'a' },
    kind: 'Service',
    apiVersion: 'v1',
  });
  t.equal(s.resourceVersion, rv);
  t.equal(same.metadata.resourceVersion, String(rv));
  t.same(seen, ['ADDED']);
});

t.test('conflicts, not found, already exists', async (t) => {
  const s = new Store();
  const a = s.create(SVC, service('a'));
  s.update(SVC, service('a', { labels: { v: '2' } }));
  t.throws(() => s.update(SVC, { ...service('a'), metadata: { name: 'a', resourceVersion: a.metadata.resourceVersion } }), {
    code: 409,
    reason: 'Conflict',
  });
  t.throws(() => s.create(SVC, service('a')), { code: 409, reason: 'AlreadyExists', message: 'services "a" already exists' });
  t.throws(() => s.update(SLICE, endpointSlice('nope', { service: 'x', endpoints: [] })), {
    code: 404,
    message: 'endpointslices.discovery.k8s.io "nope" not found',
  });
  t.throws(() => s.delete(SVC, 'default', 'a', { uid: 'other' }), { code: 409 });
  t.throws(() => s.create(SVC, { kind: 'Node', metadata: { name: 'x' } }), { code: 400 });
  t.throws(() => s.create(SVC, { kind: 'Service', metadata: {} }), { code: 422, reason: 'Invalid' });
  const g = s.create(SVC, { kind: 'Service', metadata: { generateName: 'web-' } });
  t.match(g.metadata.name, /^web-[a-z0-9]{5}$/);
});

t.test('history: changes after an RV, snapshots at an RV, compaction, limit', async (t) => {
  const s = new Store({ initialResourceVersion: 0, historyLimit: 4 });
  s.create(SVC, service('a')); // 1
  s.create(SVC, service('b')); // 2
  s.update(SVC, service('a', { labels: { v: '2' } })); // 3
  s.delete(SVC, 'default', 'b'); // 4
  t.same(
    s.changesAfter(SVC, 1).map((c) => `${c.type}@${c.rv}`),
    ['ADDED@2', 'MODIFIED@3', 'DELETED@4'],
  );
  const del = s.changesAfter(SVC, 3)[0]!;
  t.equal(del.object.metadata.resourceVersion, '4', 'DELETED carries the deletion RV');
  t.equal(del.prev!.metadata.resourceVersion, '2');
  t.same(
    s.listAt(SVC, 2).map(([k, o]) => `${k}@${o.metadata.resourceVersion}`),
    ['default/a@1', 'default/b@2'],
  );
  t.same(
    s.listAt(SVC, 4).map(([k, o]) => `${k}@${o.metadata.resourceVersion}`),
    ['default/a@3'],
  );
  s.create(SVC, service('c')); // 5: the limit drops change 1
  t.equal(s.oldestResourceVersion, 1);
  t.throws(() => s.changesAfter(SVC, 0), { code: 410, reason: 'Expired', message: 'too old resource version: 0 (1)' });
  t.same(s.changesAfter(SVC, 1).length, 4);
  s.compact();
  t.equal(s.oldestResourceVersion, 5);
  t.same(s.changesAfter(SVC, 5), [], 'resuming from the compaction point is fine');
  t.throws(() => s.changesAfter(SVC, 4), ApiError);
  t.throws(() => s.listAt(SVC, 4), { code: 410 });
  s.jump(100);
  t.equal(s.resourceVersion, 105);
});

t.test('replaceAll keeps identity, renumbers, drops history', async (t) => {
  const s = new Store({ initialResourceVersion: 0 });
  const a = s.create(SVC, service('a'));
  s.replaceAll([a, service('z')]);
  t.same(
    s.list(SVC).map((o) => o.metadata.name),
    ['a', 'z'],
  );
  t.equal(s.get(SVC, 'default', 'a')!.metadata.uid, a.metadata.uid);
  t.equal(s.get(SVC, 'default', 'a')!.metadata.resourceVersion, '2');
  t.equal(s.oldestResourceVersion, 3);
});

t.test('waitForResourceVersion', async (t) => {
  const s = new Store({ initialResourceVersion: 0 });
  t.equal(await s.waitForResourceVersion(0, 0), true);
  t.equal(await s.waitForResourceVersion(1, 0), false);
  const p = s.waitForResourceVersion(2, 60_000);
  s.create(SVC, service('a'));
  s.create(SVC, service('b'));
  t.equal(await p, true);
});

// ---- selectors ----

const obj = (labels: Record<string, string>, name = 'web', namespace = 'default') => ({ metadata: { name, namespace, labels } });

t.test('label selectors: equality, existence, sets, numbers, AND', async (t) => {
  const cases: Array<[string, Record<string, string>, boolean]> = [
    ['', {}, true],
    ['app=web', { app: 'web' }, true],
    ['app==web', { app: 'web' }, true],
    ['app=web', { app: 'db' }, false],
    ['app=web', {}, false],
    ['app!=web', { app: 'db' }, true],
    ['app!=web', {}, true],
    ['app!=web', { app: 'web' }, false],
    ['app', { app: '' }, true],
    ['app', {}, false],
    ['!app', {}, true],
    ['!app', { app: 'x' }, false],
    ['app in (web, db)', { app: 'db' }, true],
    ['app in (web,db)', { app: 'cache' }, false],
    ['app notin (web)', {}, true],
    ['app notin (web)', { app: 'web' }, false],
    ['tier>2', { tier: '3' }, true],
    ['tier<2', { tier: '3' }, false],
    ['app=web,tier=front', { app: 'web', tier: 'front' }, true],
    ['app=web,tier=front', { app: 'web' }, false],
    ['app=web, !service.kubernetes.io/service-proxy-name', { app: 'web' }, true],
    ['app=web,!service.kubernetes.io/service-proxy-name', { app: 'web', 'service.kubernetes.io/service-proxy-name': 'x' }, false],
    ['app=', { app: '' }, true],
  ];
  for (const [sel, labels, want] of cases)
    t.equal(parseLabelSelector(sel).matches(obj(labels)), want, `${JSON.stringify(sel)} on ${JSON.stringify(labels)}`);
  t.ok(parseLabelSelector(undefined).empty);
  t.notOk(parseLabelSelector('a').empty);
});

t.test('malformed label selectors are 400 BadRequest', async (t) => {
  for (const bad of ['a b', 'a=b,', '=b', 'a in ()', 'a=b c', '-a=b', 'a in (x', 'a!==b', 'a=b=c']) {
    t.throws(() => parseLabelSelector(bad), { code: 400, reason: 'BadRequest' }, JSON.stringify(bad));
  }
  t.ok(parseLabelSelector('a==').matches(obj({ a: '' })), '"a==" is a == "" (valid)');
});

t.test('field selectors: metadata.name/namespace, per-resource fields, unsupported fields', async (t) => {
  const services = resourceFor('Service');
  const nodes = resourceFor('Node');
  const svc = { metadata: { name: 'web', namespace: 'prod' }, spec: { type: 'NodePort', clusterIP: '10.0.0.1' } };
  t.ok(parseFieldSelector('metadata.name=web', services).matches(svc));
  t.ok(parseFieldSelector('metadata.name==web,metadata.namespace=prod', services).matches(svc));
  t.notOk(parseFieldSelector('metadata.namespace!=prod', services).matches(svc));
  t.ok(parseFieldSelector('spec.type=NodePort', services).matches(svc));
  t.ok(parseFieldSelector('spec.clusterIP=10.0.0.1', services).matches(svc));
  t.equal(parseFieldSelector('metadata.name=web,metadata.namespace=prod', services).exact('metadata.namespace'), 'prod');
  t.ok(parseFieldSelector('spec.unschedulable=false', nodes).matches({ metadata: { name: 'n1' }, spec: {} }));
  t.ok(parseFieldSelector('metadata.name=a\\,b', services).matches({ metadata: { name: 'a,b', namespace: 'x' } }), 'escaped comma');
  t.throws(() => parseFieldSelector('spec.type=NodePort', nodes), { code: 400, message: 'field label not supported: spec.type' });
  t.throws(() => parseFieldSelector('metadata.name', services), { code: 400 });
});
