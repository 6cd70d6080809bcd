// Traffic policies and terminating endpoints at the socket level, end to
// end, for each family: the real agent from manifests (the file source), its
// node a Node object named "node", dual-stack Services whose EndpointSlices
// place pod-a on this node and pod-b, pod-c on another ("other"), and real
// connections from a client pod in the hooks' cgroup. What a user sees:
//  - internalTrafficPolicy: Local: connections reach only this node's pod;
//    with no endpoint on this node, connect() is refused at once;
//  - externalTrafficPolicy: Local on a LoadBalancer Service, from inside
//    the node: its NodePort on the node's InternalIP (the client pod's
//    address), its LoadBalancer ingress IPs and its externalIPs (which need
//    no route: the socket LB translates them) reach every endpoint, as
//    kube-proxy does for traffic that does not come from outside, the
//    client seeing the address it asked for as the peer;
//  - endpoints that are terminating but still serving (a rollout draining)
//    are used while no endpoint is ready, only the ready one once one is,
//    and endpoints neither ready nor serving are never used (refused).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import t from 'tap';
import {
  CLIENT_IP,
  CLIENT_IP6,
  type Cluster,
  FAMILIES,
  POD_IPS,
  POD_IPS6,
  POD_NAMES,
  TCP_PORT,
  dualStackEchoService,
  startCluster,
} from './fixtures/cluster.ts';
import type { EndpointSpec, ServiceSpec } from './fixtures/manifests.ts';
import { hostPort } from '../../lab/protocol.ts';

const ON = ['node', 'other', 'other']; // pod-a runs on this node
const NODEPORT = 30085;
type Conditions = Pick<EndpointSpec, 'ready' | 'serving' | 'terminating'>;
const eps = (ips: readonly string[], nodes: readonly string[] = ON, cond: readonly Conditions[] = []): EndpointSpec[] =>
  ips.map((ip, i) => ({ ip, nodeName: nodes[i]!, ...(cond[i] ?? {}) }));
/** A dual-stack Service at VIPs n whose endpoints in both families sit on `nodes` with conditions `cond`. */
const svc = (
  name: string,
  n: number,
  opts: Partial<ServiceSpec>,
  nodes: readonly string[] = ON,
  cond: readonly Conditions[] = [],
): ServiceSpec => dualStackEchoService(name, n, { endpoints: eps(POD_IPS, nodes, cond), endpoints6: eps(POD_IPS6, nodes, cond), ...opts });

const ITP = { extraSpec: { internalTrafficPolicy: 'Local' } };
const NOWHERE = ['other', 'other', 'other'];
const DRAINING: Conditions = { ready: false, serving: true, terminating: true };
const GONE: Conditions = { ready: false, serving: false, terminating: true };
/** The ETP=Local Service's outside addresses: in the lab nothing routes them, only the socket LB reaches them. */
const LB_IPS = { 4: '192.168.200.30', 6: 'fd00:192:168:200::30' } as const;
const EXTERNAL_IPS = { 4: '192.168.201.30', 6: 'fd00:192:168:201::30' } as const;
const etpNodePort: Partial<ServiceSpec> = {
  type: 'LoadBalancer',
  externalTrafficPolicy: 'Local',
  ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: TCP_PORT, nodePort: NODEPORT }],
  loadBalancerIngress: [LB_IPS[4], LB_IPS[6]],
  externalIPs: [EXTERNAL_IPS[4], EXTERNAL_IPS[6]],
};

let c: Cluster;
t.before(async () => {
  c = await startCluster(
    [
      svc('itp', 0x61, ITP),
      svc('itp-none', 0x62, ITP, NOWHERE),
      svc('etp', 0x63, etpNodePort),
      svc('drain', 0x64, {}, ON, [DRAINING, DRAINING, DRAINING]),
    ],
    { ipv6: true },
  );
  // This node: the client pod's addresses stand in for its InternalIPs (the NodePort from the node itself).
  writeFileSync(
    join(c.manifests, 'node.yaml'),
    stringify({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'node' },
      status: {
        addresses: [
          { type: 'InternalIP', address: CLIENT_IP },
          { type: 'InternalIP', address: CLIENT_IP6 },
        ],
      },
    }),
  );
  await c.startAgent();
});
t.teardown(async () => {
  await c?.destroy();
});

