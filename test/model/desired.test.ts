import t from 'tap';
import { buildDesiredState } from './desired.ts';
import { nodeInfoFromNode } from '../../src/model/node.ts';
import { type EndpointSlice, type Node, type Service } from '../../src/model/schemas.ts';
import { validateObject } from '../../src/model/validate.ts';
import type { DesiredState, Frontend, NodeInfo } from '../../src/model/types.ts';

// Objects go through validateObject, as they do in the sources, so the tests
// see the same normalised shapes the model sees in production.

function svc(
  name: string,
  spec: Record<string, unknown>,
  extra: { namespace?: string; labels?: Record<string, string>; status?: unknown } = {},
): Service {
  const r = validateObject({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: extra.namespace ?? 'default', labels: extra.labels ?? {} },
    spec,
    status: extra.status,
  });
  if (!r.ok || r.obj.kind !== 'Service') throw new Error(JSON.stringify(r));
  return r.obj;
}

interface Ep {
  ip: string;
  ready?: boolean | null;
  serving?: boolean | null;
  terminating?: boolean | null;
  node?: string;
  zone?: string;
}

function slice(
  name: string,
  service: string,
  ports: Array<{ name?: string; port: number; protocol?: string }>,
  endpoints: Ep[],
  extra: { namespace?: string; addressType?: string; labels?: Record<string, string> } = {},
): EndpointSlice {
  const r = validateObject({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name,
      namespace: extra.namespace ?? 'default',
      labels: extra.labels ?? { 'kubernetes.io/service-name': service },
    },
    addressType: extra.addressType ?? 'IPv4',
    ports,
    endpoints: endpoints.map((e) => ({
      addresses: [e.ip],
      conditions: { ready: e.ready ?? true, serving: e.serving, terminating: e.terminating },
      nodeName: e.node,
      zone: e.zone,
    })),
  });
  if (!r.ok || r.obj.kind !== 'EndpointSlice') throw new Error(JSON.stringify(r));
  return r.obj;
}

/** `ip:port` of each backend, with (T) for terminating and (L) for local ones. */
function backends(state: DesiredState, key: string): string[] {
  const f = state.frontends.get(key);
  if (f === undefined) throw new Error(`no frontend ${key}; have ${[...state.frontends.keys()].join(', ')}`);
  return f.backends.map((b) => `${b.ip}:${b.port}${b.state === 'terminating' ? '(T)' : ''}${b.local ? '(L)' : ''}`);
}

function frontend(state: DesiredState, key: string): Frontend {
  const f = state.frontends.get(key);
  if (f === undefined) throw new Error(`no frontend ${key}`);
  return f;
}

const node: NodeInfo = { name: 'node-a', addresses: ['192.168.1.10', '192.168.2.10'] };

t.test('several slices of one Service are merged', async (t) => {
  const { state, problems } = buildDesiredState({
    services: [svc('web', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80, targetPort: 8080 }] })],
    slices: [
      slice('web-1', 'web', [{ name: 'http', port: 8080 }], [{ ip: '10.244.1.10' }, { ip: '10.244.1.2' }]),
      slice('web-2', 'web', [{ name: 'http', port: 8080 }], [{ ip: '10.244.2.5' }]),
    ],
  });
  t.same(problems, []);
  t.same([...state.frontends.keys()], ['10.96.0.10:80/TCP']);
  t.same(backends(state, '10.96.0.10:80/TCP'), ['10.244.1.2:8080', '10.244.1.10:8080', '10.244.2.5:8080'], 'sorted numerically');
  t.same(frontend(state, '10.96.0.10:80/TCP').service, { namespace: 'default', name: 'web', portName: 'http' });
});

t.test('ports are matched by name and protocol', async (t) => {
  const { state, problems } = buildDesiredState({
    services: [
      svc('multi', {
        clusterIP: '10.96.0.20',
        ports: [
          { name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 },
          { name: 'dns', port: 53, protocol: 'UDP', targetPort: 5353 },
        ],
      }),
    ],
    slices: [
      slice('multi-a', 'multi', [{ name: 'http', port: 8080, protocol: 'TCP' }], [{ ip: '10.244.1.1' }, { ip: '10.244.1.2' }]),
      slice('multi-b', 'multi', [{ name: 'dns', port: 5353, protocol: 'UDP' }], [{ ip: '10.244.2.1' }]),
      // Same names, other protocols: must not leak into the ports above.
      slice(
        'multi-c',
        'multi',
        [
          { name: 'http', port: 9999, protocol: 'UDP' },
          { name: 'dns', port: 9998, protocol: 'TCP' },
        ],
        [{ ip: '10.244.3.1' }],
      ),
    ],
  });
  t.same(problems, []);
  t.same([...state.frontends.keys()], ['10.96.0.20:53/UDP', '10.96.0.20:80/TCP']);
  t.same(backends(state, '10.96.0.20:80/TCP'), ['10.244.1.1:8080', '10.244.1.2:8080']);
  t.same(backends(state, '10.96.0.20:53/UDP'), ['10.244.2.1:5353']);
  t.equal(frontend(state, '10.96.0.20:53/UDP').protocol, 'UDP');
  t.equal(frontend(state, '10.96.0.20:53/UDP').backends[0]?.protocol, 'UDP');
});

