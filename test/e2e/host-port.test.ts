// A Pod's hostPort served natively (no portmap, no iptables), from a Pod
// object in the file source to real traffic: pod-a on node1 maps TCP 8080
// to hostPort 8081 and UDP 5353 to 5354 (hostIP "", both families), and
// asks for hostPort 30080, inside the NodePort range, which is ignored.
//  - from outside (a client on node1's network): node1's addresses of both
//    families, translated by tc on eth0; the Pod sees the client's own
//    address, as with portmap;
//  - from the node itself (a client in node1's namespace, where the agent
//    runs, in the hooks' cgroup): node1's addresses and 127.0.0.1 / [::1],
//    translated by the socket LB;
//  - from a pod in the hooks' cgroup: node1's address is served, its own
//    127.0.0.1 is its own loopback (not translated: refused).
// Every address lives in namespaces this test made; every step waits for the
// agent's log.
import t, { type Test } from 'tap';
import { stringify } from 'yaml';
import type { Lab, LabClient, LabNode } from '../../lab/index.ts';
import { nodeObject } from './fixtures/manifests.ts';
import {
  CLIENT_IP,
  NODE1_POD as POD,
  NODE_IPS,
  type NodeAgent,
  V6_IPS as V6,
  oneDualStackNode,
  startNodeAgent,
} from './fixtures/tc-nodes.ts';

const TCP_HP = 8081;
const UDP_HP = 5354;
const IN_RANGE = 30080;

/** pod-a as the kubelet would report it: Running on node1, both IPs, three hostPorts. */
const podObject = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'pod-a', namespace: 'default', creationTimestamp: '2026-01-01T00:00:00Z' },
  spec: {
    nodeName: 'node1',
    containers: [
      {
        name: 'echo',
        image: 'echo',
        ports: [
          { containerPort: 8080, hostPort: TCP_HP },
          { containerPort: 5353, hostPort: UDP_HP, protocol: 'UDP' },
          { containerPort: 8080, hostPort: IN_RANGE, name: 'in-range' },
        ],
      },
    ],
  },
  status: { phase: 'Running', podIP: POD.ip, podIPs: [{ ip: POD.ip }, { ip: POD.ip6 }] },
};
/** Another Pod (pod-a's address stands in for its own) whose hostPort is on 127.0.0.1 only: the node's loopback. */
const LOOPBACK_HP = 9091;
const loopbackPod = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'loopback-only', namespace: 'default', creationTimestamp: '2026-01-01T00:00:00Z' },
  spec: {
    nodeName: 'node1',
    containers: [{ name: 'echo', image: 'echo', ports: [{ containerPort: 8080, hostPort: LOOPBACK_HP, hostIP: '127.0.0.1' }] }],
  },
  status: { phase: 'Running', podIPs: [{ ip: POD.ip }] },
};
const manifest = [podObject, loopbackPod, nodeObject('node1', [NODE_IPS.node1, V6.node1])].map((d) => stringify(d)).join('---\n');

let lab: Lab;
let node: LabNode;
let outside: LabClient;
let host: LabClient;
let podClient: LabClient;
let agent: NodeAgent | undefined;
let cgroup: string;

t.before(async () => {
  const one = await oneDualStackNode();
  lab = one.lab;
  node = one.node;
  await lab.echoServer(one.pod, { udpPorts: [5353] });
  await lab.echoServer(one.pod, { udpPorts: [5353], host: POD.ip6 });
  cgroup = await lab.cgroup('node1');
  outside = await lab.client(one.clientPod);
  host = await lab.client(node, { cgroup });
  podClient = await lab.client(one.pod, { cgroup });
  agent = await startNodeAgent(lab, node, 'node1', { 'pod.yaml': manifest }, [], { cgroup });
});

t.teardown(async () => {
  try {
    await agent?.stop();
  } finally {
    await lab?.destroy();
  }
});

