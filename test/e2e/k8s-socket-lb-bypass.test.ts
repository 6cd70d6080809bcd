// svcmap.io/socket-lb from the Kubernetes source, with veth translation off
// (the agent's default without --veth-lb): `svcmap agent --kubeconfig`
// watches its node's Pods and the Namespaces on the test API server. A Pod
// asked to bypass the socket LB, by itself or by its Namespace, keeps it
// (its traffic would otherwise leave untranslated) and gets a
// SocketLbBypassIgnored Event naming the flag to set; a host-network Pod is
// the node's own sockets and gets none. The bypass itself, with veth
// translation on, is test/e2e/socket-lb-bypass.test.ts.
import t from 'tap';
import { type ApiServer, pod, waitFor } from '../../lab/apiserver/index.ts';
import type { StatusReport } from '../../src/cli/status.ts';
import { type Cluster, NODE_IP, POD_IPS } from './fixtures/cluster.ts';
import { type K8sCluster, startK8sCluster } from './fixtures/k8s-cluster.ts';

const nodeObject = {
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name: 'node' },
  status: { addresses: [{ type: 'InternalIP', address: NODE_IP }] },
};

let c: Cluster;
let server: ApiServer;
let k8s: K8sCluster | undefined;
t.before(async () => {
  k8s = await startK8sCluster([nodeObject]);
  ({ c, server } = k8s);
});
t.teardown(async () => {
  await k8s?.destroy();
});

const ignored = (namespace: string, name: string) =>
  server
    .list('Event', namespace)
    .filter((e) => e['reason'] === 'SocketLbBypassIgnored' && (e['regarding'] as { name?: string }).name === name);

const status = (): StatusReport => JSON.parse(c.svcmap('status', '-o', 'json')) as StatusReport;

t.test("a Namespace's bypass without veth translation: an Event on each of its Pods names the flag", async (t) => {
  server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'mesh', annotations: { 'svcmap.io/socket-lb': 'bypass' } } });
  server.create({ ...pod('app', { nodeName: 'node', podIPs: [POD_IPS[0]!] }), metadata: { name: 'app', namespace: 'mesh' } });
  await waitFor(() => ignored('mesh', 'app').length > 0, 'a SocketLbBypassIgnored Event on mesh/app');
  const [e] = ignored('mesh', 'app');
  t.match(e!['note'], /metadata\.annotations\[svcmap\.io\/socket-lb\]: bypass \(from its Namespace mesh\) needs per-packet translation/);
  t.match(e!['note'], /--veth-lb \(chart value socketLB\.vethTranslation: true\)/);
  t.equal(e!['type'], 'Warning');
  t.same(status().socketLbBypass, [], 'no Pod bypasses: it keeps the socket LB');
});

t.test("a Pod's own bypass: the Event says it came from the Pod; a host-network Pod gets none", async (t) => {
  // The host-network Pod first: by the time the other's Event is there, the agent has judged it.
  const host = pod('host', { nodeName: 'node', podIPs: [NODE_IP], hostNetwork: true });
  server.create({ ...host, metadata: { name: 'host', annotations: { 'svcmap.io/socket-lb': 'bypass' } } });
  const own = pod('own', { nodeName: 'node', podIPs: [POD_IPS[1]!] });
  server.create({ ...own, metadata: { name: 'own', annotations: { 'svcmap.io/socket-lb': 'bypass' } } });
  await waitFor(() => ignored('default', 'own').length > 0, 'a SocketLbBypassIgnored Event on default/own');
  t.match(ignored('default', 'own')[0]!['note'], /bypass \(from the Pod\) needs per-packet translation/);
  t.same(ignored('default', 'host'), [], 'the host-network Pod keeps the socket LB without a word');
  t.same(status().socketLbBypass, []);
});