t.test('only the first address of an endpoint is used, as kube-proxy does', async (t) => {
  const base = slice('one-a', 'one', [{ port: 8080 }], [{ ip: '10.244.1.1' }]);
  const twoAddresses = { ...base, endpoints: base.endpoints.map((e) => ({ ...e, addresses: ['10.244.1.1', '10.244.9.9'] })) };
  const { state } = buildDesiredState({
    services: [svc('one', { clusterIP: '10.96.0.22', ports: [{ port: 80 }] })],
    slices: [twoAddresses],
  });
  t.same(backends(state, '10.96.0.22:80/TCP'), ['10.244.1.1:8080']);
});

t.test('an unnamed single port matches the unnamed slice port', async (t) => {
  const { state } = buildDesiredState({
    services: [svc('one', { clusterIP: '10.96.0.21', ports: [{ port: 80 }] })],
    slices: [slice('one-a', 'one', [{ port: 8080 }], [{ ip: '10.244.1.1' }])],
  });
  t.same(backends(state, '10.96.0.21:80/TCP'), ['10.244.1.1:8080']);
  t.equal(frontend(state, '10.96.0.21:80/TCP').service.portName, '');
});

t.test("a named targetPort is resolved by each slice's port", async (t) => {
  // During a rollout that changes the container port, old and new pods sit in
  // different slices with different numbers for the same port name.
  const { state } = buildDesiredState({
    services: [svc('web', { clusterIP: '10.96.0.30', ports: [{ name: 'http', port: 80, targetPort: 'http' }] })],
    slices: [
      slice('web-old', 'web', [{ name: 'http', port: 8080 }], [{ ip: '10.244.1.1' }]),
      slice('web-new', 'web', [{ name: 'http', port: 9090 }], [{ ip: '10.244.1.2' }]),
    ],
  });
  t.same(backends(state, '10.96.0.30:80/TCP'), ['10.244.1.1:8080', '10.244.1.2:9090']);
});

t.test('endpoint conditions', async (t) => {
  const service = svc('web', { clusterIP: '10.96.0.40', ports: [{ port: 80 }] });
  const build = (eps: Ep[]) => buildDesiredState({ services: [service], slices: [slice('web-1', 'web', [{ port: 8080 }], eps)] }).state;

  t.test('only ready endpoints while any is ready', async (t) => {
    const state = build([
      { ip: '10.0.0.1', ready: true },
      { ip: '10.0.0.2', ready: false, serving: true, terminating: true },
      { ip: '10.0.0.3', ready: false, serving: false, terminating: false },
      { ip: '10.0.0.4', ready: null }, // nil ready means ready
    ]);
    t.same(backends(state, '10.96.0.40:80/TCP'), ['10.0.0.1:8080', '10.0.0.4:8080']);
    t.ok(frontend(state, '10.96.0.40:80/TCP').backends.every((b) => b.state === 'active'));
  });

  t.test('serving+terminating endpoints when none is ready', async (t) => {
    const state = build([
      { ip: '10.0.0.2', ready: false, serving: true, terminating: true },
      { ip: '10.0.0.3', ready: false, serving: false, terminating: true },
      { ip: '10.0.0.5', ready: false, serving: true, terminating: false },
    ]);
    t.same(backends(state, '10.96.0.40:80/TCP'), ['10.0.0.2:8080(T)']);
  });

  t.test('never endpoints that are not serving', async (t) => {
    const state = build([
      { ip: '10.0.0.3', ready: false, serving: false, terminating: true },
      { ip: '10.0.0.6', ready: false },
    ]);
    t.same(backends(state, '10.96.0.40:80/TCP'), [], 'the frontend stays, with no backends: connections are rejected');
  });
});

