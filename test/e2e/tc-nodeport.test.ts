// The tc datapath end to end: an external client and two nodes on one L2
// network (a bridge in a namespace of its own), pods behind each node's own
// bridge, the real agent running inside each node namespace with its tc
// programs on the node's eth0. Traffic from outside reaches services through
// NodeIP:NodePort and an externalIP, with kube-proxy's semantics for both
// traffic policies. Then a node with two NICs (fixtures/tc-nodes.ts,
// twoNics): SNAT takes the address of the device towards the backend, and
// follows a change of it without a restart. Every address lives in
// namespaces this test made.
//
// The two-node cluster is dual-stack (unique local IPv6 addresses beside the
// IPv4 ones, inside the lab's namespaces only, without DAD), every Service
// has a cluster IP and endpoints of each family, and the traffic tests run
// for both families: IPv6 through the tc datapath's IPv6 path
// (bpf/lib/tc_lb6.h).
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { stringify } from 'yaml';
import { AgentProcess, SVCMAP, assertBuilt } from '../../lab/agent-process.ts';
import { Lab, type LabClient, type LabNode, type LabPod, registerTeardown, unregisterTeardown } from '../../lab/index.ts';
import { LINK_TYPE_TCX } from '../../src/bpf/link.ts';
import { linkPinDir } from '../../src/bpf/loader.ts';
import { cleanupPins } from '../../src/cli/cleanup.ts';
import { ensureBpffs, labPinDir, sweepStalePins } from '../../lab/pins.ts';
import { hostPort } from '../../lab/protocol.ts';
import { type ServiceSpec, serviceObject, sliceObject } from './fixtures/manifests.ts';
import { CLIENT_IP, LINK_IPS, NODE_IPS, REMOTE_NODEPORT, addNode1Pod, makeTcNode, startRemoteNodePort } from './fixtures/tc-nodes.ts';

const CLIENT2_IP = '192.168.100.101';
const EXTERNAL_IP = '192.168.200.10';
const POD_A = '10.244.1.10'; // on node1
const POD_B = '10.244.2.10'; // on node2
const HC_PORT = 32000;

/** The same roles in IPv6: unique local addresses, /64s, inside the lab only. */
const V6 = {
  client: 'fd00:192:168:100::100',
  client2: 'fd00:192:168:100::101',
  node1: 'fd00:192:168:100::11',
  node2: 'fd00:192:168:100::12',
  external: 'fd00:192:168:200::10',
  podA: 'fd00:10:244:1::10',
  podB: 'fd00:10:244:2::10',
  bridge1: 'fd00:10:244:1::1',
  bridge2: 'fd00:10:244:2::1',
  net1: 'fd00:10:244:1::/64',
  net2: 'fd00:10:244:2::/64',
} as const;

/** What the traffic tests need of one family. */
interface Family {
  family: 4 | 6;
  client: string;
  client2: string;
  node1: string;
  node2: string;
  external: string;
}
const FAMILIES: readonly Family[] = [
  { family: 4, client: CLIENT_IP, client2: CLIENT2_IP, node1: NODE_IPS.node1, node2: NODE_IPS.node2, external: EXTERNAL_IP },
  { family: 6, client: V6.client, client2: V6.client2, node1: V6.node1, node2: V6.node2, external: V6.external },
];

