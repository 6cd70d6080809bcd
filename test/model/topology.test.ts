// Topology Aware Routing in the model, with kube-proxy's rules: EndpointSlice
// zone hints (hints.forZones, what the EndpointSlice controller writes for
// trafficDistribution: PreferClose) narrow a ClusterIP's backends to the
// node's zone (its topology.kubernetes.io/zone label) only when every ready
// endpoint has hints and one is for that zone; otherwise, or without a zone
// label, every endpoint is used. Node hints (hints.forNodes, for
// trafficDistribution: PreferSameNode) come first, under the same rule for
// the node's name, as kube-proxy 1.34 has them. A Local traffic policy's set
// is the node's own, hints or not.
import t from 'tap';
import { buildDesiredState } from './desired.ts';
import { nodeInfoFromNode } from '../../src/model/node.ts';
import { type EndpointSlice, type Service } from '../../src/model/schemas.ts';
import { validateObject } from '../../src/model/validate.ts';
import type { NodeInfo } from '../../src/model/types.ts';

function obj<T>(raw: unknown): T {
  const r = validateObject(raw);
  if (!r.ok) throw new Error(JSON.stringify(r));
  return r.obj as T;
}

const service = (extraSpec: Record<string, unknown> = {}): Service =>
  obj({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'web', namespace: 'default' },
    spec: { clusterIP: '10.96.3.1', ports: [{ port: 80 }], trafficDistribution: 'PreferClose', ...extraSpec },
  });

interface Ep {
  ip: string;
  zone: string;
  hints?: string[];
  nodeHints?: string[];
  ready?: boolean;
  node?: string;
}
const slice = (eps: Ep[]): EndpointSlice =>
  obj({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    addressType: 'IPv4',
    metadata: { name: 'web-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
    ports: [{ port: 8080, protocol: 'TCP', name: '' }],
    endpoints: eps.map((e) => ({
      addresses: [e.ip],
      zone: e.zone,
      nodeName: e.node ?? `node-${e.ip}`,
      conditions: { ready: e.ready ?? true },
      ...(e.hints || e.nodeHints
        ? {
            hints: {
              ...(e.hints ? { forZones: e.hints.map((name) => ({ name })) } : {}),
              ...(e.nodeHints ? { forNodes: e.nodeHints.map((name) => ({ name })) } : {}),
            },
          }
        : {}),
    })),
  });

const node = (zone?: string): NodeInfo =>
  nodeInfoFromNode(
    obj({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'node-a', ...(zone ? { labels: { 'topology.kubernetes.io/zone': zone } } : {}) },
      status: { addresses: [{ type: 'InternalIP', address: '192.168.0.1' }] },
    }),
  );

function backends(s: EndpointSlice, n: NodeInfo | undefined, svc = service(), key = '10.96.3.1:80/TCP'): string[] {
  const { state } = buildDesiredState({ services: [svc], slices: [s], ...(n ? { node: n } : {}) });
  return state.frontends.get(key)!.backends.map((b) => b.ip);
}

const HINTED: Ep[] = [
  { ip: '10.244.1.1', zone: 'a', hints: ['a'] },
  { ip: '10.244.1.2', zone: 'a', hints: ['a'] },
  { ip: '10.244.2.1', zone: 'b', hints: ['b'] },
  { ip: '10.244.3.1', zone: 'c', hints: ['b'] }, // the controller may lend an endpoint to another zone
];

t.test("the node's zone label reaches the model", async (t) => {
  t.equal(node('a').zone, 'a');
  t.equal(node().zone, undefined);
});

t.test("hints on every ready endpoint: only those meant for the node's zone", async (t) => {
  t.same(backends(slice(HINTED), node('a')), ['10.244.1.1', '10.244.1.2']);
  t.same(backends(slice(HINTED), node('b')), ['10.244.2.1', '10.244.3.1'], 'a lent endpoint serves the zone it is lent to');
});

