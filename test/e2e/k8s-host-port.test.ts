// hostPorts from the Kubernetes source: `svcmap agent --kubeconfig` watches
// its node's Pods (field selector spec.nodeName, as the kubelet does) on the
// test API server, and a Pod created through the API maps its hostPorts:
// the cluster's client pod (in the hooks' cgroup) reaches pod-a through the
// node's addresses of both families, TCP and UDP (socket LB). A Pod of
// another node is not this node's business; a hostPort inside the NodePort
// range gets a HostPortIgnored Event on its Pod; deleting the Pod removes
// its mappings. Every address lives in namespaces this test made.
import t, { type Test } from 'tap';
import { type ApiServer, pod, waitFor } from '../../lab/apiserver/index.ts';
import type { LabClient } from '../../lab/index.ts';
import { type Cluster, NODE_IP, NODE_IP6, POD_IPS, POD_IPS6, TCP_PORT, UDP_PORT } from './fixtures/cluster.ts';
import { type K8sCluster, startK8sCluster } from './fixtures/k8s-cluster.ts';

const TCP_HP = 8081;
const UDP_HP = 5354;
const OTHER_HP = 8082;
const IN_RANGE = 30080;

const nodeObject = {
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name: 'node' },
  status: {
    addresses: [
      { type: 'InternalIP', address: NODE_IP },
      { type: 'InternalIP', address: NODE_IP6 },
    ],
  },
};

let c: Cluster;
let server: ApiServer;
let k8s: K8sCluster | undefined;
let client: LabClient;
t.before(async () => {
  k8s = await startK8sCluster([nodeObject], { ipv6: true });
  ({ c, server } = k8s);
  client = c.client;
});
t.teardown(async () => {
  await k8s?.destroy();
});

/** Creates or deletes through the API and waits for the agent's next sync. */
async function synced(change: () => void): Promise<void> {
  const from = c.agent.mark();
  change();
  await c.agent.waitForSync(from);
}

async function refused(t: Test, ip: string, port: number, what: string): Promise<void> {
  const r = await client.tcpConnect({ ip, port, count: 2, timeoutMs: 2000 });
  t.same(r.errors, { ECONNREFUSED: 2 }, `${what}: refused (not translated)`);
}

t.test("a Pod of this node created through the API: its hostPorts reach it on the node's addresses", async (t) => {
  await synced(() => {
    server.create(
      pod('pod-a', {
        nodeName: 'node',
        podIPs: [POD_IPS[0]!, POD_IPS6[0]!],
        ports: [
          { containerPort: TCP_PORT, hostPort: TCP_HP },
          { containerPort: UDP_PORT, hostPort: UDP_HP, protocol: 'UDP' },
          { containerPort: TCP_PORT, hostPort: IN_RANGE },
        ],
      }),
    );
    server.create(pod('elsewhere', { nodeName: 'other', podIPs: [POD_IPS[1]!], ports: [{ containerPort: TCP_PORT, hostPort: OTHER_HP }] }));
  });
  for (const ip of [NODE_IP, NODE_IP6]) {
    const r = await client.tcpConnect({ ip, port: TCP_HP, count: 10, timeoutMs: 2000, concurrency: 2 });
    t.equal(r.ok, 10, `${ip}: TCP ${JSON.stringify(r.errors)}`);
    t.same(Object.keys(r.byPod), ['pod-a'], `${ip}: TCP reaches pod-a`);
    const u = await client.udpSend({ ip, port: UDP_HP, count: 5, connected: false, timeoutMs: 2000 });
    t.equal(u.ok, 5, `${ip}: UDP ${JSON.stringify(u.errors)}`);
    t.same(Object.keys(u.byPod), ['pod-a'], `${ip}: UDP reaches pod-a`);
  }
  await refused(t, NODE_IP, OTHER_HP, "another node's Pod");
  await refused(t, NODE_IP, IN_RANGE, 'the hostPort inside the NodePort range');
});

t.test('the hostPort inside the NodePort range: a HostPortIgnored Event on the Pod', async (t) => {
  const uid = server.get('Pod', 'default', 'pod-a')!.metadata.uid;
  const ignored = () =>
    server
      .list('Event', 'default')
      .filter((e) => e['reason'] === 'HostPortIgnored' && (e['regarding'] as { name?: string }).name === 'pod-a');
  await waitFor(() => ignored().length > 0, 'a HostPortIgnored Event');
  const [e] = ignored();
  t.match(e!['note'], /spec\.containers\[0\]\.ports\[2\]\.hostPort: 30080 is inside the NodePort range 30000-32767/);
  t.same(e!['regarding'], { apiVersion: 'v1', kind: 'Pod', namespace: 'default', name: 'pod-a', uid });
  t.equal(e!['type'], 'Warning');
});

t.test('the Pod deleted: its hostPorts are gone', async (t) => {
  await synced(() => server.delete('Pod', 'default', 'pod-a'));
  await refused(t, NODE_IP, TCP_HP, 'IPv4');
  await refused(t, NODE_IP6, TCP_HP, 'IPv6');
});