const services: ServiceSpec[] = [
  // Only a backend on node2: through node1 it is SNATed (Cluster policy).
  {
    name: 'remote',
    clusterIP: '10.96.0.10',
    clusterIP6: 'fd00:10:96::10',
    type: 'NodePort',
    externalTrafficPolicy: 'Cluster',
    ports: [
      { name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30080 },
      { name: 'udp', protocol: 'UDP', port: 53, targetPort: 5353, nodePort: 30053 },
    ],
    endpoints: [{ ip: POD_B, nodeName: 'node2' }],
    endpoints6: [{ ip: V6.podB, nodeName: 'node2' }],
  },
  // Local policy with its only endpoint on node1: node2 drops, node1 keeps the client's address.
  {
    name: 'local',
    clusterIP: '10.96.0.11',
    clusterIP6: 'fd00:10:96::11',
    type: 'LoadBalancer',
    externalTrafficPolicy: 'Local',
    ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30081 }],
    endpoints: [{ ip: POD_A, nodeName: 'node1' }],
    endpoints6: [{ ip: V6.podA, nodeName: 'node1' }],
    extraSpec: { healthCheckNodePort: HC_PORT },
  },
  // Both pods, Cluster policy, also on an externalIP.
  {
    name: 'mixed',
    clusterIP: '10.96.0.12',
    clusterIP6: 'fd00:10:96::12',
    type: 'NodePort',
    externalTrafficPolicy: 'Cluster',
    externalIPs: [EXTERNAL_IP, V6.external],
    ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30082 }],
    endpoints: [
      { ip: POD_A, nodeName: 'node1' },
      { ip: POD_B, nodeName: 'node2' },
    ],
    endpoints6: [
      { ip: V6.podA, nodeName: 'node1' },
      { ip: V6.podB, nodeName: 'node2' },
    ],
  },
  // Both pods, sessionAffinity: ClientIP (the default timeout).
  {
    name: 'sticky',
    clusterIP: '10.96.0.13',
    clusterIP6: 'fd00:10:96::13',
    type: 'NodePort',
    externalTrafficPolicy: 'Cluster',
    ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30083 }],
    endpoints: [
      { ip: POD_A, nodeName: 'node1' },
      { ip: POD_B, nodeName: 'node2' },
    ],
    endpoints6: [
      { ip: V6.podA, nodeName: 'node1' },
      { ip: V6.podB, nodeName: 'node2' },
    ],
    extraSpec: { sessionAffinity: 'ClientIP' },
  },
];

function manifestsFor(dir: string): void {
  const docs: unknown[] = [];
  for (const s of services) docs.push(serviceObject(s), sliceObject(s), sliceObject(s, 'v6abc', s.endpoints6 ?? [], 'IPv6'));
  for (const name of ['node1', 'node2'] as const) {
    const addresses = [
      { type: 'InternalIP', address: NODE_IPS[name] },
      { type: 'InternalIP', address: V6[name] },
    ];
    docs.push({ apiVersion: 'v1', kind: 'Node', metadata: { name }, status: { addresses } });
  }
  writeFileSync(join(dir, 'all.yaml'), docs.map((d) => stringify(d)).join('---\n'));
}

let lab: Lab;
let client: LabClient;
let client2: LabClient;
let clientPod: LabPod;
const nodes: Record<string, LabNode> = {};
const agents: Record<string, AgentProcess> = {};
const pinDirs: string[] = [];
let manifests = '';
const emergency = {
  emergency() {
    for (const a of Object.values(agents)) a.kill('SIGKILL');
    for (const p of pinDirs) {
      try {
        cleanupPins(p);
      } catch {
        /* best effort */
      }
    }
    if (manifests) rmSync(manifests, { recursive: true, force: true });
  },
};

