// Direct server return (--lb-mode, svcmap.io/lb-mode) where a user starts:
// dual-stack NodePort Services with their EndpointSlices in each agent's
// manifest directory, the agent on both nodes (node2, the backend's node,
// answers the client itself: it reverse-translates the backend's replies),
// an outside client on the nodes' network (fixtures/tc-nodes.ts). Both agents
// run with --lb-mode dsr; one Service per mode: dsr by that default, snat and
// hybrid by the annotation. Once translated at tc, once with XDP in front of
// tc (--acceleration native), each family: a NodePort spread over a backend
// on node1 and one on node2 and the source address each backend sees (the
// client's with dsr, under externalTrafficPolicy Cluster; node1's for a
// remote backend with snat), UDP replies from the NodePort (dsr: straight
// from node2, with the client's address at the backend; hybrid: SNATed),
// 1,000 connections without a failure in dsr mode, externalTrafficPolicy
// Local on a dsr Service (no endpoint on node1: dropped, counted; through
// node2 or with a local endpoint: answered with the client's address),
// loadBalancerSourceRanges on a LoadBalancer Service of each mode with its
// backend on node2 (a second client outside the ranges dropped, counted; the
// one inside answered, with its address kept by dsr and hybrid), what svcmap
// status, explain, dump and the metrics say; a held connection survives a
// restart of both agents. Every address lives in namespaces this test made.
import t from 'tap';
import type { LabClient } from '../../lab/index.ts';
import { stringify } from 'yaml';
import { SVCMAP } from '../../lab/agent-process.ts';
import { hostPort } from '../../lab/protocol.ts';
import { parseSamples } from '../../bench/prom.ts';
import { type ServiceSpec, serviceObject, sliceObject } from './fixtures/manifests.ts';
import {
  CLIENT2,
  CLIENT_IP,
  NODE1_POD,
  NODE_IPS,
  REMOTE_NODEPORT,
  REMOTE_POD,
  REMOTE_UDP_NODEPORT,
  type NodeAgent,
  type RemoteNodePort,
  V6_IPS,
  addClient2,
  addNode1Pod,
  startNodeAgent,
  startRemoteNodePort,
  tcCounters,
} from './fixtures/tc-nodes.ts';
import { xdpPassObject } from './fixtures/xdp-pass.ts';

const FAMILIES = [
  { family: 4, client: CLIENT_IP, client2: CLIENT2[4], node1: NODE_IPS.node1, node2: NODE_IPS.node2 },
  { family: 6, client: V6_IPS.client, client2: CLIENT2[6], node1: V6_IPS.node1, node2: V6_IPS.node2 },
] as const;

const POD_A = { ip: NODE1_POD.ip, nodeName: 'node1' };
const POD_A6 = { ip: NODE1_POD.ip6, nodeName: 'node1' };
const POD_B = { ip: REMOTE_POD, nodeName: 'node2' };
const POD_B6 = { ip: V6_IPS.pod, nodeName: 'node2' };

type Mode = 'snat' | 'dsr' | 'hybrid';
/** dsr comes from the agents' --lb-mode, the others from the Service's annotation. n: the Services' numbers. */
const MODES: ReadonlyArray<{ mode: Mode; n: number }> = [
  { mode: 'dsr', n: 40 },
  { mode: 'snat', n: 50 },
  { mode: 'hybrid', n: 60 },
];
/** The NodePorts of mode n: its "mixed" Service's TCP port, its "remote" one's TCP and UDP ports. */
const ports = (n: number) => ({ mixed: 30000 + n, remoteTcp: 30001 + n, remoteUdp: 30002 + n });

function servicesOf(mode: Mode, n: number): ServiceSpec[] {
  const p = ports(n);
  const base = {
    type: 'NodePort' as const,
    externalTrafficPolicy: 'Cluster' as const,
    ...(mode === 'dsr' ? {} : { annotations: { 'svcmap.io/lb-mode': mode } }),
  };
  return [
    // A backend on each node.
    {
      ...base,
      name: `${mode}-mixed`,
      clusterIP: `10.96.0.${n}`,
      clusterIP6: `fd00:10:96::${n}`,
      ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: p.mixed }],
      endpoints: [POD_A, POD_B],
      endpoints6: [POD_A6, POD_B6],
    },
    // Only node2's: every flow through node1 goes to the other node.
    {
      ...base,
      name: `${mode}-remote`,
      clusterIP: `10.96.0.${n + 1}`,
      clusterIP6: `fd00:10:96::${n + 1}`,
      ports: [
        { name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: p.remoteTcp },
        { name: 'udp', protocol: 'UDP', port: 53, targetPort: 5353, nodePort: p.remoteUdp },
      ],
      endpoints: [POD_B],
      endpoints6: [POD_B6],
    },
  ];
}