t.test('endpoints are deduplicated across slices, preferring the ready copy', async (t) => {
  const service = svc('web', { clusterIP: '10.96.0.50', ports: [{ port: 80 }] });
  const notReady = (name: string) => slice(name, 'web', [{ port: 8080 }], [{ ip: '10.0.0.1', ready: false, node: 'node-x' }]);
  const ready = (name: string) =>
    slice(name, 'web', [{ port: 8080 }], [{ ip: '10.0.0.1', ready: true, node: 'node-a' }, { ip: '10.0.0.2' }]);
  // Whichever slice sorts first, and in whatever order they arrive.
  for (const slices of [
    [notReady('web-a'), ready('web-b')],
    [ready('web-b'), notReady('web-a')],
    [notReady('web-b'), ready('web-a')],
    [ready('web-a'), notReady('web-b')],
  ]) {
    const { state } = buildDesiredState({ services: [service], slices, node });
    t.same(backends(state, '10.96.0.50:80/TCP'), ['10.0.0.1:8080(L)', '10.0.0.2:8080']);
    t.equal(frontend(state, '10.96.0.50:80/TCP').backends[0]?.nodeName, 'node-a');
  }
});

t.test('headless, ExternalName and other proxies’ Services are skipped silently (kube-proxy’s labels, whatever their value)', async (t) => {
  const { state, problems } = buildDesiredState({
    services: [
      svc('headless', { clusterIP: 'None', ports: [{ port: 80 }] }),
      svc('headless2', { clusterIP: 'None', clusterIPs: ['None'], ports: [{ port: 80 }] }),
      svc('ext', { type: 'ExternalName', externalName: 'db.example.com', ports: [{ port: 5432 }] }),
      svc(
        'other',
        { clusterIP: '10.96.0.60', ports: [{ port: 80 }] },
        { labels: { 'service.kubernetes.io/service-proxy-name': 'cilium' } },
      ),
      svc('ours', { clusterIP: '10.96.0.61', ports: [{ port: 80 }] }),
      // A cluster IP, but the headless label: kube-proxy's informer never sees it (its slice has no label).
      svc('labelled', { clusterIP: '10.96.0.62', ports: [{ port: 80 }] }, { labels: { 'service.kubernetes.io/headless': '' } }),
      svc('labelled2', { clusterIP: '10.96.0.63', ports: [{ port: 80 }] }, { labels: { 'service.kubernetes.io/headless': 'anything' } }),
    ],
    slices: [
      slice('headless-1', 'headless', [{ port: 80 }], [{ ip: '10.0.0.1' }]),
      slice('headless2-1', 'headless2', [{ port: 80 }], [{ ip: '10.0.0.1' }], {
        labels: { 'kubernetes.io/service-name': 'headless2', 'service.kubernetes.io/headless': '' },
      }),
      slice('other-1', 'other', [{ port: 80 }], [{ ip: '10.0.0.2' }]),
      slice('labelled-1', 'labelled', [{ port: 80 }], [{ ip: '10.0.0.3' }]),
      slice('labelled2-1', 'labelled2', [{ port: 80 }], [{ ip: '10.0.0.3' }]),
    ],
  });
  t.same(problems, []);
  t.same([...state.frontends.keys()], ['10.96.0.61:80/TCP']);
});

t.test('dual-stack: each family gets its own frontends, with backends of its own family only', async (t) => {
  const node6: NodeInfo = { ...node, addresses6: ['fd00:192:168::10'] };
  const { state, problems } = buildDesiredState({
    services: [
      svc('dual', {
        type: 'NodePort',
        clusterIP: '10.96.0.70',
        clusterIPs: ['10.96.0.70', 'fd00:10:96::70'],
        ipFamilies: ['IPv4', 'IPv6'],
        ipFamilyPolicy: 'RequireDualStack',
        ports: [{ port: 80, nodePort: 30070 }],
      }),
      // Written as the API server would not, read as the same address.
      svc('v6', { clusterIP: 'FD00:10:96:0::71', clusterIPs: ['fd00:10:96::71'], ipFamilies: ['IPv6'], ports: [{ port: 80 }] }),
    ],
    slices: [
      slice('dual-v4', 'dual', [{ port: 8080 }], [{ ip: '10.0.0.1' }]),
      slice('dual-v6', 'dual', [{ port: 8080 }], [{ ip: 'fd00:10:244::10' }, { ip: 'fd00:10:244::2' }], { addressType: 'IPv6' }),
      slice('v6-a', 'v6', [{ port: 9090 }], [{ ip: 'fd00:10:244:0:0:0:0:3' }], { addressType: 'IPv6' }),
    ],
    node: node6,
  });
  t.same(problems, []);
  t.same(
    [...state.frontends.keys()],
    [
      '0.0.0.0:30070/TCP',
      '10.96.0.70:80/TCP',
      '192.168.1.10:30070/TCP',
      '192.168.2.10:30070/TCP',
      '[::]:30070/TCP',
      '[fd00:10:96::70]:80/TCP',
      '[fd00:10:96::71]:80/TCP',
      '[fd00:192:168::10]:30070/TCP',
    ],
    'IPv4 first, then IPv6, each in numeric order',
  );
  for (const key of ['10.96.0.70:80/TCP', '0.0.0.0:30070/TCP', '192.168.1.10:30070/TCP'])
    t.same(backends(state, key), ['10.0.0.1:8080'], key);
  for (const key of ['[fd00:10:96::70]:80/TCP', '[::]:30070/TCP', '[fd00:192:168::10]:30070/TCP']) {
    t.same(backends(state, key), ['fd00:10:244::2:8080', 'fd00:10:244::10:8080'], `${key}: IPv6 backends, numerically sorted`);
  }
  t.same(backends(state, '[fd00:10:96::71]:80/TCP'), ['fd00:10:244::3:9090'], 'IPv6 written long is made canonical');
  t.equal(frontend(state, '[::]:30070/TCP').wildcard, true);
  t.equal(frontend(state, '[fd00:10:96::70]:80/TCP').ip, 'fd00:10:96::70');
});