async function setUp(mode: 'tcx' | 'tc'): Promise<void> {
  assertBuilt();
  ensureBpffs();
  sweepStalePins();
  lab = await Lab.create();
  registerTeardown(emergency);
  const net = await lab.node('net', { cidr: '192.168.100.0/24' });
  clientPod = await lab.pod(net, 'client', `${CLIENT_IP}/24`);
  await lab.route(clientPod, `${EXTERNAL_IP}/32`, NODE_IPS.node1); // the external IP is announced by node1
  nodes.node1 = await makeTcNode(lab, net, 'node1', '10.244.1.0/24', 'n1');
  nodes.node2 = await makeTcNode(lab, net, 'node2', '10.244.2.0/24', 'n2');
  await lab.route(nodes.node1, '10.244.2.0/24', NODE_IPS.node2);
  await lab.route(nodes.node2, '10.244.1.0/24', NODE_IPS.node1);
  // IPv6 beside IPv4: node eth0s and the clients on one /64, a /64 per node's pods, routed node to node.
  await lab.ipv6(clientPod, V6.client, { dev: clientPod.ifname });
  await lab.ip(clientPod, '-6', 'route', 'replace', `${V6.external}/128`, 'via', V6.node1);
  for (const [name, bridge, other, otherNet] of [
    ['node1', V6.bridge1, V6.node2, V6.net2],
    ['node2', V6.bridge2, V6.node1, V6.net1],
  ] as const) {
    await lab.ipv6(nodes[name]!, V6[name], { dev: 'eth0' });
    await lab.ipv6(nodes[name]!, bridge, { dev: 'br0' });
    await lab.sysctl(nodes[name]!, 'net.ipv6.conf.all.forwarding', 1);
    await lab.ip(nodes[name]!, '-6', 'route', 'replace', otherNet, 'via', other);
  }
  for (const [node, name, ip, ip6, bridge] of [
    ['node1', 'pod-a', POD_A, V6.podA, V6.bridge1],
    ['node2', 'pod-b', POD_B, V6.podB, V6.bridge2],
  ] as const) {
    const pod = await lab.pod(nodes[node]!, name, ip);
    await lab.echoServer(pod, { tcpPorts: [8080], udpPorts: [5353] });
    await lab.ipv6(pod, ip6, { dev: pod.ifname, gateway: bridge });
    await lab.echoServer(pod, { tcpPorts: [8080], udpPorts: [5353], host: ip6 });
  }
  client = await lab.client(clientPod);
  const client2Pod = await lab.pod(net, 'client2', `${CLIENT2_IP}/24`);
  await lab.ipv6(client2Pod, V6.client2, { dev: client2Pod.ifname });
  client2 = await lab.client(client2Pod);

  manifests = mkdtempSync(join(tmpdir(), `svcmap-tc-${lab.id}-`));
  manifestsFor(manifests);
  for (const name of ['node1', 'node2'] as const) {
    const pinDir = labPinDir(lab.id, name);
    pinDirs.push(pinDir);
    const cgroup = await lab.cgroup(name); // the socket hooks need a cgroup; nothing runs in it
    agents[name] = new AgentProcess(
      [
        '--manifests',
        manifests,
        '--cgroup',
        cgroup,
        '--pin-dir',
        pinDir,
        '--node-name',
        name,
        '--devices',
        'eth0',
        '--tc-attach',
        mode,
        '--metrics-bind-address',
        '127.0.0.1:0',
        '--healthz-bind-address',
        '127.0.0.1:0',
      ],
      (cmd, args) => lab.spawn(nodes[name]!, cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }),
    );
  }
  for (const a of Object.values(agents)) {
    await a.waitFor((l) => l.msg === 'tc datapath attached', { timeoutMs: 30000, what: 'tc datapath attached' });
    await a.waitForSync(0, 30000);
  }
}

async function tearDown(): Promise<void> {
  try {
    for (const a of Object.values(agents)) {
      a.kill('SIGTERM');
      await Promise.race([a.exited, new Promise((r) => setTimeout(r, 3000))]);
      a.kill('SIGKILL');
    }
    // Every pin directory is cleaned even when one fails; the first error is reported.
    let failed: unknown;
    for (const p of pinDirs) {
      try {
        cleanupPins(p);
      } catch (err) {
        failed ??= err;
      }
    }
    if (failed !== undefined) throw failed;
  } finally {
    if (manifests) rmSync(manifests, { recursive: true, force: true });
    unregisterTeardown(emergency);
    for (const k of Object.keys(agents)) delete agents[k];
    pinDirs.length = 0;
    manifests = '';
    await lab?.destroy();
  }
}

/** Ids of the tcx links pinned under a pin directory (by bpftool, not by svcmap's own code). */
async function pinnedTcxLinkIds(node: LabNode, pinDir: string): Promise<number[]> {
  const dir = linkPinDir(pinDir);
  const ids: number[] = [];
  for (const name of existsSync(dir) ? readdirSync(dir) : []) {
    const link = JSON.parse(await lab.exec(node, 'bpftool', ['-j', 'link', 'show', 'pinned', join(dir, name)])) as {
      id: number;
      type: string | number;
    };
    // bpftool v7.1 with a libbpf before 1.3 has no name for the tcx link type: the number.
    if (link.type === 'tcx' || link.type === LINK_TYPE_TCX) ids.push(link.id);
  }
  return ids;
}

