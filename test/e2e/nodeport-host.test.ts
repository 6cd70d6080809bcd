// NodePorts for the node's own processes (a host-network pod, a process on
// the node): the socket LB serves a NodePort Service (file source,
// dual-stack, TCP and UDP) on every address of the node and on 127.0.0.1
// and [::1], and bind protection keeps those processes off its ports. The
// "node" is the cluster's node namespace: it holds the Node object's
// InternalIPs (its pod bridge's addresses), the agent runs in it, and a
// host client runs in it too, in the hooks' cgroup; the pod client (the
// cluster's client pod, in the same cgroup) is a pod on that node. The
// agent is restarted with each setting: localhost NodePorts on (kube-proxy's
// default) then off, bind protection on (the default) then off, and
// --nodeport-addresses with CIDRs and with primary. Every address lives in
// namespaces this test made; every step waits for the agent's log.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { stringify } from 'yaml';
import { hostPort } from '../../lab/protocol.ts';
import type { LabClient } from '../../lab/index.ts';
import { parseSamples } from '../../bench/prom.ts';
import { type Cluster, NODE_IP, NODE_IP6, POD_IPS, POD_IPS6, POD_NAMES, TCP_PORT, UDP_PORT, startCluster } from './fixtures/cluster.ts';
import { type ServiceSpec, nodeObject } from './fixtures/manifests.ts';

const TCP_NP = 30080;
const UDP_NP = 30053;
const svc: ServiceSpec = {
  name: 'np',
  clusterIP: '10.96.0.70',
  clusterIP6: 'fd00:10:96::70',
  type: 'NodePort',
  ports: [
    { name: 'tcp', protocol: 'TCP', port: 80, targetPort: TCP_PORT, nodePort: TCP_NP },
    { name: 'udp', protocol: 'UDP', port: 53, targetPort: UDP_PORT, nodePort: UDP_NP },
  ],
  endpoints: POD_IPS.map((ip) => ({ ip })),
  endpoints6: POD_IPS6.map((ip) => ({ ip })),
};
/** A second address of the node, beside the InternalIP on its bridge (not in the Node object): added while the agent runs. */
const SECOND = { 4: '192.0.2.10', 6: 'fd00:192:0:2::10' } as const;
const FAMILIES = [
  { family: 4, node: NODE_IP, second: SECOND[4], loopback: '127.0.0.1', any: '0.0.0.0' },
  { family: 6, node: NODE_IP6, second: SECOND[6], loopback: '::1', any: '::' },
] as const;

let c: Cluster;
let host: LabClient;

/** (Re)starts the agent in the node's namespace with these flags, and waits for its first sync. */
async function agent(flags: string[] = []): Promise<void> {
  c.agent.kill('SIGTERM');
  await c.agent.exited;
  await c.startAgent(flags, { inNode: true });
}

t.before(async () => {
  c = await startCluster([svc], { ipv6: true });
  writeFileSync(join(c.manifests, 'node.yaml'), stringify(nodeObject('node', [NODE_IP, NODE_IP6])));
  host = await c.lab.client(c.node, { cgroup: c.cgroup });
  await c.startAgent([], { inNode: true });
});
t.teardown(async () => {
  await c?.destroy();
});

/** TCP and UDP to ip's NodePorts reach the three pods, showing ip:NodePort as the peer. */
async function served(t: Test, client: LabClient, ip: string, what: string): Promise<void> {
  const r = await client.tcpConnect({ ip, port: TCP_NP, count: 30, timeoutMs: 2000, concurrency: 4 });
  t.equal(r.ok, 30, `${what}: TCP ${JSON.stringify(r.errors)}`);
  t.same(Object.keys(r.byPod).sort(), POD_NAMES, `${what}: every pod answers`);
  t.same(r.peerNames, [hostPort(ip, TCP_NP)], `${what}: getpeername shows the address asked`);
  const u = await client.udpSend({ ip, port: UDP_NP, count: 10, connected: false, timeoutMs: 2000 });
  t.equal(u.ok, 10, `${what}: UDP ${JSON.stringify(u.errors)}`);
  t.same(u.replySources, [hostPort(ip, UDP_NP)], `${what}: UDP replies come from the address asked`);
}