t.test('fallbacks: every endpoint is used', async (t) => {
  const all = ['10.244.1.1', '10.244.1.2', '10.244.2.1', '10.244.3.1'];
  t.same(backends(slice(HINTED), node()), all, 'the node has no zone label');
  t.same(backends(slice(HINTED), undefined), all, 'no node information');
  t.same(backends(slice(HINTED), node('c')), all, "no endpoint is meant for the node's zone");
  const oneWithout = HINTED.map((e, i) => (i === 2 ? { ip: e.ip, zone: e.zone } : e));
  t.same(backends(slice(oneWithout), node('a')), all, 'one ready endpoint lacks hints');
  t.same(backends(slice(HINTED.map(({ hints: _h, ...e }) => e)), node('a')), all, 'no hints at all');
});

t.test('an endpoint that is not ready does not count for the hint rule', async (t) => {
  const eps: Ep[] = [...HINTED, { ip: '10.244.4.1', zone: 'a', ready: false }];
  t.same(backends(slice(eps), node('a')), ['10.244.1.1', '10.244.1.2'], 'a not-ready endpoint without hints does not disable them');
});

t.test("internalTrafficPolicy: Local is the node's own endpoints, whatever the hints", async (t) => {
  const eps: Ep[] = [{ ...HINTED[0]!, node: 'node-a' }, ...HINTED.slice(1)];
  t.same(
    backends(slice(eps), node('b'), service({ internalTrafficPolicy: 'Local' })),
    ['10.244.1.1'],
    'the local endpoint, though hinted for zone a',
  );
});

// PreferSameNode: the EndpointSlice controller hints each endpoint for its own node (and, for
// the fallback, for its zone too).
const SAME_NODE: Ep[] = [
  { ip: '10.244.1.1', zone: 'a', hints: ['a'], nodeHints: ['node-a'], node: 'node-a' },
  { ip: '10.244.1.2', zone: 'a', hints: ['a'], nodeHints: ['node-x'], node: 'node-x' },
  { ip: '10.244.2.1', zone: 'b', hints: ['b'], nodeHints: ['node-y'], node: 'node-y' },
];

t.test('node hints on every ready endpoint, one for this node: only those meant for it', async (t) => {
  const svc = service({ trafficDistribution: 'PreferSameNode' });
  t.same(backends(slice(SAME_NODE), node('a'), svc), ['10.244.1.1'], 'the endpoint hinted for node-a');
  t.same(backends(slice(SAME_NODE), node(), svc), ['10.244.1.1'], 'no zone label needed for node hints');
  const twice = SAME_NODE.map((e, i) => (i === 2 ? { ...e, nodeHints: ['node-y', 'node-a'] } : e));
  t.same(backends(slice(twice), node('a'), svc), ['10.244.1.1', '10.244.2.1'], 'an endpoint lent to this node too');
});

t.test('node hints that do not apply fall back to the zone hints, then to every endpoint', async (t) => {
  const svc = service({ trafficDistribution: 'PreferSameNode' });
  const noneHere = SAME_NODE.slice(1);
  t.same(backends(slice(noneHere), node('b'), svc), ['10.244.2.1'], 'no endpoint for this node: the zone hints (zone b)');
  const oneWithout = SAME_NODE.map((e, i) => (i === 1 ? { ...e, nodeHints: undefined } : e));
  t.same(backends(slice(oneWithout), node('a'), svc), ['10.244.1.1', '10.244.1.2'], 'one ready endpoint lacks node hints: zone a');
  t.same(backends(slice(noneHere), node(), svc), ['10.244.1.2', '10.244.2.1'], 'and without a zone label: every endpoint');
  const notReady: Ep[] = [...SAME_NODE, { ip: '10.244.9.1', zone: 'a', ready: false }];
  t.same(backends(slice(notReady), node('a'), svc), ['10.244.1.1'], 'a not-ready endpoint without hints does not disable them');
});