/** Whether the kernel still has a link with this id (a pin's release can lag the unlink by an RCU grace period: polled). */
async function linkGone(node: LabNode, id: number, timeoutMs = 5000): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      await lab.exec(node, 'bpftool', ['link', 'show', 'id', String(id)]);
    } catch {
      return true; // "Error: get by id (N): No such file or directory"
    }
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}

for (const mode of ['tcx', 'tc'] as const) {
  t.test(`attached as ${mode === 'tcx' ? 'tcx links' : 'clsact + cls_bpf filters'}`, async (t) => {
    t.before(() => setUp(mode));
    t.teardown(() => tearDown());
    suite(t, mode);
  });
}

for (const mode of ['tcx', 'tc'] as const) {
  t.test(`two NICs on node1, attached as ${mode}: SNAT to the address of the device towards the backend`, async (t) => {
    const c = await startRemoteNodePort([], { twoNics: true, tcAttach: mode });
    t.teardown(() => c.destroy());
    // A pod on node1's bridge: a bridge without ports has no carrier, and no
    // device without one is a way out (the agent lists running devices only).
    const podAdded = c.agent.mark();
    await addNode1Pod(c);
    await c.agent.waitFor(
      (l) => l.msg === 'SNAT addresses updated' && (l.snatAddresses as Record<string, string> | undefined)?.br0 === '10.244.1.1',
      { from: podAdded, timeoutMs: 45_000, what: "the pod bridge's address in the device map" },
    );
    const NEW = { node1: '192.168.60.1', node2: '192.168.60.2' };

    t.test("1,000 connections to a NodePort whose backend is behind eth1: 0 failures, the pod sees eth1's address", async (t) => {
      const r = await c.client.tcpConnect({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, count: 1000, timeoutMs: 3000, concurrency: 8 });
      t.equal(r.failed, 0, JSON.stringify(r.errors));
      t.equal(r.ok, 1000);
      t.same(r.seenFrom, [LINK_IPS.node1], "node2 saw node1's address on their link, not the InternalIP (which it cannot reach)");
      t.same(r.peerNames, [`${NODE_IPS.node1}:${REMOTE_NODEPORT}`], 'the client talked to the NodePort throughout');
      const dump = JSON.parse(
        await c.lab.exec(c.node1, SVCMAP, ['dump', '--map', 'svcmap_devaddr', '-o', 'json', '--pin-dir', c.pinDir]),
      ) as { entries: Array<{ key: number; value: { addr: string } }> };
      const ifindex = async (dev: string) =>
        (JSON.parse(await c.lab.ip(c.node1, '-j', 'link', 'show', dev)) as Array<{ ifindex: number }>)[0]!.ifindex;
      const byIfindex = Object.fromEntries(dump.entries.map((e) => [e.key, e.value.addr]));
      t.same(
        byIfindex,
        { [await ifindex('eth0')]: NODE_IPS.node1, [await ifindex('eth1')]: LINK_IPS.node1, [await ifindex('br0')]: '10.244.1.1' },
        "the device map holds each device's address by ifindex (the pod bridge too)",
      );
      const status = await c.lab.exec(c.node1, SVCMAP, ['status', '--pin-dir', c.pinDir]);
      t.match(status, /SNAT ADDRESSES[^\n]*\n(?:  .*\n)*  eth1 +192\.168\.50\.1\n/, "svcmap status shows eth1's SNAT address");
    });

    t.test("eth1's address is replaced: followed without a restart, connections keep working, new ones use the new address", async (t) => {
      const pid = c.agent.child.pid;
      const from = c.agent.mark();
      // One TCP connection held across the change, exchanging a line every 20 ms (it reconnects on any error, which would be counted).
      const held = await c.client.udpStreamStart({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, intervalMs: 20, timeoutMs: 2000, tcp: true });
      // Connections run while the address changes (the flows from before keep the address their entries hold).
      const during = c.client.tcpConnect({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, count: 600, timeoutMs: 3000, concurrency: 4 });
      await c.lab.ip(c.node2, 'addr', 'add', `${NEW.node2}/24`, 'dev', 'eth1');
      await c.lab.ip(c.node1, 'addr', 'add', `${NEW.node1}/24`, 'dev', 'eth1');
      await c.lab.route(c.node1, '10.244.2.0/24', NEW.node2);
      await c.lab.route(c.node2, '10.244.1.0/24', NEW.node1);
      await c.lab.ip(c.node1, 'addr', 'del', `${LINK_IPS.node1}/24`, 'dev', 'eth1');
      const updated = await c.agent.waitFor(
        (l) => l.msg === 'SNAT addresses updated' && (l.snatAddresses as Record<string, string> | undefined)?.eth1 === NEW.node1,
        { from, timeoutMs: 45_000, what: 'the new eth1 address in the device map' },
      );
      t.same(updated.set, { eth1: NEW.node1 }, "the agent wrote eth1's new address");
      t.equal(updated.trigger, 'netlink', 'driven by the rtnetlink notification (not the 30 s re-read)');
      const r = await during;
      t.equal(r.failed, 0, `connections across the change: 0 failures ${JSON.stringify(r.errors)}`);
      t.equal(r.ok, 600);
      const after = await c.client.tcpConnect({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, count: 300, timeoutMs: 3000, concurrency: 8 });
      t.equal(after.failed, 0, JSON.stringify(after.errors));
      t.same(after.seenFrom, [NEW.node1], 'new connections are SNATed to the new address');
      const ct = JSON.parse(await c.lab.exec(c.node1, SVCMAP, ['dump', '--map', 'svcmap_ct', '-o', 'json', '--pin-dir', c.pinDir])) as {
        entries: Array<{ key: { saddr: string; sport: number; dir: number }; value: { new_saddr: string } }>;
      };
      const [heldIp, heldPort] = held.local.split(':');
      const heldFlow = ct.entries.find((e) => e.key.dir === 0 && e.key.saddr === heldIp && e.key.sport === Number(heldPort));
      t.equal(heldFlow?.value.new_saddr, LINK_IPS.node1, 'the connection held across the change keeps the address it was SNATed to');
      const stream = await c.client.udpStreamStop(held.stream!);
      t.same(stream.errors, {}, 'the held connection never failed');
      t.equal(stream.reconnects, 0, 'and never reconnected');
      t.ok(stream.events.filter((e) => e.pod === 'pod-b').length >= 2, `it kept exchanging (${stream.events.length} exchanges)`);
      t.equal(c.agent.child.exitCode, null, 'the agent is still running');
      t.equal(c.agent.child.pid, pid, 'the same agent process');
      t.notOk(
        c.agent.lines.slice(from).some((l) => l.msg === 'datapath up' || l.msg === 'datapath up (reusing pinned maps)'),
        'no restart',
      );
    });
  });
}

