// A service mesh's sidecar on the real cluster (make e2e): a pod whose init
// container installs the sidecar's iptables REDIRECT of its outgoing TCP to
// a local proxy, and the proxy (labtool proxy) that reads SO_ORIGINAL_DST and
// connects onward to it. With the socket LB for every socket (the chart's
// default) the application's connect() to the ClusterIP is rewritten before
// the pod's iptables see it: the proxy sees a pod IP. With
// socketLB.mode=host-only the pod's sockets are left alone: the proxy sees
// the ClusterIP, and its onward connection is balanced per packet at the
// pod's veth over the Service's backends; the node's own processes keep the
// socket LB. Back on the socket LB for all, the mesh's namespace annotated
// svcmap.io/socket-lb: bypass: its meshed pod's proxy sees the ClusterIP
// again, while the same pod in a namespace outside still sees a pod IP.
// Both families.
import t, { type Test } from 'tap';
import { waitUntil } from '../../lab/cluster/component.ts';
import { CHART, Helm } from '../../lab/cluster/helm.ts';
import { NAMESPACE, RELEASE, helmFor, installSvcmap, splitRef, waitAgentsReady } from '../../lab/cluster/svcmap.ts';
import { labClusterWithImages, svcmapStatus } from './fixtures/lab-svcmap.ts';
import { MESH_NS, OUTSIDE_NS, WEB, meshWorkloads } from './fixtures/mesh.ts';

const { cluster, ref } = await labClusterWithImages(t);
const k = cluster.kubectl;

interface ProxyLine {
  orig: string;
  backend?: string;
  error?: string;
}

/** The application (of the meshed pod in namespace ns) connects to the Service (count connections); what the proxy told it for each. */
async function throughProxy(ip: string, count: number, ns = MESH_NS): Promise<ProxyLine[]> {
  const out = await k.run(['-n', ns, 'exec', 'meshed', '-c', 'app', '--', '/labtool', 'tcp', ip, String(WEB.port), String(count)], {
    timeoutMs: 120_000,
  });
  return out
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => JSON.parse(l) as ProxyLine);
}

const hostPort = (ip: string, port: number) => (ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`);

let clusterIPs: string[] = [];
let backends: { names: string[]; ips: string[] } = { names: [], ips: [] };

t.test('svcmap installed (socket LB for all sockets), the mesh workloads running', async (t) => {
  await installSvcmap(cluster, splitRef(ref('svcmap')));
  await k.apply(meshWorkloads(ref('labtool')));
  await k.run(['-n', MESH_NS, 'rollout', 'status', `deployment/${WEB.name}`, '--timeout=120s'], { timeoutMs: 130_000 });
  for (const [ns, pod] of [
    [MESH_NS, 'meshed'],
    [MESH_NS, 'hostnet'],
    [OUTSIDE_NS, 'meshed'],
  ] as const)
    await k.run(['-n', ns, 'wait', '--for=condition=Ready', `pod/${pod}`, '--timeout=120s'], { timeoutMs: 130_000 });
  clusterIPs = (await k.json<{ spec: { clusterIPs: string[] } }>(['-n', MESH_NS, 'get', 'service', WEB.name])).spec.clusterIPs;
  const pods = await k.json<{ items: Array<{ metadata: { name: string }; status: { podIPs?: Array<{ ip: string }> } }> }>([
    '-n',
    MESH_NS,
    'get',
    'pods',
    '-l',
    `app=${WEB.name}`,
  ]);
  backends = {
    names: pods.items.map((p) => p.metadata.name).sort(),
    ips: pods.items.flatMap((p) => (p.status.podIPs ?? []).map((a) => a.ip)),
  };
  t.equal(clusterIPs.length, 2, `a ClusterIP of each family: ${clusterIPs.join(', ')}`);
  t.equal(backends.names.length, WEB.replicas);
});

t.test("socket LB for all: the connection is rewritten before the pod's iptables, the proxy sees a pod IP", async (t) => {
  for (const ip of clusterIPs) {
    const seen = await throughProxy(ip, 10);
    t.equal(seen.length, 10, `IPv${ip.includes(':') ? 6 : 4}: 10 connections through the proxy`);
    t.same(
      seen.filter((l) => l.error),
      [],
      'no proxy errors',
    );
    const origs = new Set(seen.map((l) => l.orig));
    t.notOk(origs.has(hostPort(ip, WEB.port)), `the proxy never saw the ClusterIP ${ip}`);
    t.ok(
      [...origs].every((o) => backends.ips.some((b) => o === hostPort(b, WEB.target))),
      `the proxy saw backend pod addresses: ${[...origs].join(', ')}`,
    );
  }
});

/** 30 connections through the mesh pod's proxy to ClusterIP ip: the proxy saw the
 * ClusterIP (no socket LB for it) and its onward connections were balanced over the
 * Service's backends (translated at the veth). */
async function proxySawClusterIP(t: Test, ip: string): Promise<void> {
  const seen = await throughProxy(ip, 30);
  t.equal(seen.length, 30, `IPv${ip.includes(':') ? 6 : 4}: 30 connections through the proxy`);
  t.same(
    seen.filter((l) => l.error),
    [],
    'no proxy errors',
  );
  t.same([...new Set(seen.map((l) => l.orig))], [hostPort(ip, WEB.port)], 'SO_ORIGINAL_DST is the ClusterIP');
  const reached = new Set(seen.map((l) => l.backend));
  t.ok(reached.size >= 2, `the onward connections reached ${reached.size} backends: ${[...reached].join(', ')}`);
  t.ok(
    [...reached].every((b) => backends.names.includes(b!)),
    'each a backend of the Service',
  );
}

t.test('socketLB.mode=host-only: the proxy sees the ClusterIP and its onward connections are balanced at the veth', async (t) => {
  await helmFor(cluster).run([
    'upgrade',
    RELEASE,
    CHART,
    '-n',
    NAMESPACE,
    '--reuse-values',
    ...Helm.sets({ 'socketLB.mode': 'host-only' }),
  ]);
  await waitAgentsReady(cluster);
  for (const ip of clusterIPs) {
    await proxySawClusterIP(t, ip);
  }
  for (const n of cluster.nodes) {
    const status = await svcmapStatus<{ socketLb: string; veths: string[] }>(n);
    t.equal(status.socketLb, 'host-only', `${n.name}: svcmap status says host-only`);
    t.ok(status.veths.length > 0, `${n.name}: programs on the pods' veths (${status.veths.join(', ')})`);
  }
});

