// LoadBalancer Services and the load-balancing algorithms through the tc
// datapath, end to end: the real agent on node1 from manifests (the file
// source), its tc programs on eth0 (fixtures/tc-nodes.ts, dual-stack), two
// outside clients on the nodes' network, a pod on each node. What a user
// sees:
//  - a LoadBalancer Service's ingress IPs (status.loadBalancer.ingress, as a
//    cloud controller writes them; announced towards node1 by a route on the
//    clients) reach its pods from outside over both families, the client
//    talking to the LoadBalancer IP throughout;
//  - loadBalancerSourceRanges (IPv4): the client inside the range is
//    served, the one outside gets no answer (dropped at tc, counted as
//    reason="source_denied"), and the Service's NodePort is not restricted
//    by them (as in kube-proxy);
//  - svcmap.io/lb-algorithm at tc, both families: rr rotates sequential
//    connections over the two pods; sh keeps one client address on one
//    pod, and with svcmap.io/lb-source-hash-port its connections spread; dh
//    sends every client of the frontend to one pod; lc keeps connections
//    held open even over the pods (tc's live flow counts).
// Every address lives in namespaces this test made.
import t from 'tap';
import type { LabClient } from '../../lab/index.ts';
import { hostPort } from '../../lab/protocol.ts';
import { type ServiceSpec, serviceYaml } from './fixtures/manifests.ts';
import {
  CLIENT_IP,
  NODE_IPS,
  REMOTE_POD,
  type RemoteNodePort,
  V6_IPS,
  addNode1Pod,
  NODE1_POD,
  startRemoteNodePort,
  tcCounters,
} from './fixtures/tc-nodes.ts';

const CLIENT2_IP = '192.168.100.101';
const CLIENT2_IP6 = 'fd00:192:168:100::101';
const { ip: POD_A, ip6: POD_A6 } = NODE1_POD; // on node1; pod-b is the fixture's REMOTE_POD on node2
const LB_IP = '192.168.200.20';
const LB_IP6 = 'fd00:192:168:200::20';
const RANGED_IP = '192.168.200.21';
const RANGED_NODEPORT = 30191;
const BOTH = ['pod-a', 'pod-b'];

const tcp = (nodePort: number) => [{ name: 'tcp', protocol: 'TCP' as const, port: 80, targetPort: 8080, nodePort }];
const pods = [
  { ip: POD_A, nodeName: 'node1' },
  { ip: REMOTE_POD, nodeName: 'node2' },
];
const pods6 = [
  { ip: POD_A6, nodeName: 'node1' },
  { ip: V6_IPS.pod, nodeName: 'node2' },
];

const algorithm = (name: string, n: number, alg: string, more: Record<string, string> = {}): ServiceSpec => ({
  name,
  clusterIP: `10.96.0.${n}`,
  clusterIP6: `fd00:10:96::${n}`,
  type: 'NodePort',
  externalTrafficPolicy: 'Cluster',
  ports: tcp(30100 + n),
  endpoints: pods,
  endpoints6: pods6,
  annotations: { 'svcmap.io/lb-algorithm': alg, ...more },
});
const RR = algorithm('tc-rr', 81, 'rr');
const SH = algorithm('tc-sh', 82, 'sh');
const SH_PORT = algorithm('tc-sh-port', 83, 'sh', { 'svcmap.io/lb-source-hash-port': 'true' });
const DH = algorithm('tc-dh', 84, 'dh');
const LC = algorithm('tc-lc', 85, 'lc');

let c: RemoteNodePort;
let client2: LabClient;
t.before(async () => {
  c = await startRemoteNodePort([], { ipv6: true });
  await addNode1Pod(c);
  const pod2 = await c.lab.pod(c.clientPod.node, 'client2', `${CLIENT2_IP}/24`);
  await c.lab.ipv6(pod2, CLIENT2_IP6, { dev: pod2.ifname });
  // The LoadBalancer IPs are announced by node1 (a route on each client, as a router would learn it).
  for (const p of [c.clientPod, pod2]) {
    for (const ip of [LB_IP, RANGED_IP]) await c.lab.route(p, `${ip}/32`, NODE_IPS.node1);
    await c.lab.ip(p, '-6', 'route', 'replace', `${LB_IP6}/128`, 'via', V6_IPS.node1);
  }
  client2 = await c.lab.client(pod2);
  await c.writeManifest(
    'lb.yaml',
    serviceYaml({
      name: 'lb',
      clusterIP: '10.96.0.30',
      clusterIP6: 'fd00:10:96::30',
      type: 'LoadBalancer',
      externalTrafficPolicy: 'Cluster',
      ports: tcp(30190),
      endpoints: pods,
      endpoints6: pods6,
      loadBalancerIngress: [LB_IP, LB_IP6],
    }),
  );
  await c.writeManifest(
    'ranged.yaml',
    serviceYaml({
      name: 'ranged',
      clusterIP: '10.96.0.31',
      type: 'LoadBalancer',
      externalTrafficPolicy: 'Cluster',
      ports: tcp(RANGED_NODEPORT),
      endpoints: pods,
      loadBalancerIngress: [RANGED_IP],
      extraSpec: { loadBalancerSourceRanges: [`${CLIENT_IP}/32`] },
    }),
  );
  for (const s of [RR, SH, SH_PORT, DH, LC]) await c.writeManifest(`${s.name}.yaml`, serviceYaml(s));
});
t.teardown(async () => {
  await c?.destroy();
});

