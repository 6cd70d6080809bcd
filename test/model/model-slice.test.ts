// What the model keeps of an EndpointSlice (src/model/endpoints.ts
// modelSlice): every field kube-proxy's rules read survives, per endpoint
// (first address, the three conditions, node name, zone, zone hints), and
// only those. An API object full of what the model does not read
// (managedFields, annotations, targetRefs, further addresses, deprecated
// topology, status fields) gives exactly the map targets of the same object
// stripped to what the model reads, through the full model and the
// incremental one (the Kubernetes source's).
import t from 'tap';
import { toTargets } from '../../src/agent/loops/targets.ts';
import { buildDesiredState } from './desired.ts';
import { type IpSlice, modelSlice } from '../../src/model/endpoints.ts';
import { IncrementalModel } from '../../src/model/incremental.ts';
import { type EndpointSlice, type Service } from '../../src/model/schemas.ts';
import { validateObject } from '../../src/model/validate.ts';
import type { NodeInfo } from '../../src/model/types.ts';

function valid<T>(raw: unknown): T {
  const r = validateObject(raw, 'test');
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.obj as T;
}

const NODE: NodeInfo = { name: 'node-a', addresses: ['192.0.2.10'], zone: 'zone-a' };
const managedFields = [
  { manager: 'kube-controller-manager', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:metadata': {} } },
];

const fullService = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: {
    name: 'web',
    namespace: 'shop',
    uid: 'u-1',
    resourceVersion: '77',
    generation: 3,
    creationTimestamp: '2026-01-01T00:00:00Z',
    managedFields,
    labels: { app: 'web', tier: 'front' },
    annotations: {
      'kubectl.kubernetes.io/last-applied-configuration': '{"big":"json"}',
      'svcmap.io/lb-algorithm': 'sh',
      'svcmap.io/lb-source-hash-port': 'true',
    },
  },
  spec: {
    type: 'LoadBalancer',
    clusterIP: '10.96.0.20',
    clusterIPs: ['10.96.0.20', 'fd00:96::20'],
    ipFamilies: ['IPv4', 'IPv6'],
    ipFamilyPolicy: 'PreferDualStack',
    selector: { app: 'web' },
    externalTrafficPolicy: 'Local',
    healthCheckNodePort: 31000,
    internalTrafficPolicy: 'Cluster',
    sessionAffinity: 'ClientIP',
    sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } },
    allocateLoadBalancerNodePorts: true,
    externalIPs: ['198.51.100.7'],
    loadBalancerSourceRanges: ['203.0.113.0/24'],
    ports: [
      { name: 'http', protocol: 'TCP', port: 80, targetPort: 'http', nodePort: 30080, appProtocol: 'http' },
      { name: 'dns', protocol: 'UDP', port: 53, targetPort: 5353, nodePort: 30053 },
    ],
  },
  status: { loadBalancer: { ingress: [{ ip: '198.51.100.50', ipMode: 'VIP', ports: [{ port: 80, protocol: 'TCP' }] }] }, conditions: [] },
};

function fullEndpoint(ip: string, extra: Record<string, unknown>, more: string[] = []) {
  return {
    addresses: [ip, ...more],
    targetRef: { kind: 'Pod', namespace: 'shop', name: `pod-${ip}`, uid: `uid-${ip}` },
    deprecatedTopology: { 'kubernetes.io/hostname': 'x' },
    ...extra,
  };
}

const fullSlices = [
  {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    addressType: 'IPv4',
    metadata: {
      name: 'web-abc',
      namespace: 'shop',
      uid: 's-1',
      resourceVersion: '91',
      generateName: 'web-',
      managedFields,
      labels: { 'kubernetes.io/service-name': 'web', 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io' },
      annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': '2026-01-01T00:00:01Z' },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Service', name: 'web', uid: 'u-1', controller: true }],
    },
    ports: [
      { name: 'http', protocol: 'TCP', port: 8080, appProtocol: 'http' },
      { name: 'dns', protocol: 'UDP', port: 5353 },
    ],
    endpoints: [
      fullEndpoint(
        '10.244.1.5',
        {
          conditions: { ready: true, serving: true, terminating: false },
          nodeName: 'node-a',
          zone: 'zone-a',
          hints: { forZones: [{ name: 'zone-a' }], forNodes: [{ name: 'node-a' }] },
        },
        ['10.244.1.105'],
      ),
      fullEndpoint('10.244.2.6', {
        conditions: { ready: true },
        nodeName: 'node-b',
        zone: 'zone-b',
        hints: { forZones: [{ name: 'zone-b' }] },
      }),
      fullEndpoint('10.244.2.7', { conditions: { ready: false, serving: true, terminating: true }, nodeName: 'node-b', zone: 'zone-b' }),
      fullEndpoint('10.244.1.8', { conditions: { ready: false, serving: false, terminating: true }, nodeName: 'node-a' }),
      fullEndpoint('10.244.3.9', { conditions: {} }),
    ],
  },
  {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    addressType: 'IPv6',
    metadata: { name: 'web-v6', namespace: 'shop', managedFields, labels: { 'kubernetes.io/service-name': 'web' } },
    ports: [
      { name: 'http', protocol: 'TCP', port: 8080 },
      { name: 'dns', protocol: 'UDP', port: 5353 },
    ],
    endpoints: [
      fullEndpoint('fd00:244::5', { conditions: { ready: true }, nodeName: 'node-a', zone: 'zone-a' }),
      fullEndpoint('fd00:244::6', { conditions: { ready: false, serving: true, terminating: true } }),
    ],
  },
];