/** `count` connections to ip:port: the pods reached (all must succeed, each with ip:port as its peer). */
async function reached(ip: string, port = 80, count = 60): Promise<string[]> {
  const r = await c.client.tcpConnect({ ip, port, count, timeoutMs: 2000, concurrency: 4 });
  if (r.ok !== count) throw new Error(`connections to ${ip}:${port} failed: ${JSON.stringify(r)}`);
  if (r.peerNames.length !== 1 || r.peerNames[0] !== hostPort(ip, port))
    throw new Error(`connections to ${ip}:${port} saw peers ${r.peerNames.join(', ')}`);
  return Object.keys(r.byPod).sort();
}

/** The errors of `count` connections to ip:80 that must all fail. */
async function refused(ip: string, count = 3): Promise<string[]> {
  const r = await c.client.tcpConnect({ ip, port: 80, count, timeoutMs: 2000 });
  if (r.ok !== 0) throw new Error(`connections to ${ip} succeeded: ${JSON.stringify(r)}`);
  return Object.keys(r.errors);
}

for (const f of FAMILIES) {
  const node = f.family === 4 ? CLIENT_IP : CLIENT_IP6;

  t.test(`IPv${f.family}: internalTrafficPolicy Local: only this node's pod; none on this node: refused`, async (t) => {
    t.same(await reached(f.vip(0x61)), [POD_NAMES[0]], '60 connections, all to pod-a (the only endpoint on this node)');
    t.same(await refused(f.vip(0x62)), ['ECONNREFUSED'], 'every endpoint on another node: connect() refused at once');
    // The same Service with the policy gone: every endpoint again.
    await c.writeService(svc('itp', 0x61, {}));
    t.same(await reached(f.vip(0x61)), POD_NAMES, 'policy Cluster: all three pods');
    await c.writeService(svc('itp', 0x61, ITP));
    t.same(await reached(f.vip(0x61)), [POD_NAMES[0]], 'Local again: pod-a only');
  });

  t.test(
    `IPv${f.family}: externalTrafficPolicy Local from inside the node (NodePort, LoadBalancer IP, externalIP): every endpoint`,
    async (t) => {
      t.same(await reached(node, NODEPORT), POD_NAMES, `${node}:${NODEPORT} from the node reaches the pods of both nodes`);
      t.same(await reached(f.vip(0x63)), POD_NAMES, 'and so does its ClusterIP');
      t.same(await reached(LB_IPS[f.family]), POD_NAMES, `its LoadBalancer IP ${LB_IPS[f.family]} from a pod: every endpoint`);
      t.same(await reached(EXTERNAL_IPS[f.family]), POD_NAMES, `its externalIP ${EXTERNAL_IPS[f.family]} from a pod: every endpoint`);
    },
  );

  t.test(`IPv${f.family}: terminating endpoints: used while none is ready, dropped once one is; not serving: refused`, async (t) => {
    t.same(await reached(f.vip(0x64)), POD_NAMES, 'all three terminating but serving: connections drain to them');
    await c.writeService(svc('drain', 0x64, {}, ON, [DRAINING, {}, DRAINING]));
    t.same(await reached(f.vip(0x64)), [POD_NAMES[1]], 'pod-b ready: only pod-b');
    await c.writeService(svc('drain', 0x64, {}, ON, [GONE, GONE, GONE]));
    t.same(await refused(f.vip(0x64)), ['ECONNREFUSED'], 'terminating and not serving: no endpoint, refused');
    await c.writeService(svc('drain', 0x64, {}, ON, [DRAINING, DRAINING, DRAINING]));
  });
}