t.test('a family without a cluster IP gets nothing; its other addresses are reported once', async (t) => {
  const { state, problems } = buildDesiredState({
    services: [
      svc(
        'v6',
        {
          type: 'LoadBalancer',
          clusterIP: 'fd00:10:96::71',
          clusterIPs: ['fd00:10:96::71'],
          externalIPs: ['198.51.100.7', 'fd00:198:51::7'],
          ports: [{ port: 80, nodePort: 30071 }],
        },
        { status: { loadBalancer: { ingress: [{ ip: '203.0.113.9' }] } } },
      ),
      svc('v4', { clusterIP: '10.96.0.72', externalIPs: ['fd00:198:51::8'], ports: [{ port: 80 }] }),
    ],
    slices: [slice('v4-a', 'v4', [{ port: 80 }], [{ ip: 'fd00:10:244::9' }], { addressType: 'IPv6' })],
    node: { ...node, addresses6: ['fd00:192:168::10'] },
  });
  t.same(
    [...state.frontends.keys()],
    ['10.96.0.72:80/TCP', '[::]:30071/TCP', '[fd00:10:96::71]:80/TCP', '[fd00:192:168::10]:30071/TCP', '[fd00:198:51::7]:80/TCP'],
    'no IPv4 NodePorts, LoadBalancer or external IPs for an IPv6-only Service',
  );
  t.same(backends(state, '10.96.0.72:80/TCP'), [], 'an IPv6 slice never feeds an IPv4 frontend');
  t.same(
    problems.map((p) => [p.severity, p.name, p.path, p.message]),
    [
      ['warning', 'v4', 'spec.externalIPs', 'spec.externalIPs: fd00:198:51::8 skipped: the Service has no cluster IP of that family'],
      [
        'warning',
        'v6',
        'status.loadBalancer.ingress',
        'status.loadBalancer.ingress: 203.0.113.9 skipped: the Service has no cluster IP of that family',
      ],
      ['warning', 'v6', 'spec.externalIPs', 'spec.externalIPs: 198.51.100.7 skipped: the Service has no cluster IP of that family'],
    ],
  );
});

t.test('NodePort, LoadBalancer and externalIPs with externalTrafficPolicy Local', async (t) => {
  const lb = svc(
    'lb',
    {
      type: 'LoadBalancer',
      clusterIP: '10.96.0.80',
      ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080 }],
      externalIPs: ['198.51.100.7'],
      externalTrafficPolicy: 'Local',
      loadBalancerSourceRanges: ['10.0.0.0/8', '2001:db8::/32'],
    },
    { status: { loadBalancer: { ingress: [{ ip: '203.0.113.5' }, { hostname: 'lb.example.com' }] } } },
  );
  const eps = slice(
    'lb-1',
    'lb',
    [{ name: 'http', port: 8080 }],
    [
      { ip: '10.244.1.1', node: 'node-a' },
      { ip: '10.244.2.1', node: 'node-b' },
    ],
  );
  const { state, problems } = buildDesiredState({ services: [lb], slices: [eps], node });
  t.same(problems, []);
  t.same(
    [...state.frontends.keys()],
    [
      '0.0.0.0:30080/TCP',
      '0.0.0.0:30080/TCP/internal',
      '10.96.0.80:80/TCP',
      '192.168.1.10:30080/TCP',
      '192.168.1.10:30080/TCP/internal',
      '192.168.2.10:30080/TCP',
      '192.168.2.10:30080/TCP/internal',
      '198.51.100.7:80/TCP',
      '198.51.100.7:80/TCP/internal',
      '203.0.113.5:80/TCP',
      '203.0.113.5:80/TCP/internal',
    ],
  );
  t.same(backends(state, '10.96.0.80:80/TCP'), ['10.244.1.1:8080(L)', '10.244.2.1:8080'], 'ClusterIP: all endpoints');
  for (const key of ['0.0.0.0:30080/TCP', '192.168.1.10:30080/TCP', '198.51.100.7:80/TCP', '203.0.113.5:80/TCP']) {
    t.same(backends(state, key), ['10.244.1.1:8080(L)'], `${key}: local endpoints only`);
    t.same(backends(state, `${key}/internal`), ['10.244.1.1:8080(L)', '10.244.2.1:8080'], `${key}/internal: all endpoints`);
    t.match(frontend(state, key), { scope: 'external', externalLocal: true, twoScopes: true, internalLocal: false });
    t.match(frontend(state, `${key}/internal`), { scope: 'internal', externalLocal: true, twoScopes: true });
  }
  t.match(frontend(state, '10.96.0.80:80/TCP'), { type: 'ClusterIP', externalLocal: false, twoScopes: false, wildcard: false });
  t.match(frontend(state, '0.0.0.0:30080/TCP'), { type: 'NodePort', wildcard: true, port: 30080 });
  t.match(frontend(state, '192.168.1.10:30080/TCP'), { type: 'NodePort', wildcard: false });
  t.match(frontend(state, '198.51.100.7:80/TCP'), { type: 'ExternalIP', sourceRanges: [] });
  t.same(frontend(state, '203.0.113.5:80/TCP').type, 'LoadBalancer');
  t.same(frontend(state, '203.0.113.5:80/TCP').sourceRanges, ['10.0.0.0/8'], 'IPv4 ranges for IPv4 frontends');
});