/** The same object with only the fields the model reads. */
function stripped(o: (typeof fullSlices)[number]) {
  return {
    apiVersion: o.apiVersion,
    kind: o.kind,
    addressType: o.addressType,
    metadata: {
      name: o.metadata.name,
      namespace: o.metadata.namespace,
      labels: { 'kubernetes.io/service-name': o.metadata.labels['kubernetes.io/service-name'] },
    },
    ports: o.ports.map(({ name, protocol, port }) => ({ name, protocol, port })),
    endpoints: o.endpoints.map((ep) => {
      const e = ep as Record<string, unknown>;
      const out: Record<string, unknown> = { addresses: [ep.addresses[0]], conditions: e.conditions };
      for (const k of ['nodeName', 'zone', 'hints']) if (e[k] !== undefined) out[k] = e[k];
      return out;
    }),
  };
}
const strippedService = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'web', namespace: 'shop', annotations: { 'svcmap.io/lb-algorithm': 'sh', 'svcmap.io/lb-source-hash-port': 'true' } },
  spec: {
    ...fullService.spec,
    selector: undefined,
    allocateLoadBalancerNodePorts: undefined,
    ports: fullService.spec.ports.map(({ appProtocol: _, ...p }) => p),
  },
  status: { loadBalancer: { ingress: [{ ip: '198.51.100.50', ipMode: 'VIP' }] } },
};

t.test('per endpoint, the first address, the conditions, node name, zone and hints survive', async (t) => {
  for (const raw of fullSlices) {
    const slice = valid<IpSlice>(raw);
    const kept = modelSlice(slice);
    t.equal(kept.addressType, slice.addressType, `${raw.metadata.name}: addressType`);
    t.equal(kept.ports, slice.ports, 'ports as validated');
    t.equal(kept.ips.length, slice.endpoints.length, 'one entry per endpoint');
    slice.endpoints.forEach((ep, i) => {
      const c = kept.conditions[i]!;
      t.same(
        {
          ip: kept.ips[i],
          ready: (c & 1) !== 0,
          serving: (c & 2) !== 0,
          terminating: (c & 4) !== 0,
          nodeName: kept.nodeNames?.[i],
          zone: kept.zones?.[i],
          hints: { zones: kept.zoneHints?.[i], nodes: kept.nodeHints?.[i] },
        },
        { ip: ep.addresses[0], ...ep.conditions, nodeName: ep.nodeName, zone: ep.zone, hints: ep.hints },
        `${raw.metadata.name} endpoint ${i}`,
      );
    });
  }
  const plain = modelSlice(valid<IpSlice>(stripped(fullSlices[1]!)));
  t.equal(plain.zoneHints, undefined, 'no endpoint with hints: no hints column');
  const bare = modelSlice(valid<IpSlice>({ ...stripped(fullSlices[0]!), endpoints: [{ addresses: ['10.244.9.9'] }] }));
  t.same(
    [bare.nodeNames, bare.zones, bare.zoneHints, bare.nodeHints],
    [undefined, undefined, undefined, undefined],
    'no node names, zones or hints: no columns',
  );
});

t.test('a full API object gives the targets of the same object stripped to what the model reads', async (t) => {
  const targetsOf = (svc: unknown, slices: unknown[]) =>
    toTargets(buildDesiredState({ services: [valid<Service>(svc)], slices: slices.map((s) => valid<EndpointSlice>(s)), node: NODE }).state);
  const full = targetsOf(fullService, fullSlices);
  const lean = targetsOf(strippedService, fullSlices.map(stripped));
  t.ok(full.length >= 10, `frontends of every kind and both families (${full.length})`);
  t.ok(
    full.some((x) => x.backends.length > 0 && x.key.addr.includes(':')),
    'IPv6 frontends with backends',
  );
  t.same(full, lean, 'the same targets');

  const incremental = (svc: unknown, slices: unknown[]) => {
    const m = new IncrementalModel();
    m.setNode(NODE);
    m.upsertService(valid<Service>(svc));
    for (const s of slices) m.upsertSlice(valid<EndpointSlice>(s));
    m.takeChanges();
    return [...m.allFrontends().values()].flat();
  };
  const inc = incremental(fullService, fullSlices);
  t.same(inc, incremental(strippedService, fullSlices.map(stripped)), 'the incremental model: the same frontends');
  t.same(toTargets({ frontends: new Map(inc.map((f) => [f.key, f])) }), full, 'and the same targets as the full model');
});