/** externalTrafficPolicy Local on dsr Services (the agents' default): only node2's endpoint, and one on each node. */
const ETP_LOCAL = { remote: 90, mixed: 91 } as const;
const etpLocalServices: ServiceSpec[] = [
  { name: 'local-remote', n: ETP_LOCAL.remote, endpoints: [POD_B], endpoints6: [POD_B6] },
  { name: 'local-mixed', n: ETP_LOCAL.mixed, endpoints: [POD_A, POD_B], endpoints6: [POD_A6, POD_B6] },
].map(({ name, n, endpoints, endpoints6 }) => ({
  name,
  type: 'NodePort',
  externalTrafficPolicy: 'Local',
  clusterIP: `10.96.0.${n}`,
  clusterIP6: `fd00:10:96::${n}`,
  ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30000 + n }],
  endpoints,
  endpoints6,
}));

/** A LoadBalancer IP (in LB_NET, which both clients route to node1). */
const lbIp = (family: 4 | 6, n: number) => (family === 4 ? `192.168.210.${n}` : `fd00:192:168:210::${n}`);
/** The LoadBalancer Services with loadBalancerSourceRanges, one per mode, their backend on node2: n of each. */
const RANGED: Record<Mode, number> = { dsr: 70, snat: 71, hybrid: 72 };
/** The first client's /26 and /120, which leave the second client (…200) out. */
const FIRST_CLIENT_RANGES = ['192.168.100.64/26', 'fd00:192:168:100::100/120'];
const rangedServices: ServiceSpec[] = (Object.entries(RANGED) as Array<[Mode, number]>).map(([mode, n]) => ({
  name: `${mode}-ranged`,
  type: 'LoadBalancer',
  externalTrafficPolicy: 'Cluster',
  ...(mode === 'dsr' ? {} : { annotations: { 'svcmap.io/lb-mode': mode } }),
  clusterIP: `10.96.0.${n}`,
  clusterIP6: `fd00:10:96::${n}`,
  ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30000 + n }],
  endpoints: [POD_B],
  endpoints6: [POD_B6],
  loadBalancerIngress: [
    { ip: lbIp(4, n), ipMode: 'VIP' },
    { ip: lbIp(6, n), ipMode: 'VIP' },
  ],
  extraSpec: { loadBalancerSourceRanges: FIRST_CLIENT_RANGES },
}));

const yamlOf = (s: ServiceSpec) =>
  [serviceObject(s), sliceObject(s), sliceObject(s, 'v6abc', s.endpoints6 ?? [], 'IPv6')].map((o) => stringify(o)).join('---\n');

/** The Node objects node2's agent reads (node1's come with the fixture's manifests). */
const NODES_YAML = (['node1', 'node2'] as const)
  .map((name) =>
    stringify({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name },
      status: {
        addresses: [
          { type: 'InternalIP', address: NODE_IPS[name] },
          { type: 'InternalIP', address: V6_IPS[name] },
        ],
      },
    }),
  )
  .join('---\n');

/** node2's datapath counters at one hook, by reason (its agent's metrics, fetched inside node2). */
async function node2Counters(c: RemoteNodePort, node2: NodeAgent, hook: string): Promise<Record<string, number>> {
  const serving = await node2.agent.waitFor((l) => l.msg === 'serving metrics and health', { what: 'metrics port' });
  const text = await c.lab.exec(c.node2, process.execPath, [
    '-e',
    `fetch('http://127.0.0.1:${serving.metricsPort}/metrics').then(async (r) => console.log(await r.text()))`,
  ]);
  const samples = parseSamples(text).filter((x) => x.name === 'svcmap_datapath_packets_total' && x.labels.hook === hook);
  return Object.fromEntries(samples.map((x) => [x.labels.reason ?? '?', x.value]));
}

