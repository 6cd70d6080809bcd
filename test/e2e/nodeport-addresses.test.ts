// --nodeport-addresses from outside the node (tc), as a client on the
// node's network sees it: a dual-stack NodePort Service (file source) whose
// one endpoint runs on node1, and node1 holding two addresses of each family
// on eth0: its InternalIP (the Node object's) and a second one. By default
// every address of the node serves the NodePort; with CIDRs only those
// inside them, and with primary only the Node's first address of each
// family: a connection to the other address is not translated, reaches
// node1's own stack, where nothing listens, and is refused. The agent runs
// in node1's namespace (tc on eth0) and is restarted with each setting.
// Every address lives in namespaces this test made.
import t, { type Test } from 'tap';
import { stringify } from 'yaml';
import type { Lab, LabClient, LabNode } from '../../lab/index.ts';
import { type ServiceSpec, nodeObject, serviceObject, sliceObject } from './fixtures/manifests.ts';
import { NODE1_POD as POD, NODE_IPS, type NodeAgent, V6_IPS as V6, oneDualStackNode, startNodeAgent } from './fixtures/tc-nodes.ts';

const NODE_PORT = 30082;
/** node1's second address of each family, on eth0 beside the InternalIP. */
const SECOND = { 4: '192.168.100.21', 6: 'fd00:192:168:100::21' } as const;
const FAMILIES = [
  { family: 4, node: NODE_IPS.node1, second: SECOND[4] },
  { family: 6, node: V6.node1, second: SECOND[6] },
] as const;

const svc: ServiceSpec = {
  name: 'np',
  clusterIP: '10.96.0.12',
  clusterIP6: 'fd00:10:96::12',
  type: 'NodePort',
  externalTrafficPolicy: 'Cluster',
  ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: NODE_PORT }],
  endpoints: [{ ip: POD.ip, nodeName: 'node1' }],
  endpoints6: [{ ip: POD.ip6, nodeName: 'node1' }],
};
const manifest = [
  serviceObject(svc),
  sliceObject(svc),
  sliceObject(svc, 'v6abc', svc.endpoints6, 'IPv6'),
  nodeObject('node1', [NODE_IPS.node1, V6.node1]),
]
  .map((d) => stringify(d))
  .join('---\n');

let lab: Lab;
let node: LabNode;
let client: LabClient;
let agent: NodeAgent | undefined;
/** The socket hooks' cgroup, one for every agent this test starts on node1. */
let cgroup: string;

t.before(async () => {
  const one = await oneDualStackNode();
  lab = one.lab;
  node = one.node;
  await lab.ip(node, 'addr', 'add', `${SECOND[4]}/24`, 'dev', 'eth0');
  await lab.ipv6(node, SECOND[6], { dev: 'eth0' });
  client = await lab.client(one.clientPod);
  cgroup = await lab.cgroup('node1');
});

t.teardown(async () => {
  try {
    await agent?.stop();
  } finally {
    await lab?.destroy();
  }
});

/** (Re)starts node1's agent with these flags and waits for its first sync after it saw the node's addresses. */
async function startAgent(flags: string[]): Promise<void> {
  await agent?.stop();
  agent = await startNodeAgent(lab, node, 'node1', { 'np.yaml': manifest }, flags, { cgroup });
  const seen = await agent.agent.waitFor((l) => l.msg === "the node's addresses" && (l.addresses as string[]).includes(SECOND[6]), {
    what: "the agent seeing node1's addresses",
  });
  await agent.agent.waitForSync(agent.agent.lines.indexOf(seen) + 1);
}

async function served(t: Test, ip: string, what: string): Promise<void> {
  const r = await client.tcpConnect({ ip, port: NODE_PORT, count: 10, timeoutMs: 2000, concurrency: 2 });
  t.equal(r.ok, 10, `${what}: ${JSON.stringify(r.errors)}`);
  t.same(Object.keys(r.byPod), ['pod-a'], `${what}: the pod answers`);
}

async function notServed(t: Test, ip: string, what: string): Promise<void> {
  const r = await client.tcpConnect({ ip, port: NODE_PORT, count: 2, timeoutMs: 2000 });
  t.same(r.errors, { ECONNREFUSED: 2 }, `${what}: refused by node1's own stack (not translated)`);
}

t.test('no --nodeport-addresses: both addresses of node1 serve the NodePort from outside', async (t) => {
  await startAgent([]);
  for (const f of FAMILIES) {
    await served(t, f.node, `IPv${f.family}: the InternalIP`);
    await served(t, f.second, `IPv${f.family}: the second address`);
  }
});

t.test('--nodeport-addresses with CIDRs of both families: the address inside serves, the one outside does not', async (t) => {
  await startAgent(['--nodeport-addresses', `${NODE_IPS.node1}/32,${V6.node1}/128`]);
  for (const f of FAMILIES) {
    await served(t, f.node, `IPv${f.family}: the InternalIP (inside)`);
    await notServed(t, f.second, `IPv${f.family}: the second address (outside)`);
  }
});

t.test('--nodeport-addresses with an IPv4 CIDR only: IPv4 narrowed, IPv6 keeps every address (as kube-proxy)', async (t) => {
  await startAgent(['--nodeport-addresses', `${SECOND[4]}/32`]);
  await served(t, SECOND[4], 'IPv4: the second address (inside)');
  await notServed(t, NODE_IPS.node1, 'IPv4: the InternalIP (outside)');
  await served(t, V6.node1, 'IPv6: the InternalIP');
  await served(t, SECOND[6], 'IPv6: the second address');
});

t.test("--nodeport-addresses primary: the Node's InternalIPs only", async (t) => {
  await startAgent(['--nodeport-addresses', 'primary']);
  for (const f of FAMILIES) {
    await served(t, f.node, `IPv${f.family}: the InternalIP`);
    await notServed(t, f.second, `IPv${f.family}: the second address`);
  }
});