t.test("host-only: the node's own sockets (a host-network pod) keep the socket LB", async (t) => {
  for (const ip of clusterIPs) {
    const out = await k.run(['-n', MESH_NS, 'exec', 'hostnet', '--', '/labtool', 'tcp', ip, String(WEB.port), '5'], { timeoutMs: 60_000 });
    const names = out
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
    t.equal(names.length, 5, `the host-network pod reaches ${ip}`);
    t.ok(
      names.every((n) => backends.names.includes(n)),
      'each answer from a backend',
    );
  }
  const node = (await k.json<{ spec: { nodeName: string } }>(['-n', MESH_NS, 'get', 'pod', 'hostnet'])).spec.nodeName;
  const n = cluster.nodes.find((x) => x.name === node)!;
  const status = await svcmapStatus<{ counters: Array<{ hook: string; reason: string; packets: number }> }>(n);
  const translated = status.counters.filter((c) => (c.hook === 'connect4' || c.hook === 'connect6') && c.reason === 'translated');
  t.ok(translated.length > 0, `${node}: the socket LB translated connect()s (${JSON.stringify(translated)})`);
});

/** What svcmap status says on the node of pod ns/name. */
async function statusOfNodeOf(
  ns: string,
  name: string,
): Promise<{ socketLb: string; socketLbBypass: Array<{ pod: string; cgroupId: string }> }> {
  const node = (await k.json<{ spec: { nodeName: string } }>(['-n', ns, 'get', 'pod', name])).spec.nodeName;
  const n = cluster.nodes.find((x) => x.name === node)!;
  return svcmapStatus(n);
}

t.test('socket LB for all, the mesh namespace annotated bypass: its proxy sees the ClusterIP, a pod outside still a pod IP', async (t) => {
  await helmFor(cluster).run(['upgrade', RELEASE, CHART, '-n', NAMESPACE, '--reuse-values', ...Helm.sets({ 'socketLB.mode': 'all' })]);
  await waitAgentsReady(cluster);
  await k.run(['annotate', 'namespace', MESH_NS, 'svcmap.io/socket-lb=bypass']);
  // The agent on the meshed pod's node has found the pod's cgroup.
  await waitUntil(
    `the bypass of ${MESH_NS}/meshed on its node`,
    async () => (await statusOfNodeOf(MESH_NS, 'meshed')).socketLbBypass.some((b) => b.pod === `${MESH_NS}/meshed`),
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  const status = await statusOfNodeOf(MESH_NS, 'meshed');
  t.equal(status.socketLb, 'all', 'the node-wide mode is all');
  t.notOk(
    status.socketLbBypass.some((b) => b.pod.startsWith(`${OUTSIDE_NS}/`) || b.pod === `${MESH_NS}/hostnet`),
    `only the mesh namespace's pod-network pod bypasses: ${JSON.stringify(status.socketLbBypass)}`,
  );
  for (const ip of clusterIPs) {
    await proxySawClusterIP(t, ip);
    const outside = await throughProxy(ip, 10, OUTSIDE_NS);
    t.equal(outside.length, 10);
    t.ok(
      outside.every((l) => !l.error && backends.ips.some((b) => l.orig === hostPort(b, WEB.target))),
      `outside the namespace the proxy sees pod addresses: ${[...new Set(outside.map((l) => l.orig))].join(', ')}`,
    );
  }
});
