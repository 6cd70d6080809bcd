// Topology Aware Routing at the socket level, end to end: the real agent
// from manifests, its node (Node object "node") labelled
// topology.kubernetes.io/zone=zone-a, a Service with trafficDistribution:
// PreferClose whose EndpointSlice carries zone hints as the EndpointSlice
// controller writes them. Real connections from a client pod reach only the
// two pods meant for zone-a; when one endpoint loses its hints (kube-proxy's
// fallback) or the hints go, they reach all three again. PreferSameNode:
// with node hints (hints.forNodes) naming this node ("node") for one pod,
// connections reach only that pod; when one endpoint lacks them, the zone
// hints decide again.
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { stringify } from 'yaml';
import t from 'tap';
import { type Cluster, POD_IPS, POD_NAMES, echoService, startCluster } from './fixtures/cluster.ts';
import type { EndpointSpec } from './fixtures/manifests.ts';

const VIP = '10.96.0.80';
const ZONES = ['zone-a', 'zone-b', 'zone-a']; // pod-a and pod-c are in the node's zone
const eps = (hints: Array<string[] | undefined>): EndpointSpec[] =>
  POD_IPS.map((ip, i) => ({ ip, zone: ZONES[i]!, ...(hints[i] ? { zoneHints: hints[i] } : {}) }));
const svc = (endpoints: EndpointSpec[]) => echoService('near', VIP, { extraSpec: { trafficDistribution: 'PreferClose' }, endpoints });
const HINTED = eps(ZONES.map((z) => [z]));

let c: Cluster;
t.before(async () => {
  c = await startCluster([svc(HINTED)]);
  writeFileSync(
    join(c.manifests, 'node.yaml'),
    stringify({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'node', labels: { 'topology.kubernetes.io/zone': 'zone-a' } },
      status: { addresses: [{ type: 'InternalIP', address: '10.244.0.100' }] },
    }),
  );
  await c.startAgent();
});
t.teardown(async () => {
  await c?.destroy();
});

async function reached(count = 60): Promise<string[]> {
  const r = await c.client.tcpConnect({ ip: VIP, port: 80, count, timeoutMs: 2000, concurrency: 4 });
  if (r.ok !== count) throw new Error(`connections to ${VIP} failed: ${JSON.stringify(r)}`);
  return Object.keys(r.byPod).sort();
}

t.test("with hints for every endpoint, connections stay in the node's zone", async (t) => {
  t.same(await reached(), [POD_NAMES[0], POD_NAMES[2]], '60 connections reach the two zone-a pods, and both');
});

t.test(
  'PreferSameNode: node hints for this node narrow to its endpoint; without them on every endpoint, the zone hints decide',
  async (t) => {
    const sameNode = (nodeHints: Array<string[] | undefined>) =>
      echoService('near', VIP, {
        extraSpec: { trafficDistribution: 'PreferSameNode' },
        endpoints: POD_IPS.map((ip, i) => ({
          ip,
          zone: ZONES[i]!,
          zoneHints: [ZONES[i]!],
          ...(nodeHints[i] ? { nodeHints: nodeHints[i] } : {}),
        })),
      });
    await c.writeService(sameNode([['node-2'], ['node'], ['node-3']]));
    t.same(await reached(), [POD_NAMES[1]], 'only pod-b, the endpoint hinted for this node (though in zone-b)');
    await c.writeService(sameNode([['node-2'], ['node'], undefined]));
    t.same(await reached(), [POD_NAMES[0], POD_NAMES[2]], 'one endpoint lacks node hints: the zone hints (zone-a)');
    await c.writeService(svc(HINTED));
  },
);

t.test("kube-proxy's fallbacks: one ready endpoint without hints, or none with hints: every endpoint", async (t) => {
  await c.writeService(svc(eps([['zone-a'], undefined, ['zone-a']])));
  t.same(await reached(), [...POD_NAMES].sort(), 'one endpoint lacks hints: all three pods');
  await c.writeService(svc(eps([undefined, undefined, undefined])));
  t.same(await reached(), [...POD_NAMES].sort(), 'no hints: all three pods');
  await c.writeService(svc(HINTED));
  t.same(await reached(), [POD_NAMES[0], POD_NAMES[2]], 'hints back: zone-a only again');
});