/** Nothing translates ip's TCP NodePort: nothing listens there, so the connection is refused. */
async function notServed(t: Test, client: LabClient, ip: string, what: string): Promise<void> {
  const r = await client.tcpConnect({ ip, port: TCP_NP, count: 2, timeoutMs: 2000 });
  t.same(r.errors, { ECONNREFUSED: 2 }, `${what}: refused, not translated`);
  t.same(r.byPod, {}, `${what}: no pod reached`);
}

/** The agent's datapath counters for bind4/bind6 on /metrics (fetched inside the node, where it serves them). */
async function bindCounters(): Promise<Record<string, number>> {
  const up = await c.agent.waitFor((l) => l.msg === 'serving metrics and health', { what: 'metrics port' });
  const text = await c.lab.exec(c.node, process.execPath, [
    '-e',
    `fetch('http://127.0.0.1:${String(up.metricsPort)}/metrics').then(async (r) => console.log(await r.text()))`,
  ]);
  const out: Record<string, number> = {};
  for (const s of parseSamples(text))
    if (s.name === 'svcmap_datapath_packets_total' && s.labels.hook?.startsWith('bind'))
      out[`${s.labels.hook}/${s.labels.reason}`] = s.value;
  return out;
}

t.test('localhost NodePorts (the default): 127.0.0.1 and [::1] from the node reach the pods, TCP and UDP', async (t) => {
  for (const f of FAMILIES) {
    await served(t, host, f.node, `IPv${f.family}: the node's InternalIP`);
    await served(t, host, f.loopback, `IPv${f.family}: ${f.loopback}`);
  }
});

t.test('a loopback port that is no NodePort is untouched', async (t) => {
  const r = await host.tcpConnect({ ip: '127.0.0.1', port: TCP_NP + 1, count: 1, timeoutMs: 1000 });
  t.same(Object.keys(r.errors), ['ECONNREFUSED'], 'nothing listens there and nothing translated it');
});

t.test('the dump shows the NodePort frontends: the addresses and the wildcard', async (t) => {
  const d = c.svcmap('dump');
  t.match(d, new RegExp(`${NODE_IP.replaceAll('.', '\\.')}:${TCP_NP}/TCP\\s+NodePort`));
  t.match(d, new RegExp(`0\\.0\\.0\\.0:${TCP_NP}/TCP\\s+NodePort,wildcard`));
  t.match(d, new RegExp(`\\[::\\]:${UDP_NP}/UDP\\s+NodePort,wildcard`));
});

t.test("a pod's own loopback is its own: its 127.0.0.1:NodePort is not translated", async (t) => {
  for (const f of FAMILIES) {
    await notServed(t, c.client, f.loopback, `IPv${f.family}: ${f.loopback} from the pod`);
    await served(t, c.client, f.node, `IPv${f.family}: the node's InternalIP from the pod`);
  }
});

t.test('every address of the node: one the node gains while the agent runs serves NodePorts, to the node and to pods', async (t) => {
  const from = c.agent.mark();
  await c.lab.ip(c.node, 'addr', 'add', `${SECOND[4]}/32`, 'dev', c.node.bridge);
  await c.lab.ipv6(c.node, SECOND[6], { dev: c.node.bridge });
  const seen = await c.agent.waitFor(
    (l) => l.msg === "the node's addresses" && [SECOND[4], SECOND[6]].every((a) => (l.addresses as string[]).includes(a)),
    { from, what: 'the agent seeing the new addresses' },
  );
  await c.agent.waitForSync(c.agent.lines.indexOf(seen) + 1);
  for (const f of FAMILIES) {
    await served(t, host, f.second, `IPv${f.family}: the new address from the node`);
    await served(t, c.client, f.second, `IPv${f.family}: the new address from a pod`);
  }
});