t.test('externalTrafficPolicy Local falls back to local serving+terminating endpoints', async (t) => {
  const service = svc('np', {
    type: 'NodePort',
    clusterIP: '10.96.0.81',
    ports: [{ port: 80, nodePort: 30081 }],
    externalTrafficPolicy: 'Local',
  });
  const eps = slice(
    'np-1',
    'np',
    [{ port: 8080 }],
    [
      { ip: '10.244.1.1', node: 'node-a', ready: false, serving: true, terminating: true },
      { ip: '10.244.2.1', node: 'node-b', ready: true },
    ],
  );
  const { state } = buildDesiredState({ services: [service], slices: [eps], node });
  t.same(backends(state, '192.168.1.10:30081/TCP'), ['10.244.1.1:8080(T)(L)']);
  t.same(backends(state, '192.168.1.10:30081/TCP/internal'), ['10.244.2.1:8080']);
  t.same(backends(state, '10.96.0.81:80/TCP'), ['10.244.2.1:8080']);
});

t.test('externalTrafficPolicy Cluster: one scope, all endpoints; no node means only the wildcard', async (t) => {
  const service = svc('np', { type: 'NodePort', clusterIP: '10.96.0.82', ports: [{ port: 80, nodePort: 30082 }] });
  const eps = slice(
    'np-1',
    'np',
    [{ port: 8080 }],
    [
      { ip: '10.244.1.1', node: 'node-a' },
      { ip: '10.244.2.1', node: 'node-b' },
    ],
  );
  const { state } = buildDesiredState({ services: [service], slices: [eps] });
  t.same([...state.frontends.keys()], ['0.0.0.0:30082/TCP', '10.96.0.82:80/TCP']);
  t.same(backends(state, '0.0.0.0:30082/TCP'), ['10.244.1.1:8080', '10.244.2.1:8080'], 'nothing is local without a node');
  t.match(frontend(state, '0.0.0.0:30082/TCP'), { externalLocal: false, twoScopes: false, wildcard: true });
});

t.test('a ClusterIP Service with a nodePort field gets no NodePort frontends', async (t) => {
  const service = svc('c', { clusterIP: '10.96.0.83', ports: [{ port: 80, nodePort: 30083 }] });
  const { state } = buildDesiredState({ services: [service], slices: [], node });
  t.same([...state.frontends.keys()], ['10.96.0.83:80/TCP']);
});

t.test('LoadBalancer IPs in Proxy ipMode are not captured; IPv6-only source ranges leave IPv4 unrestricted, as kube-proxy', async (t) => {
  const proxied = svc(
    'lb',
    { type: 'LoadBalancer', clusterIP: '10.96.0.84', ports: [{ port: 80, nodePort: 30084 }] },
    {
      status: {
        loadBalancer: {
          ingress: [
            { ip: '203.0.113.6', ipMode: 'Proxy' },
            { ip: '203.0.113.7', ipMode: 'VIP' },
          ],
        },
      },
    },
  );
  const v6ranges = svc(
    'lb6',
    { type: 'LoadBalancer', clusterIP: '10.96.0.85', ports: [{ port: 80, nodePort: 30085 }], loadBalancerSourceRanges: ['2001:db8::/32'] },
    { status: { loadBalancer: { ingress: [{ ip: '203.0.113.8' }] } } },
  );
  const { state, problems } = buildDesiredState({ services: [proxied, v6ranges], slices: [] });
  t.notOk(state.frontends.has('203.0.113.6:80/TCP'));
  t.ok(state.frontends.has('203.0.113.7:80/TCP'));
  t.same(state.frontends.get('203.0.113.8:80/TCP')?.sourceRanges, [], 'the IPv6 range is ignored: no restriction for the IPv4 frontend');
  t.same(
    problems.map((p) => [p.severity, p.name, p.path]),
    [['warning', 'lb6', 'spec.loadBalancerSourceRanges']],
  );
  t.match(problems[0]?.message, /holds no IPv4 range: its IPv4 LoadBalancer frontends accept every client/);
});