/** What `fn` added to each counter of `read`'s. */
async function added(read: () => Promise<Record<string, number>>, fn: () => Promise<void>): Promise<(reason: string) => number> {
  const before = await read();
  await fn();
  const after = await read();
  return (reason) => (after[reason] ?? 0) - (before[reason] ?? 0);
}

// Two two-node clusters, one after the other: about two minutes on an idle machine, more than
// .taprc's 240 s per file on a loaded one.
t.setTimeout(10 * 60_000);

for (const hook of ['tc', 'xdp'] as const) {
  t.test(`--lb-mode dsr on both nodes, ${hook === 'tc' ? 'translated at tc' : 'XDP in front of tc (--acceleration native)'}`, async (t) => {
    const args = ['--lb-mode', 'dsr', ...(hook === 'xdp' ? ['--acceleration', 'native'] : [])];
    let c!: RemoteNodePort;
    let node2!: NodeAgent;
    let client2!: LabClient; // outside the ranged Services' loadBalancerSourceRanges
    /** node1's drop counters: at XDP when it runs (it applies the policy itself), else at tc. */
    const node1DropHook = hook === 'xdp' ? 'xdp' : 'tc_ingress';
    t.before(async () => {
      c = await startRemoteNodePort(args, { ipv6: true });
      await addNode1Pod(c);
      client2 = (await addClient2(c)).client;
      if (hook === 'xdp') {
        // As in xdp-nodeport.test.ts: checksums complete, as from a NIC (XDP leaves a partial one to tc), and
        // the network side of each node's eth0 takes the frames XDP_TX sends it only while it runs XDP itself.
        await c.lab.exec(c.clientPod, 'ethtool', ['-K', c.clientPod.ifname, 'tx', 'off']);
        await c.lab.exec(c.node2, 'ethtool', ['-K', 'eth0', 'tx', 'off']);
        const obj = xdpPassObject((fn) => t.teardown(fn));
        const from = c.agent.mark();
        for (const peer of ['n1', 'n2']) await c.lab.ip(c.net, 'link', 'set', 'dev', peer, 'xdpdrv', 'obj', obj, 'program', 'xdp_pass_a');
        // node1's agent started before: it left forwarding to tc until now, and follows (node2's starts after).
        await c.agent.waitFor((l) => l.msg === 'XDP on eth0 forwards: the device takes XDP frames now', { from, what: 'XDP forwards' });
      }
      node2 = await startNodeAgent(c.lab, c.node2, 'node2', { 'nodes.yaml': NODES_YAML }, args);
      for (const s of [...MODES.flatMap(({ mode, n }) => servicesOf(mode, n)), ...etpLocalServices, ...rangedServices]) {
        await c.writeManifest(`${s.name}.yaml`, yamlOf(s));
        await node2.writeManifest(`${s.name}.yaml`, yamlOf(s));
      }
    });
    t.teardown(async () => {
      await node2?.stop();
      await c?.destroy();
    });

    for (const f of FAMILIES) {
      const v = `IPv${f.family}`;
      for (const { mode, n } of MODES) {
        const p = ports(n);
        const keeps = mode !== 'snat'; // TCP keeps the client's address with dsr and hybrid

        t.test(`${v}, ${mode}: a NodePort spread over a backend on each node; the address each backend sees`, async (t) => {
          const r = await c.client.tcpConnect({ ip: f.node1, port: p.mixed, count: 200, timeoutMs: 3000, concurrency: 8 });
          t.equal(r.failed, 0, JSON.stringify(r.errors));
          t.ok((r.byPod['pod-a'] ?? 0) >= 40 && (r.byPod['pod-b'] ?? 0) >= 40, `both backends used: ${JSON.stringify(r.byPod)}`);
          t.same(
            [...r.seenFrom].sort(),
            keeps ? [f.client] : [f.client, f.node1].sort(),
            keeps ? "both backends saw the client's address" : "the local backend saw the client, node2's saw node1 (SNAT)",
          );
          t.same(r.peerNames, [hostPort(f.node1, p.mixed)], 'the client talked to the NodePort throughout');
        });

        t.test(`${v}, ${mode}: TCP and UDP to a backend on node2 only (externalTrafficPolicy Cluster)`, async (t) => {
          const dsrCounts = await added(
            () => node2Counters(c, node2, 'tc_ingress'),
            async () => {
              const r = await c.client.tcpConnect({ ip: f.node1, port: p.remoteTcp, count: 20, timeoutMs: 3000, concurrency: 4 });
              t.equal(r.ok, 20, JSON.stringify(r.errors));
              t.same(r.seenFrom, [keeps ? f.client : f.node1], `TCP: the backend saw ${keeps ? "the client's address" : "node1's"}`);
              t.same(r.peerNames, [hostPort(f.node1, p.remoteTcp)]);
              const u = await c.client.udpSend({ ip: f.node1, port: p.remoteUdp, count: 30, connected: false, timeoutMs: 2000 });
              t.equal(u.ok, 30, JSON.stringify(u.errors));
              t.same(u.replySources, [hostPort(f.node1, p.remoteUdp)], 'UDP: the replies come from the NodePort');
              t.same(
                u.seenFrom,
                [mode === 'dsr' ? f.client : f.node1],
                `UDP: the backend saw ${mode === 'dsr' ? "the client's address" : mode === 'hybrid' ? "node1's (hybrid: UDP is SNATed)" : "node1's"}`,
              );
            },
          );
          // node2 took the frontend from the packets: each TCP SYN, each UDP datagram of a DSR flow.
          const expected = mode === 'dsr' ? 20 + 30 : mode === 'hybrid' ? 20 : 0;
          if (expected === 0) t.equal(dsrCounts('dsr_accepted'), 0, 'snat: node2 took no DSR option');
          else
            t.ok(
              dsrCounts('dsr_accepted') >= expected,
              `node2 accepted the DSR option ${dsrCounts('dsr_accepted')} times (>= ${expected})`,
            );
          t.equal(dsrCounts('dsr_bad_frontend') + dsrCounts('dsr_malformed'), 0, 'and refused none');
        });
      }

      t.test(
        `${v}, dsr, externalTrafficPolicy Local: no endpoint on node1: dropped there, counted; through node2: answered with the client's address`,
        async (t) => {
          const port = 30000 + ETP_LOCAL.remote;
          const dropped = await added(
            () => tcCounters(c, node1DropHook),
            async () => {
              const r = await c.client.tcpConnect({ ip: f.node1, port, count: 3, timeoutMs: 700, concurrency: 3 });
              t.equal(r.ok, 0, 'through node1: no connection');
              t.same(Object.keys(r.errors), ['ETIMEDOUT'], 'a timeout: the SYNs dropped, nothing refused');
            },
          );
          t.ok(
            dropped('no_local_endpoint') >= 3,
            `node1 counted each SYN as no_local_endpoint at ${node1DropHook} (${dropped('no_local_endpoint')})`,
          );
          const r = await c.client.tcpConnect({ ip: f.node2, port, count: 20, timeoutMs: 3000, concurrency: 4 });
          t.equal(r.ok, 20, `through node2: ${JSON.stringify(r.errors)}`);
          t.same(r.byPod, { 'pod-b': 20 }, "by node2's endpoint");
          t.same(r.seenFrom, [f.client], "which saw the client's address");
          t.same(r.peerNames, [hostPort(f.node2, port)], "the client talked to node2's NodePort");
        },
      );

      t.test(`${v}, dsr, externalTrafficPolicy Local with an endpoint on each node: through node1 only node1's answers`, async (t) => {
        const port = 30000 + ETP_LOCAL.mixed;
        const r = await c.client.tcpConnect({ ip: f.node1, port, count: 50, timeoutMs: 3000, concurrency: 8 });
        t.equal(r.failed, 0, JSON.stringify(r.errors));
        t.same(r.byPod, { 'pod-a': 50 }, "only node1's endpoint");
        t.same(r.seenFrom, [f.client], "which saw the client's address");
        t.same(r.peerNames, [hostPort(f.node1, port)]);
      });

      for (const [mode, n] of Object.entries(RANGED) as Array<[Mode, number]>) {
        const keeps = mode !== 'snat';
        t.test(
          `${v}, ${mode}: loadBalancerSourceRanges, backend on node2: the client inside is answered${keeps ? ' with its address' : ''}; the one outside is dropped at node1, counted`,
          async (t) => {
            const ip = lbIp(f.family, n);
            const accepted = await added(
              () => node2Counters(c, node2, 'tc_ingress'),
              async () => {
                const r = await c.client.tcpConnect({ ip, port: 80, count: 20, timeoutMs: 3000, concurrency: 4 });
                t.equal(r.ok, 20, `${f.client} (inside): ${JSON.stringify(r.errors)}`);
                t.same(r.byPod, { 'pod-b': 20 }, "by node2's backend");
                t.same(r.seenFrom, [keeps ? f.client : f.node1], `which saw ${keeps ? "the client's address (DSR)" : "node1's (SNAT)"}`);
                t.same(r.peerNames, [hostPort(ip, 80)], 'the client talked to the LoadBalancer IP');
              },
            );
            if (keeps) t.ok(accepted('dsr_accepted') >= 20, `node2 took the frontend from each SYN (${accepted('dsr_accepted')})`);
            else t.equal(accepted('dsr_accepted'), 0, 'snat: node2 took no DSR option');
            const denied = await added(
              () => tcCounters(c, node1DropHook),
              async () => {
                const r = await client2.tcpConnect({ ip, port: 80, count: 3, timeoutMs: 700, concurrency: 3 });
                t.equal(r.ok, 0, `${f.client2} (outside): no connection`);
                t.same(Object.keys(r.errors), ['ETIMEDOUT'], "a timeout, as with kube-proxy's drop");
              },
            );
            t.ok(denied('source_denied') >= 3, `node1 counted each SYN as source_denied at ${node1DropHook} (${denied('source_denied')})`);
          },
        );
      }

      t.test(`${v}, dsr: 1,000 connections to a backend on node2: 0 failures, each with the client's address`, async (t) => {
        const p = ports(40);
        const xdp = await added(
          () => tcCounters(c, 'xdp'),
          async () => {
            const r = await c.client.tcpConnect({ ip: f.node1, port: p.remoteTcp, count: 1000, timeoutMs: 3000, concurrency: 8 });
            t.equal(r.failed, 0, JSON.stringify(r.errors));
            t.equal(r.ok, 1000);
            t.same(r.seenFrom, [f.client]);
            t.same(r.peerNames, [hostPort(f.node1, p.remoteTcp)]);
          },
        );
        if (hook === 'xdp') {
          // XDP leaves the packets that carry the frontend (the SYNs) to tc, and forwards the rest of each flow itself.
          t.ok(xdp('passed_to_tc') >= 1000, `the SYNs passed to tc (${xdp('passed_to_tc')})`);
          t.ok(xdp('translated') >= 1000, `the flows' later packets translated at XDP (${xdp('translated')})`);
        }
      });
    }

    t.test('svcmap status, explain --from, dump and the metrics say the lb mode', async (t) => {
      const health = await c.agent.waitFor((l) => l.msg === 'serving metrics and health', { what: 'health port' });
      const node1 = (...a: string[]) => c.lab.exec(c.node1, SVCMAP, [...a, '--pin-dir', c.pinDir], { timeoutMs: 120_000 });
      const status = JSON.parse(await node1('status', '-o', 'json', '--healthz-address', `127.0.0.1:${health.healthPort}`)) as {
        agent: { lbMode?: string };
        dsr: { dsr: number; fromOutside: number };
      };
      t.equal(status.agent.lbMode, 'dsr', "status: the agent's --lb-mode");
      // Every NodePort and LoadBalancer entry in the maps (NodePorts: each node address and the wildcard, both
      // families) carries dsr as its Service's mode says: dsr's (the fixture's, the Local ones) by the default,
      // hybrid's TCP ones.
      const { frontends } = JSON.parse(await node1('dump', '-o', 'json')) as {
        frontends: Array<{ frontend: string; port: number; protocol: string; scope: string; flags: string[] }>;
      };
      const modeOfPort = new Map<number, Mode>([
        [REMOTE_NODEPORT, 'dsr'],
        [REMOTE_UDP_NODEPORT, 'dsr'],
        ...MODES.flatMap(({ mode, n }) => Object.values(ports(n)).map((port) => [port, mode] as [number, Mode])),
        ...Object.values(ETP_LOCAL).map((n) => [30000 + n, 'dsr'] as [number, Mode]),
        ...(Object.entries(RANGED) as Array<[Mode, number]>).map(([mode, n]) => [30000 + n, mode] as [number, Mode]),
      ]);
      const modeOfLbIp = new Map<string, Mode>(
        (Object.entries(RANGED) as Array<[Mode, number]>).flatMap(([mode, n]) =>
          ([4, 6] as const).map((f) => [`${hostPort(lbIp(f, n), 80)}/TCP`, mode] as [string, Mode]),
        ),
      );
      const outside = frontends.filter((fe) => fe.scope === 'external' && !fe.flags.includes('ClusterIP'));
      const nodePorts = outside.filter((fe) => fe.flags.includes('NodePort'));
      let dsr = 0;
      for (const fe of outside) {
        const mode = fe.flags.includes('NodePort') ? modeOfPort.get(fe.port) : modeOfLbIp.get(fe.frontend);
        const want = mode === 'dsr' || (mode === 'hybrid' && fe.protocol === 'TCP');
        if (mode === undefined || fe.flags.includes('dsr') !== want)
          t.fail(`${fe.frontend}: ${mode} ${fe.protocol}, flags ${fe.flags.join(',')}`);
        if (want) dsr++;
      }
      t.ok(
        nodePorts.length >= 2 * 2 * modeOfPort.size,
        `every NodePort on a node address and the wildcard, both families (${nodePorts.length})`,
      );
      t.equal(outside.length - nodePorts.length, modeOfLbIp.size, 'and each LoadBalancer IP');
      t.same(status.dsr, { dsr, fromOutside: outside.length }, 'status counts the dsr frontends the dump shows');
      t.notOk(
        frontends.some((fe) => fe.flags.includes('ClusterIP') && fe.flags.includes('dsr')),
        'no ClusterIP entry carries dsr',
      );
      const tcp = ports(40).remoteTcp;
      const udp = ports(60).remoteUdp;
      t.match(
        await node1('explain', `${hostPort(NODE_IPS.node1, tcp)}/TCP`, '--from', CLIENT_IP),
        /^Hook: .*\nMode: +dsr \(a backend on another node sees the client's address/m,
      );
      t.match(
        await node1('explain', `${hostPort(NODE_IPS.node1, udp)}/UDP`, '--from', CLIENT_IP),
        /^Mode: +snat \(/m,
        'hybrid: its UDP frontend is SNATed',
      );
      const dump = await node1('dump');
      t.match(dump, new RegExp(`^${NODE_IPS.node1.replace(/\./g, '\\.')}:${tcp}/TCP +NodePort,dsr `, 'm'), 'dump: the dsr flag');
      t.match(await c.metrics(), /^svcmap_lb_mode_info\{mode="dsr"\} 1$/m, 'svcmap_lb_mode_info');
    });

    t.test('a held DSR connection survives a restart of both agents', async (t) => {
      const port = ports(40).remoteTcp;
      const held = await c.client.udpStreamStart({ ip: NODE_IPS.node1, port, intervalMs: 20, timeoutMs: 2000, tcp: true });
      await c.client.udpStreamReplies(held.stream!, 5);
      await c.stopAgent();
      await node2.stopAgent();
      await c.client.udpStreamReplies(held.stream!, 5); // answered while no agent runs
      await c.startAgent();
      await node2.startAgent();
      await c.client.udpStreamReplies(held.stream!, 5);
      const stream = await c.client.udpStreamStop(held.stream!);
      t.same(stream.errors, {}, 'the held connection never failed');
      t.equal(stream.reconnects, 0, 'and never reconnected');
      t.same(Object.keys(stream.byPod), ['pod-b']);
      const r = await c.client.tcpConnect({ ip: NODE_IPS.node1, port, count: 100, timeoutMs: 3000, concurrency: 8 });
      t.equal(r.failed, 0, `after the restart: ${JSON.stringify(r.errors)}`);
      t.same(r.seenFrom, [CLIENT_IP], "still the client's address");
    });
  });
}
