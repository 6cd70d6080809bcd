// status.loadBalancer.ingress[].ipMode (KEP-1860), from a LoadBalancer
// Service (file source, dual-stack) to real traffic: with ipMode Proxy the
// load balancer terminates the traffic itself, so the node must not
// short-circuit its IP to a backend (kube-proxy leaves such IPs alone, and so
// does Cilium); with ipMode VIP, or none, it is the Service's own address on
// every node and is translated to a backend. The "load balancer" is a
// namespace of this test's that holds the IPs and answers on port 80 itself
// (its echo server names it "lb"); the node routes those IPs to it. A pod
// (the cluster's client pod) and the node itself (a client in the node's
// namespace, where the agent runs) both ask. Every address lives in
// namespaces this test made; every step waits for the agent's sync.
import t, { type Test } from 'tap';
import type { LabClient, LabNs } from '../../lab/index.ts';
import { type Cluster, POD_IPS, POD_IPS6, POD_NAMES, TCP_PORT, startCluster } from './fixtures/cluster.ts';
import type { ServiceSpec } from './fixtures/manifests.ts';

const LB = { 4: '10.99.1.1', 6: 'fd00:99:1::1' } as const;
const LINK = { node: '10.99.0.1', lb: '10.99.0.2', node6: 'fd00:99::1', lb6: 'fd00:99::2' } as const;

function service(ipMode: 'Proxy' | 'VIP' | undefined): ServiceSpec {
  const ingress = (ip: string) => (ipMode ? { ip, ipMode } : ip);
  return {
    name: 'lb',
    clusterIP: '10.96.0.80',
    clusterIP6: 'fd00:10:96::80',
    type: 'LoadBalancer',
    ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: TCP_PORT, nodePort: 30090 }],
    endpoints: POD_IPS.map((ip) => ({ ip })),
    endpoints6: POD_IPS6.map((ip) => ({ ip })),
    loadBalancerIngress: [ingress(LB[4]), ingress(LB[6])],
  };
}

let c: Cluster;
let host: LabClient;

t.before(async () => {
  c = await startCluster([service('Proxy')], { ipv6: true });
  // The load balancer: a namespace behind the node holding both IPs, answering on port 80.
  const lb: LabNs = await c.lab.netns('lb');
  await c.lab.link(c.node, lb, `${LINK.node}/30`, `${LINK.lb}/30`, { names: ['to-lb', 'to-node'] });
  await c.lab.ip(lb, 'addr', 'add', `${LB[4]}/32`, 'dev', 'to-node');
  await c.lab.route(lb, c.node.cidr, LINK.node);
  await c.lab.route(c.node, `${LB[4]}/32`, LINK.lb);
  await c.lab.forward(c.node);
  await c.lab.ipv6(c.node, LINK.node6, { dev: 'to-lb' });
  await c.lab.ipv6(lb, LINK.lb6, { dev: 'to-node', gateway: LINK.node6 });
  await c.lab.ipv6(lb, LB[6], { dev: 'to-node' });
  await c.lab.ip(c.node, '-6', 'route', 'replace', `${LB[6]}/128`, 'via', LINK.lb6);
  await c.lab.sysctl(c.node, 'net.ipv6.conf.all.forwarding', 1);
  await c.lab.echoServer(lb, { tcpPorts: [80] });
  await c.lab.echoServer(lb, { tcpPorts: [80], host: LB[6] });
  host = await c.lab.client(c.node, { cgroup: c.cgroup });
  await c.startAgent([], { inNode: true });
});
t.teardown(async () => {
  await c?.destroy();
});

const CLIENTS = () =>
  [
    ['a pod', c.client],
    ['the node', host],
  ] as const;

/**
 * Enough connections that each of 3 pods answers one: with random choice a pod
 * goes unpicked in 12 connections 2.3% of the time (the 8 checks of a run
 * failed ~1 in 6), in 60 about once in 10^10.
 */
const CONNECTIONS = 60;

/** Connections to the LoadBalancer IP of each family reach `who` only. */
async function answeredBy(t: Test, who: 'lb' | 'backends', what: string): Promise<void> {
  for (const [name, client] of CLIENTS()) {
    for (const family of [4, 6] as const) {
      const r = await client.tcpConnect({ ip: LB[family], port: 80, count: CONNECTIONS, timeoutMs: 2000, concurrency: 4 });
      t.equal(r.ok, CONNECTIONS, `${what}, IPv${family} from ${name}: ${JSON.stringify(r.errors)}`);
      if (who === 'lb') t.same(Object.keys(r.byPod), ['lb'], `${what}, IPv${family} from ${name}: the load balancer answers`);
      else t.same(Object.keys(r.byPod).sort(), POD_NAMES, `${what}, IPv${family} from ${name}: the Service's pods answer`);
    }
  }
}

t.test('ipMode Proxy: the LoadBalancer IP is not translated on the node; the load balancer answers', async (t) => {
  await answeredBy(t, 'lb', 'Proxy');
  const d = c.svcmap('dump');
  t.notMatch(d, /10\.99\.1\.1:80/, 'no frontend for the IPv4 LoadBalancer IP');
  t.notMatch(d, /fd00:99:1::1/, 'nor for the IPv6 one');
  t.match(d, /10\.96\.0\.80:80\/TCP/, 'the ClusterIP is served');
});

t.test('ipMode VIP: the LoadBalancer IP is translated to a backend on the node', async (t) => {
  await c.writeService(service('VIP'));
  await answeredBy(t, 'backends', 'VIP');
});

t.test('ipMode Proxy again: back to the load balancer', async (t) => {
  await c.writeService(service('Proxy'));
  await answeredBy(t, 'lb', 'Proxy again');
});

t.test('no ipMode (VIP by default): translated to a backend', async (t) => {
  await c.writeService(service(undefined));
  await answeredBy(t, 'backends', 'no ipMode');
});