t.test('a LoadBalancer without node ports; its IP also listed in externalIPs', async (t) => {
  // allocateLoadBalancerNodePorts: false leaves the ports without nodePort.
  const lb = svc(
    'lb',
    {
      type: 'LoadBalancer',
      clusterIP: '10.96.0.86',
      ports: [{ port: 443 }],
      externalIPs: ['203.0.113.9'],
      loadBalancerSourceRanges: ['192.0.2.0/24'],
      allocateLoadBalancerNodePorts: false,
    },
    { status: { loadBalancer: { ingress: [{ ip: '203.0.113.9' }] } } },
  );
  const { state, problems } = buildDesiredState({ services: [lb], slices: [], node });
  t.same([...state.frontends.keys()], ['10.96.0.86:443/TCP', '203.0.113.9:443/TCP']);
  t.match(frontend(state, '203.0.113.9:443/TCP'), { type: 'LoadBalancer', sourceRanges: ['192.0.2.0/24'] }, 'the restricted entry is kept');
  t.same(
    problems.map((p) => [p.severity, p.name, p.path]),
    [['warning', 'lb', 'spec.ports[0]']],
  );
  t.match(problems[0]?.message, /duplicates this Service's LoadBalancer frontend/);
});

t.test('internalTrafficPolicy Local keeps ClusterIP traffic on the node', async (t) => {
  const service = svc('itp', {
    type: 'NodePort',
    clusterIP: '10.96.0.90',
    ports: [{ port: 80, nodePort: 30090 }],
    internalTrafficPolicy: 'Local',
  });
  const eps = slice(
    'itp-1',
    'itp',
    [{ port: 8080 }],
    [
      { ip: '10.244.1.1', node: 'node-a' },
      { ip: '10.244.2.1', node: 'node-b' },
    ],
  );
  const { state } = buildDesiredState({ services: [service], slices: [eps], node });
  t.same(backends(state, '10.96.0.90:80/TCP'), ['10.244.1.1:8080(L)']);
  t.match(frontend(state, '10.96.0.90:80/TCP'), { internalLocal: true, externalLocal: false });
  t.same(backends(state, '192.168.1.10:30090/TCP'), ['10.244.1.1:8080(L)', '10.244.2.1:8080'], 'external traffic is not affected');
  t.equal(frontend(state, '192.168.1.10:30090/TCP').internalLocal, false);

  const elsewhere = buildDesiredState({ services: [service], slices: [eps], node: { name: 'node-z', addresses: [] } });
  t.same(backends(elsewhere.state, '10.96.0.90:80/TCP'), [], 'no local endpoint: traffic is dropped, not sent across');
});

t.test('session affinity', async (t) => {
  const { state } = buildDesiredState({
    services: [
      svc('a', {
        clusterIP: '10.96.1.1',
        ports: [{ port: 80 }],
        sessionAffinity: 'ClientIP',
        sessionAffinityConfig: { clientIP: { timeoutSeconds: 300 } },
      }),
      svc('b', { clusterIP: '10.96.1.2', ports: [{ port: 80 }], sessionAffinity: 'ClientIP' }),
      svc('c', {
        clusterIP: '10.96.1.3',
        ports: [{ port: 80 }],
        sessionAffinity: 'None',
        sessionAffinityConfig: { clientIP: { timeoutSeconds: 300 } },
      }),
      svc('d', {
        type: 'NodePort',
        clusterIP: '10.96.1.4',
        ports: [{ port: 80, nodePort: 30104 }],
        sessionAffinity: 'ClientIP',
        sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } },
      }),
    ],
    slices: [],
  });
  t.equal(frontend(state, '10.96.1.1:80/TCP').affinityTimeoutSeconds, 300);
  t.equal(frontend(state, '10.96.1.2:80/TCP').affinityTimeoutSeconds, 10800, 'Kubernetes default');
  t.equal(frontend(state, '10.96.1.3:80/TCP').affinityTimeoutSeconds, 0);
  t.equal(frontend(state, '0.0.0.0:30104/TCP').affinityTimeoutSeconds, 60, 'every frontend of the Service');
});