/** TCP to ip:8081 and UDP to ip:5354 reach pod-a; `from`: the client address pod-a must see (undefined: not checked). */
async function served(t: Test, client: LabClient, ip: string, what: string, from?: string): Promise<void> {
  const r = await client.tcpConnect({ ip, port: TCP_HP, count: 10, timeoutMs: 2000, concurrency: 2 });
  t.equal(r.ok, 10, `${what}: TCP ${JSON.stringify(r.errors)}`);
  t.same(Object.keys(r.byPod), ['pod-a'], `${what}: TCP reaches pod-a`);
  if (from) t.same(r.seenFrom, [from], `${what}: pod-a sees the client's own address`);
  const u = await client.udpSend({ ip, port: UDP_HP, count: 5, connected: false, timeoutMs: 2000 });
  t.equal(u.ok, 5, `${what}: UDP ${JSON.stringify(u.errors)}`);
  t.same(Object.keys(u.byPod), ['pod-a'], `${what}: UDP reaches pod-a`);
  const cu = await client.udpSend({ ip, port: UDP_HP, count: 5, connected: true, timeoutMs: 2000 });
  t.equal(cu.ok, 5, `${what}: connected UDP ${JSON.stringify(cu.errors)}`);
}

async function refused(t: Test, client: LabClient, ip: string, port: number, what: string): Promise<void> {
  const r = await client.tcpConnect({ ip, port, count: 2, timeoutMs: 2000 });
  t.same(r.errors, { ECONNREFUSED: 2 }, `${what}: refused (not translated)`);
  t.same(r.byPod, {}, `${what}: no pod reached`);
}

t.test('from outside: both of node1 addresses, TCP and UDP, through tc; the client address kept', async (t) => {
  await served(t, outside, NODE_IPS.node1, 'IPv4 node address', CLIENT_IP);
  await served(t, outside, V6.node1, 'IPv6 node address', V6.client);
});

t.test("from the node's own namespace: its addresses and 127.0.0.1 / [::1], through the socket LB", async (t) => {
  await served(t, host, NODE_IPS.node1, 'IPv4 node address');
  await served(t, host, V6.node1, 'IPv6 node address');
  await served(t, host, '127.0.0.1', '127.0.0.1');
  await served(t, host, '::1', '[::1]');
});

t.test("from a pod: the node's address is served, the pod's own loopback is its own", async (t) => {
  await served(t, podClient, NODE_IPS.node1, 'IPv4 node address');
  await refused(t, podClient, '127.0.0.1', TCP_HP, "the pod's 127.0.0.1");
});

t.test('hostIP 127.0.0.1: the node reaches it there; a pod and the outside do not', async (t) => {
  const r = await host.tcpConnect({ ip: '127.0.0.1', port: LOOPBACK_HP, count: 5, timeoutMs: 2000 });
  t.equal(r.ok, 5, `from the node: ${JSON.stringify(r.errors)}`);
  t.same(Object.keys(r.byPod), ['pod-a']);
  await refused(t, host, NODE_IPS.node1, LOOPBACK_HP, "the node's own address (not the hostIP)");
  await refused(t, podClient, '127.0.0.1', LOOPBACK_HP, "a pod's 127.0.0.1");
  await refused(t, outside, NODE_IPS.node1, LOOPBACK_HP, 'the node address from outside');
});

t.test("--localhost-nodeports=false is about NodePorts: the node's 127.0.0.1:hostPort is still served", async (t) => {
  await agent!.stop();
  agent = undefined;
  agent = await startNodeAgent(lab, node, 'node1', { 'pod.yaml': manifest }, ['--localhost-nodeports=false'], { cgroup });
  await served(t, host, '127.0.0.1', '127.0.0.1');
  await served(t, host, '::1', '[::1]');
  await served(t, outside, NODE_IPS.node1, 'IPv4 node address from outside', CLIENT_IP);
});

t.test('a hostPort inside the NodePort range is ignored, with a warning naming the field', async (t) => {
  await refused(t, outside, NODE_IPS.node1, IN_RANGE, 'IPv4 node address:30080');
  await refused(t, host, '127.0.0.1', IN_RANGE, '127.0.0.1:30080');
  const line = agent!.agent.lines.find((l) => typeof l.msg === 'string' && /inside the NodePort range/.test(l.msg));
  t.ok(line, 'the agent logged the ignored hostPort');
  t.match(line?.msg, /Pod default\/pod-a: spec\.containers\[0\]\.ports\[2\]\.hostPort: 30080 is inside the NodePort range 30000-32767/);
});

t.test('the Pod removed from the manifests: its hostPorts are gone', async (t) => {
  await agent!.writeManifest('pod.yaml', stringify(nodeObject('node1', [NODE_IPS.node1, V6.node1])));
  await refused(t, outside, NODE_IPS.node1, TCP_HP, 'IPv4 node address from outside');
  await refused(t, host, '127.0.0.1', TCP_HP, '127.0.0.1 from the node');
});