/** `count` connections from `client` to ip:port, all answered: the pods reached and the peers the client saw. */
async function reached(client: LabClient, ip: string, port: number, count = 40): Promise<{ pods: string[]; peers: string[] }> {
  const r = await client.tcpConnect({ ip, port, count, timeoutMs: 3000, concurrency: 4 });
  if (r.ok !== count) throw new Error(`connections to ${hostPort(ip, port)} failed: ${JSON.stringify(r)}`);
  return { pods: Object.keys(r.byPod).sort(), peers: r.peerNames };
}

/** The pods `count` sequential connections (one at a time) reached, in order. */
async function sequence(ip: string, port: number, count: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < count; i++) out.push(...(await reached(c.client, ip, port, 1)).pods);
  return out;
}

for (const [family, ip] of [
  [4, LB_IP],
  [6, LB_IP6],
] as const) {
  t.test(`IPv${family}: a LoadBalancer ingress IP from outside reaches the Service's pods on both nodes`, async (t) => {
    const r = await reached(c.client, ip, 80);
    t.same(r.pods, BOTH, 'the pod on node1 (DNAT) and the one on node2 (DNAT + SNAT)');
    t.same(r.peers, [hostPort(ip, 80)], 'the client talked to the LoadBalancer IP throughout');
  });
}

t.test(
  'loadBalancerSourceRanges: the client inside the range is served, the one outside is dropped; the NodePort is not restricted',
  async (t) => {
    const inside = await reached(c.client, RANGED_IP, 80);
    t.same(inside.pods, BOTH, `${CLIENT_IP} (inside ${CLIENT_IP}/32) reaches the pods`);
    const before = (await tcCounters(c, 'tc_ingress')).source_denied ?? 0;
    const outside = await client2.tcpConnect({ ip: RANGED_IP, port: 80, count: 2, timeoutMs: 700 });
    t.equal(outside.ok, 0, `${CLIENT2_IP} (outside the range) gets no connection`);
    t.same(Object.keys(outside.errors), ['ETIMEDOUT'], 'its SYNs are dropped, not answered');
    const after = (await tcCounters(c, 'tc_ingress')).source_denied ?? 0;
    t.ok(after > before, `counted as source_denied at tc ingress (${before} -> ${after})`);
    const nodePort = await reached(client2, NODE_IPS.node1, RANGED_NODEPORT);
    t.same(nodePort.pods, BOTH, "the same client through the Service's NodePort: served (the ranges are the LoadBalancer IP's)");
  },
);

/** The algorithm tests' roles in each family: node1's NodePort address and the two clients' addresses. */
const ALGORITHM_FAMILIES = [
  { family: 4, node1: NODE_IPS.node1, client: CLIENT_IP, client2: CLIENT2_IP },
  { family: 6, node1: V6_IPS.node1, client: V6_IPS.client, client2: CLIENT2_IP6 },
] as const;

for (const f of ALGORITHM_FAMILIES) {
  const v = `IPv${f.family}`;

  t.test(`${v}: rr at tc: sequential connections from outside alternate over the two pods`, async (t) => {
    const got = await sequence(f.node1, 30181, 10);
    t.same(
      got,
      got.map((_, i) => got[i % 2]),
      `a fixed alternation: ${got.join(', ')}`,
    );
    t.not(got[0], got[1], 'consecutive connections reach different pods');
  });

  t.test(`${v}: sh at tc: one client address keeps one pod; with lb-source-hash-port its connections spread`, async (t) => {
    const one = await reached(c.client, f.node1, 30182);
    t.equal(one.pods.length, 1, `${f.client}: 40 connections (40 source ports), one pod: ${one.pods.join(', ')}`);
    const two = await reached(client2, f.node1, 30182);
    t.equal(two.pods.length, 1, `${f.client2}: one pod too (${two.pods.join(', ')}; it may or may not be the first client's)`);
    t.same((await reached(c.client, f.node1, 30182, 10)).pods, one.pods, `${f.client} again: its pod`);
    t.same((await reached(c.client, f.node1, 30183)).pods, BOTH, 'the source port hashed too: one client reaches both pods');
  });

  t.test(`${v}: dh at tc: every client of the frontend reaches one and the same pod`, async (t) => {
    const one = await reached(c.client, f.node1, 30184);
    t.equal(one.pods.length, 1, `${f.client}: one pod (${one.pods.join(', ')})`);
    t.same((await reached(client2, f.node1, 30184)).pods, one.pods, `${f.client2}: the same pod`);
  });

  t.test(`${v}: lc at tc: connections held open spread evenly, each new one to the pod with fewer`, async (t) => {
    // Held connections never close during the test, so the counts lc reads are exactly the connections held
    // (short ones would race their own closing FINs). At random, staying even after every second of 16 holds
    // would happen 1 time in 256.
    const held: Array<{ pod: string; stream: number }> = [];
    const counts: Record<string, number> = { 'pod-a': 0, 'pod-b': 0 };
    let uneven = 0;
    for (let i = 0; i < 16; i++) {
      const h = await c.client.udpStreamStart({ ip: f.node1, port: 30185, intervalMs: 1000, timeoutMs: 3000, tcp: true });
      held.push({ pod: h.pod, stream: h.stream! });
      counts[h.pod] = (counts[h.pod] ?? 0) + 1;
      if (Math.abs(counts['pod-a']! - counts['pod-b']!) > 1) uneven++;
    }
    t.equal(uneven, 0, `after every new connection the pods' counts differ by at most 1: ${held.map((h) => h.pod).join(', ')}`);
    t.same(counts, { 'pod-a': 8, 'pod-b': 8 }, '8 and 8');
    for (const h of held) {
      const r = await c.client.udpStreamStop(h.stream);
      t.same([r.errors, r.reconnects], [{}, 0], `the connection held on ${h.pod} ran throughout`);
    }
  });
}