t.test('two Services claiming one frontend: the first by namespace/name keeps it', async (t) => {
  const a = svc('a', { clusterIP: '10.96.2.1', ports: [{ port: 80 }] }, { namespace: 'zeta' });
  const b = svc(
    'b',
    {
      clusterIP: '10.96.2.1',
      ports: [
        { name: 'x', port: 80 },
        { name: 'y', port: 81 },
      ],
    },
    { namespace: 'alpha' },
  );
  for (const services of [
    [a, b],
    [b, a],
  ]) {
    const { state, problems } = buildDesiredState({ services, slices: [] });
    t.same(frontend(state, '10.96.2.1:80/TCP').service, { namespace: 'alpha', name: 'b', portName: 'x' });
    t.ok(state.frontends.has('10.96.2.1:81/TCP'), 'the winner keeps its other ports');
    t.same(
      problems.map((p) => [p.severity, p.namespace, p.name, p.path]),
      [['error', 'zeta', 'a', 'spec.ports[0]']],
    );
    t.match(problems[0]?.message, /10\.96\.2\.1:80\/TCP.*alpha\/b/);
  }
});

t.test('an address written with leading zeros is the same frontend as without', async (t) => {
  const a = svc('a', { clusterIP: '10.96.2.1', ports: [{ port: 80 }], externalIPs: ['10.96.110.3'] });
  const b = svc('b', { clusterIP: '10.96.2.2', ports: [{ port: 80 }], externalIPs: ['010.96.110.003'] });
  const { state, problems } = buildDesiredState({ services: [a, b], slices: [] });
  t.same(frontend(state, '10.96.110.3:80/TCP').service.name, 'a');
  t.same(
    problems.map((p) => [p.name, p.path, p.conflict]),
    [['b', 'spec.ports[0]', true]],
    'one frontend, claimed twice',
  );
  t.notOk(
    [...state.frontends.keys()].some((k) => k.startsWith('010.')),
    'only canonical addresses reach the state',
  );
});

t.test('a NodePort clash drops the twin too', async (t) => {
  const mk = (name: string, ip: string) =>
    svc(name, { type: 'NodePort', clusterIP: ip, ports: [{ port: 80, nodePort: 30200 }], externalTrafficPolicy: 'Local' });
  const { state, problems } = buildDesiredState({ services: [mk('b', '10.96.3.2'), mk('a', '10.96.3.1')], slices: [], node });
  t.equal(frontend(state, '0.0.0.0:30200/TCP').service.name, 'a');
  t.equal(frontend(state, '0.0.0.0:30200/TCP/internal').service.name, 'a');
  t.equal(frontend(state, '192.168.1.10:30200/TCP/internal').service.name, 'a');
  t.ok(state.frontends.has('10.96.3.2:80/TCP'));
  t.equal(problems.filter((p) => p.name === 'b' && p.severity === 'error').length, 3, 'wildcard + two node addresses');
});

t.test('SCTP ports are skipped with a warning', async (t) => {
  const { state, problems } = buildDesiredState({
    services: [
      svc('s', {
        clusterIP: '10.96.4.1',
        ports: [
          { name: 'a', port: 80 },
          { name: 'b', port: 9999, protocol: 'SCTP' },
        ],
      }),
    ],
    slices: [],
  });
  t.same([...state.frontends.keys()], ['10.96.4.1:80/TCP']);
  t.same(
    problems.map((p) => [p.severity, p.path]),
    [['warning', 'spec.ports[1].protocol']],
  );
});

t.test('slices without a Service, or without the service-name label, are reported and unused', async (t) => {
  const { state, problems } = buildDesiredState({
    services: [svc('web', { clusterIP: '10.96.5.1', ports: [{ port: 80 }] })],
    slices: [
      slice('foo-1', 'foo', [{ port: 80 }], [{ ip: '10.0.0.1' }]),
      slice('web-x', 'web', [{ port: 80 }], [{ ip: '10.0.0.2' }], { namespace: 'other' }),
      slice('bare', 'web', [{ port: 80 }], [{ ip: '10.0.0.3' }], { labels: {} }),
    ],
  });
  t.same(backends(state, '10.96.5.1:80/TCP'), []);
  t.same(
    problems.map((p) => [p.severity, p.kind, `${p.namespace}/${p.name}`, p.message]),
    [
      [
        'warning',
        'EndpointSlice',
        'default/bare',
        'metadata.labels["kubernetes.io/service-name"]: is missing; the EndpointSlice belongs to no Service',
      ],
      ['warning', 'EndpointSlice', 'default/foo-1', 'no Service default/foo for this EndpointSlice'],
      ['warning', 'EndpointSlice', 'other/web-x', 'no Service other/web for this EndpointSlice'],
    ],
  );
});