t.test(
  "two NICs on node1, no --devices: the InternalIP's device and the one with a gateway route, followed as routes change",
  async (t) => {
    const c = await startRemoteNodePort([], { twoNics: true, defaultDevices: true });
    t.teardown(() => c.destroy());
    const attached = await c.agent.waitFor((l) => l.msg === 'tc datapath attached', { what: 'tc datapath attached' });
    t.same(
      attached.devices,
      ['eth0', 'eth1'],
      'eth0 holds the InternalIP, eth1 routes 10.244.2.0/24 via node2; the pod bridge br0 is not one',
    );
    const r = await c.client.tcpConnect({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, count: 200, timeoutMs: 3000, concurrency: 8 });
    t.equal(r.failed, 0, JSON.stringify(r.errors));
    t.same(r.seenFrom, [LINK_IPS.node1]);

    let from = c.agent.mark();
    await c.lab.ip(c.node1, 'route', 'del', '10.244.2.0/24');
    const detached = await c.agent.waitFor((l) => l.msg === 'tc datapath detached from a device no longer used', {
      from,
      what: 'eth1 detached',
    });
    t.equal(detached.device, 'eth1', 'eth1 lost its only route out of the node: detached');
    await c.agent.waitFor((l) => l.msg === 'tc datapath attached' && JSON.stringify(l.devices) === '["eth0"]', {
      from,
      what: 'tc datapath on eth0 only',
    });
    from = c.agent.mark();
    await c.lab.route(c.node1, '10.244.2.0/24', LINK_IPS.node2);
    const again = await c.agent.waitFor((l) => l.msg === 'tc datapath attached', { from, what: 'tc datapath attached again' });
    t.same([again.devices, again.trigger], [['eth0', 'eth1'], 'netlink'], 'the route back: attached again, on the rtnetlink notification');
    const r2 = await c.client.tcpConnect({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, count: 200, timeoutMs: 3000, concurrency: 8 });
    t.equal(r2.failed, 0, JSON.stringify(r2.errors));
    t.same(r2.seenFrom, [LINK_IPS.node1]);
  },
);

