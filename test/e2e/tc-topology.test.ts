// Topology Aware Routing through the tc datapath, end to end: NodePort
// traffic from the outside client into node1 (its Node object labelled
// topology.kubernetes.io/zone=zone-a, node2's zone-b), the real agent on
// node1 with its tc programs on eth0 (fixtures/tc-nodes.ts). The Service's
// three pods: pod-a on node1 (zone-a), pod-b and pod-c on node2 (zone-b),
// its EndpointSlice with zone hints as the EndpointSlice controller writes
// them for the topology-mode annotation, which may lend an endpoint of one
// zone to another: pod-c, in zone-b, is meant for zone-a. Real connections
// reach only pod-a (DNAT, the client's address kept) and pod-c (DNAT +
// SNAT to node1); with kube-proxy's fallbacks (one ready endpoint without
// hints, no endpoint meant for zone-a, no hints) all three. PreferSameNode:
// with node hints (hints.forNodes, each endpoint's own node) on every
// endpoint, only node1's pod-a; with one endpoint lacking them, the zone
// hints again. Every address lives in namespaces this test made.
import t from 'tap';
import type { EndpointSpec, ServiceSpec } from './fixtures/manifests.ts';
import { serviceYaml } from './fixtures/manifests.ts';
import { CLIENT_IP, NODE_IPS, REMOTE_POD, type RemoteNodePort, startRemoteNodePort } from './fixtures/tc-nodes.ts';

const NODEPORT = 30090;
const POD_A = '10.244.1.10'; // on node1
const POD_C = '10.244.2.11'; // on node2, beside the fixture's pod-b (REMOTE_POD)
const PODS = [
  { name: 'pod-a', ip: POD_A, nodeName: 'node1', zone: 'zone-a' },
  { name: 'pod-b', ip: REMOTE_POD, nodeName: 'node2', zone: 'zone-b' },
  { name: 'pod-c', ip: POD_C, nodeName: 'node2', zone: 'zone-b' },
] as const;
const ALL = PODS.map((p) => p.name);
/** The controller's allocation: zone-a gets pod-a and, lent by zone-b, pod-c. */
const ZONE_HINTS = [['zone-a'], ['zone-b'], ['zone-a']];

type Hints = Array<string[] | undefined>;
const endpoints = (zoneHints: Hints, nodeHints: Hints = []): EndpointSpec[] =>
  PODS.map((p, i) => ({
    ip: p.ip,
    nodeName: p.nodeName,
    zone: p.zone,
    ...(zoneHints[i] ? { zoneHints: zoneHints[i] } : {}),
    ...(nodeHints[i] ? { nodeHints: nodeHints[i] } : {}),
  }));
const service = (
  eps: EndpointSpec[],
  extra: Partial<ServiceSpec> = { annotations: { 'service.kubernetes.io/topology-mode': 'Auto' } },
): ServiceSpec => ({
  name: 'near',
  clusterIP: '10.96.0.20',
  type: 'NodePort',
  externalTrafficPolicy: 'Cluster',
  ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: NODEPORT }],
  endpoints: eps,
  ...extra,
});

let c: RemoteNodePort;
t.before(async () => {
  // Every manifest write below changes the maps, so writeManifest sees its (info) "sync done".
  c = await startRemoteNodePort([], {
    nodeLabels: { node1: { 'topology.kubernetes.io/zone': 'zone-a' }, node2: { 'topology.kubernetes.io/zone': 'zone-b' } },
  });
  // pod-b is the fixture's (REMOTE_POD on node2); pod-a and pod-c join it.
  await c.lab.echoServer(await c.lab.pod(c.node1, 'pod-a', POD_A), { tcpPorts: [8080] });
  await c.lab.echoServer(await c.lab.pod(c.node2, 'pod-c', POD_C), { tcpPorts: [8080] });
  await c.writeManifest('near.yaml', serviceYaml(service(endpoints(ZONE_HINTS))));
});
t.teardown(async () => {
  await c?.destroy();
});

/** 60 connections from the outside client to node1's NodePort, all answered: the pods reached, and the sources they saw. */
async function reached(count = 60): Promise<{ pods: string[]; seenFrom: string[] }> {
  const r = await c.client.tcpConnect({ ip: NODE_IPS.node1, port: NODEPORT, count, timeoutMs: 3000, concurrency: 4 });
  if (r.ok !== count) throw new Error(`connections to ${NODE_IPS.node1}:${NODEPORT} failed: ${JSON.stringify(r)}`);
  return { pods: Object.keys(r.byPod).sort(), seenFrom: [...r.seenFrom].sort() };
}

t.test("zone hints on every endpoint: NodePort connections reach only the backends meant for node1's zone", async (t) => {
  const r = await reached();
  t.same(r.pods, ['pod-a', 'pod-c'], '60 connections reach pod-a and pod-c (lent to zone-a), both, and never pod-b');
  t.same(r.seenFrom, [CLIENT_IP, NODE_IPS.node1].sort(), 'pod-a on node1 saw the client, pod-c on node2 saw node1 (SNAT)');
});

t.test("kube-proxy's fallbacks: every endpoint; each from the narrowed set, and back", async (t) => {
  const fallbacks: Array<[string, Hints]> = [
    ['one ready endpoint lacks hints', [['zone-a'], undefined, ['zone-a']]],
    ['no endpoint is meant for zone-a', [['zone-b'], ['zone-b'], ['zone-c']]],
    ['no hints', []],
  ];
  for (const [what, hints] of fallbacks) {
    await c.writeManifest('near.yaml', serviceYaml(service(endpoints(hints))));
    t.same((await reached()).pods, ALL, `${what}: all three pods`);
    await c.writeManifest('near.yaml', serviceYaml(service(endpoints(ZONE_HINTS))));
    t.same((await reached()).pods, ['pod-a', 'pod-c'], 'hints back: pod-a and pod-c only again');
  }
});

t.test("PreferSameNode: node hints on every endpoint narrow to node1's pod; with one lacking them, the zone hints decide", async (t) => {
  const sameNode = (nodeHints: Hints) =>
    serviceYaml(service(endpoints(ZONE_HINTS, nodeHints), { extraSpec: { trafficDistribution: 'PreferSameNode' } }));
  await c.writeManifest('near.yaml', sameNode([['node1'], ['node2'], ['node2']]));
  const r = await reached();
  t.same(r.pods, ['pod-a'], 'only pod-a, the endpoint meant for node1');
  t.same(r.seenFrom, [CLIENT_IP], 'on node1 itself: DNAT only');
  await c.writeManifest('near.yaml', sameNode([['node1'], ['node2'], undefined]));
  t.same((await reached()).pods, ['pod-a', 'pod-c'], 'one endpoint lacks node hints: the zone hints (pod-a and pod-c)');
});