t.test('an invalid slice is skipped whole; the rest is intact', async (t) => {
  const raw = (name: string, addresses: string[][]) => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv4',
    ports: [{ port: 8080 }],
    endpoints: addresses.map((a) => ({ addresses: a })),
  });
  const inputs = [
    { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web' }, spec: { clusterIP: '10.96.6.1', ports: [{ port: 80 }] } },
    { apiVersion: 'v1', kind: 'Service', metadata: { name: 'api' }, spec: { clusterIP: '10.96.6.2', ports: [{ port: 70000 }] } },
    { apiVersion: 'v1', kind: 'Service', metadata: { name: 'db' }, spec: { clusterIP: '10.96.6.3', ports: [{ port: 5432 }] } },
    raw('web-good', [['10.0.0.1']]),
    raw('web-bad', [['10.0.0.2'], ['10.0.0.300']]),
  ];
  const services: Service[] = [];
  const slices: EndpointSlice[] = [];
  const invalid: string[] = [];
  for (const r of inputs.map((i) => validateObject(i, 'api'))) {
    if (!r.ok) invalid.push(...r.problems.map((p) => `${p.name} ${p.path}`));
    else if (r.obj.kind === 'Service') services.push(r.obj);
    else if (r.obj.kind === 'EndpointSlice') slices.push(r.obj);
  }
  t.same(invalid, ['api spec.ports[0].port', 'web-bad endpoints[1].addresses[0]']);
  const { state, problems } = buildDesiredState({ services, slices });
  t.same(problems, []);
  t.same([...state.frontends.keys()], ['10.96.6.1:80/TCP', '10.96.6.3:5432/TCP'], 'no partial entry for the invalid Service');
  t.same(backends(state, '10.96.6.1:80/TCP'), ['10.0.0.1:8080'], "the Service keeps its other slice's backends");
});

t.test('a Service without a cluster IP is reported, not proxied', async (t) => {
  const { state, problems } = buildDesiredState({ services: [svc('x', { ports: [{ port: 80 }] })], slices: [] });
  t.equal(state.frontends.size, 0);
  t.same(
    problems.map((p) => [p.severity, p.path]),
    [['error', 'spec.clusterIP']],
  );
});

t.test('the same objects in any order give the same state and problems', async (t) => {
  const services = [
    svc('b', { type: 'NodePort', clusterIP: '10.96.7.2', ports: [{ port: 80, nodePort: 30702 }], externalTrafficPolicy: 'Local' }),
    svc('a', { clusterIP: '10.96.7.1', ports: [{ port: 80 }] }),
    svc('c', { clusterIP: '10.96.7.1', ports: [{ port: 80 }] }),
  ];
  const slices = [
    slice('b-2', 'b', [{ port: 8080 }], [{ ip: '10.0.0.9', node: 'node-a' }, { ip: '10.0.0.10' }]),
    slice('b-1', 'b', [{ port: 8080 }], [{ ip: '10.0.0.9', ready: false }, { ip: '10.0.0.1' }]),
    slice('a-1', 'a', [{ port: 8080 }], [{ ip: '10.0.0.3' }]),
    slice('zz-1', 'zz', [{ port: 8080 }], []),
  ];
  const flat = (r: ReturnType<typeof buildDesiredState>) => ({ frontends: [...r.state.frontends.entries()], problems: r.problems });
  const expected = flat(buildDesiredState({ services, slices, node }));
  t.ok(expected.frontends.length > 0 && expected.problems.length === 2);
  const reversed = flat(buildDesiredState({ services: [...services].reverse(), slices: [...slices].reverse(), node }));
  t.same(reversed, expected);
  t.same(
    reversed.frontends.map(([k]) => k),
    [...reversed.frontends.map(([k]) => k)].sort((x, y) => {
      const n = (s: string) => s.split(/[.:/]/).slice(0, 5).map(Number);
      const [a, b] = [n(x), n(y)];
      for (let i = 0; i < 5; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
      return x < y ? -1 : 1;
    }),
    'frontends sorted by ip, port, protocol, scope',
  );
});

t.test('nodeInfoFromNode takes InternalIP then ExternalIP addresses, per family', async (t) => {
  const r = validateObject({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'node-a' },
    status: {
      addresses: [
        { type: 'ExternalIP', address: '203.0.113.10' },
        { type: 'Hostname', address: 'node-a' },
        { type: 'InternalIP', address: '192.168.56.10' },
        { type: 'InternalIP', address: 'fd00::10' },
        { type: 'ExternalIP', address: '192.168.56.10' },
      ],
    },
  });
  if (!r.ok) throw new Error('invalid fixture');
  t.same(nodeInfoFromNode(r.obj as Node), { name: 'node-a', addresses: ['192.168.56.10', '203.0.113.10'], addresses6: ['fd00::10'] });
});