function suite(t: Test, mode: 'tcx' | 'tc'): void {
  for (const f of FAMILIES) {
    const v = `IPv${f.family}`;

    t.test(`${v}: Cluster policy, remote backend: SNAT to node1, replies come back translated`, async (t) => {
      const r = await client.tcpConnect({ ip: f.node1, port: 30080, count: 50, timeoutMs: 2000, concurrency: 4 });
      t.equal(r.ok, 50, JSON.stringify(r.errors));
      t.same(r.byPod, { 'pod-b': 50 });
      t.same(r.seenFrom, [f.node1], "the backend on node2 saw node1's address");
      t.same(r.peerNames, [hostPort(f.node1, 30080)], 'the client talked to the NodePort throughout');
    });

    t.test(`${v}: Cluster policy, backend on the same node: DNAT only, the client address is kept`, async (t) => {
      const r = await client.tcpConnect({ ip: f.node2, port: 30080, count: 20, timeoutMs: 2000 });
      t.equal(r.ok, 20, JSON.stringify(r.errors));
      t.same(r.seenFrom, [f.client]);
      t.same(r.peerNames, [hostPort(f.node2, 30080)]);
    });

    t.test(`${v}: UDP through a NodePort to a remote backend`, async (t) => {
      const r = await client.udpSend({ ip: f.node1, port: 30053, count: 30, connected: false, timeoutMs: 2000 });
      t.equal(r.ok, 30, JSON.stringify(r.errors));
      t.same(r.replySources, [hostPort(f.node1, 30053)], 'replies come from the NodePort');
      t.same(r.seenFrom, [f.node1]);
    });

    t.test(`${v}: Local policy: the node with the endpoint serves it with the client address kept; the other drops`, async (t) => {
      const r = await client.tcpConnect({ ip: f.node1, port: 30081, count: 20, timeoutMs: 2000 });
      t.equal(r.ok, 20, JSON.stringify(r.errors));
      t.same(r.byPod, { 'pod-a': 20 });
      t.same(r.seenFrom, [f.client], 'client source preserved');
      const dropped = await client.tcpConnect({ ip: f.node2, port: 30081, count: 2, timeoutMs: 700 });
      t.equal(dropped.ok, 0, 'node2 has no local endpoint: dropped');
      t.same(Object.keys(dropped.errors), ['ETIMEDOUT']);
      // svcmap explain --from says the same on each node.
      const explain = async (node: 'node1' | 'node2', pinDir: string) =>
        JSON.parse(
          await lab.exec(nodes[node]!, SVCMAP, [
            'explain',
            `${hostPort(f[node], 30081)}/TCP`,
            '--from',
            f.client,
            '-o',
            'json',
            '--pin-dir',
            pinDir,
          ]),
        ) as { frontend: { scope: string; backends: Array<{ address: string }> }; verdict: { kind: string } };
      const one = await explain('node1', pinDirs[0]!);
      t.equal(one.frontend.scope, 'external', 'explain on node1: the external entry');
      t.same(
        one.frontend.backends.map((b) => b.address),
        [hostPort(f.family === 4 ? POD_A : V6.podA, 8080)],
        'with the local endpoint only',
      );
      t.equal(one.verdict.kind, 'random');
      t.equal((await explain('node2', pinDirs[1]!)).verdict.kind, 'refused', 'explain on node2: no local endpoint');
    });

    t.test(`${v}: an externalIP reaches the service`, async (t) => {
      const r = await client.tcpConnect({ ip: f.external, port: 80, count: 40, timeoutMs: 2000, concurrency: 4 });
      t.equal(r.ok, 40, JSON.stringify(r.errors));
      t.same(Object.keys(r.byPod).sort(), ['pod-a', 'pod-b']);
      t.same(r.peerNames, [hostPort(f.external, 80)]);
    });

    t.test(`${v}: 1,000 connections through a NodePort with both backends: 0 failures`, async (t) => {
      const r = await client.tcpConnect({ ip: f.node1, port: 30082, count: 1000, timeoutMs: 3000, concurrency: 8 });
      t.equal(r.failed, 0, JSON.stringify(r.errors));
      t.equal(r.ok, 1000);
      t.ok((r.byPod['pod-a'] ?? 0) > 300 && (r.byPod['pod-b'] ?? 0) > 300, `both backends used: ${JSON.stringify(r.byPod)}`);
      t.same([...r.seenFrom].sort(), [f.client, f.node1].sort(), 'the local backend saw the client, the remote one saw node1');
    });

    t.test(`${v}: sessionAffinity ClientIP: new connections from one client address reach one backend`, async (t) => {
      const byClient: Record<string, string[]> = {};
      for (const [ip, c] of [
        [f.client, client],
        [f.client2, client2],
      ] as const) {
        const r = await c.tcpConnect({ ip: f.node1, port: 30083, count: 40, timeoutMs: 2000, concurrency: 4 });
        t.equal(r.ok, 40, JSON.stringify(r.errors));
        byClient[ip] = Object.keys(r.byPod);
        t.equal(byClient[ip].length, 1, `${ip}: 40 connections (40 flows), one backend: ${JSON.stringify(r.byPod)}`);
      }
      const again = await client.tcpConnect({ ip: f.node1, port: 30083, count: 15, timeoutMs: 2000 });
      t.same(Object.keys(again.byPod), byClient[f.client], `${f.client}: 15 more, the same backend`);
      const aff = JSON.parse(
        await lab.exec(nodes.node1!, SVCMAP, ['dump', '--map', 'svcmap_affin', '-o', 'json', '--pin-dir', pinDirs[0]!]),
      ) as { entries: Array<{ key: { client_addr: string; origin: string; netns_cookie: string } }> };
      const origin = f.family === 4 ? 'tc' : 'tc6';
      const ours = aff.entries.filter((e) => e.key.origin === origin);
      if (f.family === 4) {
        t.same(ours.map((e) => e.key.client_addr).sort(), [CLIENT_IP, CLIENT2_IP], 'node1 remembers each client address once');
        t.ok(
          ours.every((e) => e.key.netns_cookie === '0'),
          'as tc entries',
        );
      } else {
        t.equal(ours.length, 2, 'node1 remembers each IPv6 client once (its /64 and folded interface id, origin tc6)');
      }
      // svcmap explain --from finds the entry the datapath wrote for each client, and its backend.
      const podAddress: Record<string, string> =
        f.family === 4 ? { 'pod-a': POD_A, 'pod-b': POD_B } : { 'pod-a': V6.podA, 'pod-b': V6.podB };
      for (const ip of [f.client, f.client2]) {
        const e = JSON.parse(
          await lab.exec(nodes.node1!, SVCMAP, [
            'explain',
            `${hostPort(f.node1, 30083)}/TCP`,
            '--from',
            ip,
            '-o',
            'json',
            '--pin-dir',
            pinDirs[0]!,
          ]),
        ) as { path: string; verdict: { kind: string; backend?: { address: string } } };
        t.match(
          e,
          { path: 'tc', verdict: { kind: 'affinity', backend: { address: hostPort(podAddress[byClient[ip]![0]!]!, 8080) } } },
          `explain --from ${ip}: the backend it reached`,
        );
      }
      const mixed = await client.tcpConnect({ ip: f.node1, port: 30082, count: 40, timeoutMs: 2000, concurrency: 4 });
      t.same(Object.keys(mixed.byPod).sort(), ['pod-a', 'pod-b'], 'the service without affinity still spreads the same client');
    });
  }

  t.test('healthCheckNodePort: 200 with the local endpoint count on node1, 503 on node2, over either family', async (t) => {
    const get = async (ip: string) =>
      JSON.parse(
        await lab.exec(clientPod, process.execPath, [
          '-e',
          `fetch('http://${hostPort(ip, HC_PORT)}/').then(async (r) => console.log(JSON.stringify({ status: r.status, body: await r.json() })))`,
        ]),
      ) as { status: number; body: { service: { namespace: string; name: string }; localEndpoints: number } };
    for (const f of FAMILIES) {
      const one = await get(f.node1);
      t.equal(one.status, 200, `IPv${f.family}: node1`);
      t.same(one.body.service, { namespace: 'default', name: 'local' });
      t.equal(one.body.localEndpoints, 1, `IPv${f.family}: one local endpoint (the dual-stack pod counts once)`);
      const two = await get(f.node2);
      t.equal(two.status, 503, `IPv${f.family}: node2`);
      t.equal(two.body.localEndpoints, 0);
    }
  });

  t.test('svcmap status shows the attachments; cleanup removes them', async (t) => {
    const status = await lab.exec(nodes.node1!, SVCMAP, ['status', '--pin-dir', pinDirs[0]!]);
    if (mode === 'tcx') {
      t.match(status, /tcx\/ingress\s+svcmap_tc_in\s+.*tcx link on device eth0/);
      t.match(status, /tcx\/egress\s+svcmap_tc_out\s+.*tcx link on device eth0/);
    } else {
      t.match(status, /tc\/ingress\s+svcmap_tc_in\s+.*tc filter \(clsact\) on device eth0/);
      t.match(status, /tc\/egress\s+svcmap_tc_out\s+.*tc filter \(clsact\) on device eth0/);
      t.match(await lab.exec(nodes.node1!, 'tc', ['filter', 'show', 'dev', 'eth0', 'ingress']), /svcmap_tc_in.*direct-action/);
    }
    t.match(status, /svcmap_ct\s+lru_hash\s+[1-9]\d*\//);
    t.match(status, /svcmap_ct6\s+lru_hash\s+[1-9]\d*\//, 'the IPv6 flows are in svcmap_ct6');
    t.match(status, /SNAT ADDRESSES[^\n]*\n(?:  .*\n)*  eth0 +fd00:192:168:100::11\n/, "and eth0's IPv6 SNAT address is listed");
    const ct = JSON.parse(await lab.exec(nodes.node1!, SVCMAP, ['dump', '--map', 'svcmap_ct', '-o', 'json', '--pin-dir', pinDirs[0]!])) as {
      entries: Array<{ value: { flags: string[] } }>;
    };
    t.ok(
      ct.entries.some((e) => e.value.flags.includes('snat')),
      'dump shows conntrack flags by name (the flows SNATed to the remote backend)',
    );
    const tcxLinks = await pinnedTcxLinkIds(nodes.node1!, pinDirs[0]!);
    if (mode === 'tcx') t.ok(tcxLinks.length >= 2, `the tcx links are pinned (ids ${tcxLinks.join(', ')})`);
    else t.same(tcxLinks, [], 'no tcx link pinned in classic tc mode');
    for (const id of tcxLinks) t.notOk(await linkGone(nodes.node1!, id, 0), `bpftool finds tcx link ${id} by id before the cleanup`);
    // svcmap cleanup, run on the node as an operator would (after stopping the agent).
    const agent = agents.node1!;
    agent.kill('SIGTERM');
    await agent.exited;
    await lab.exec(nodes.node1!, SVCMAP, ['cleanup', '--pin-dir', pinDirs[0]!]);
    t.equal((await lab.exec(nodes.node1!, 'tc', ['filter', 'show', 'dev', 'eth0', 'ingress'])).trim(), '', 'no ingress filter left');
    t.equal((await lab.exec(nodes.node1!, 'tc', ['filter', 'show', 'dev', 'eth0', 'egress'])).trim(), '', 'no egress filter left');
    for (const id of tcxLinks) t.ok(await linkGone(nodes.node1!, id), `tcx link ${id} is gone`);
    t.notOk(existsSync(pinDirs[0]!), 'the pins are gone');
    const r = await client.tcpConnect({ ip: NODE_IPS.node1, port: 30082, count: 1, timeoutMs: 500 });
    t.equal(r.ok, 0, 'nothing translates NodePorts on node1 any more');
  });
}