t.test(
  'bind protection (the default): the NodePorts are EADDRINUSE to the node, counted; other ports, other protocols and pods bind',
  async (t) => {
    const before = await bindCounters();
    const denied: Array<[string, number, 'tcp' | 'udp']> = [];
    for (const f of FAMILIES) {
      for (const ip of [f.any, f.node, f.second, f.loopback]) {
        denied.push([ip, TCP_NP, 'tcp']);
        denied.push([ip, UDP_NP, 'udp']);
      }
    }
    for (const [ip, port, proto] of denied) {
      t.same(await host.bind({ ip, port, proto }), { result: 'EADDRINUSE' }, `${proto} ${hostPort(ip, port)}: EADDRINUSE`);
    }
    const allowed: Array<[string, number, 'tcp' | 'udp']> = [
      ['0.0.0.0', TCP_NP + 1, 'tcp'],
      ['::', TCP_NP + 1, 'tcp'],
      ['0.0.0.0', TCP_NP, 'udp'], // the NodePort is TCP's
      ['::', UDP_NP, 'tcp'], // ... and UDP's
    ];
    for (const [ip, port, proto] of allowed) {
      t.same(await host.bind({ ip, port, proto }), { result: 'ok' }, `${proto} ${hostPort(ip, port)}: bound`);
    }
    for (const f of FAMILIES) {
      t.same(await c.client.bind({ ip: f.any, port: TCP_NP, proto: 'tcp' }), { result: 'ok' }, `a pod binds ${hostPort(f.any, TCP_NP)}`);
    }
    const after = await bindCounters();
    const moved = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
    t.equal(moved('bind4/nodeport_bind_denied'), 8, 'bind4: one count per refused IPv4 bind');
    t.equal(moved('bind6/nodeport_bind_denied'), 8, 'bind6: one count per refused IPv6 bind');
    t.equal(moved('bind4/passed'), 3, 'bind4: the two allowed binds and the pod');
    t.equal(moved('bind6/passed'), 3, 'bind6: the two allowed binds and the pod');
  },
);

t.test(
  '--localhost-nodeports=false: 127.0.0.1 and [::1] are not translated (refused), nor protected; the addresses still are',
  async (t) => {
    await agent(['--localhost-nodeports=false']);
    for (const f of FAMILIES) {
      await notServed(t, host, f.loopback, `IPv${f.family}: ${f.loopback}`);
      await served(t, host, f.node, `IPv${f.family}: the node's InternalIP`);
      t.same(
        await host.bind({ ip: f.loopback, port: TCP_NP, proto: 'tcp' }),
        { result: 'ok' },
        `${f.loopback}: bound (it serves no NodePort)`,
      );
      t.same(await host.bind({ ip: f.any, port: TCP_NP, proto: 'tcp' }), { result: 'EADDRINUSE' }, `${f.any}: still protected`);
    }
  },
);

t.test('--bind-protection=false: the node binds the NodePorts; localhost NodePorts are back', async (t) => {
  await agent(['--bind-protection=false']);
  for (const f of FAMILIES) {
    for (const ip of [f.any, f.node, f.loopback]) {
      t.same(await host.bind({ ip, port: TCP_NP, proto: 'tcp' }), { result: 'ok' }, `tcp ${hostPort(ip, TCP_NP)}: bound`);
    }
    await served(t, host, f.loopback, `IPv${f.family}: ${f.loopback}`);
  }
});

t.test('--nodeport-addresses with CIDRs: only the addresses inside serve NodePorts, to the node and to pods; no loopback', async (t) => {
  await agent(['--nodeport-addresses', '10.244.0.0/24,fd00:10:244::/64']);
  for (const f of FAMILIES) {
    await served(t, host, f.node, `IPv${f.family}: the InternalIP, inside`);
    await served(t, c.client, f.node, `IPv${f.family}: the InternalIP, inside, from a pod`);
    await notServed(t, host, f.second, `IPv${f.family}: the second address, outside`);
    await notServed(t, c.client, f.second, `IPv${f.family}: the second address, outside, from a pod`);
    await notServed(t, host, f.loopback, `IPv${f.family}: ${f.loopback}, outside`);
    t.same(await host.bind({ ip: f.second, port: TCP_NP, proto: 'tcp' }), { result: 'ok' }, `${f.second} serves no NodePort: bound`);
    t.same(await host.bind({ ip: f.node, port: TCP_NP, proto: 'tcp' }), { result: 'EADDRINUSE' }, `${f.node} serves one: protected`);
  }
});

t.test("--nodeport-addresses primary: the Node's first address of each family only", async (t) => {
  await agent(['--nodeport-addresses', 'primary']);
  for (const f of FAMILIES) {
    await served(t, host, f.node, `IPv${f.family}: the primary address`);
    await notServed(t, host, f.second, `IPv${f.family}: the second address`);
    await notServed(t, host, f.loopback, `IPv${f.family}: ${f.loopback}`);
  }
});
