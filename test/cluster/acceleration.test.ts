// The chart's `acceleration` value on the lab cluster: svcmap installed by
// Helm, switched to `acceleration: native` on the live release, then back to
// `disabled`. What a user sees: NodePort from the outside namespace keeps
// answering over both families, TCP and UDP, on both nodes (the backends one
// on each node, so every node has a local and a remote one); `svcmap status`
// says each node's external device runs XDP in driver mode (the nodes' eth0
// are veths, which have native XDP), with forwarding left to tc while the
// switch side of each veth has neither GRO nor XDP (a veth's default, as a
// kind node's host side), XDP forwarding once the switch ports get GRO (the
// agents notice without a restart), and, after the switch back, tc only; and
// the packets from outside were counted at the XDP hook. Which of them XDP
// translated itself and which it passed on to tc depends on the senders'
// checksums (a local socket's are partial, which XDP leaves to tc: see
// docs/architecture-datapath.md); the namespace test
// test/e2e/xdp-nodeport.test.ts shows the translation at XDP itself.
import t, { type Test } from 'tap';
import { EVENT_TIMEOUT_MS, waitUntil } from '../../lab/cluster/component.ts';
import { CHART, Helm } from '../../lab/cluster/helm.ts';
import { NAMESPACE, RELEASE, helmFor, installSvcmap, splitRef, waitAgentsReady } from '../../lab/cluster/svcmap.ts';
import { labClusterWithImages, svcmapStatus } from './fixtures/lab-svcmap.ts';

const { cluster, ref, labtoolBinary } = await labClusterWithImages(t);
const k = cluster.kubectl;
const outsideTool = (args: readonly string[]) => k.exec(labtoolBinary, args, { timeoutMs: 120_000 });
const lines = (s: string) =>
  s
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);

const NS = 'svcmap-accel';
const APP = 'web';
const TCP_PORT = 30181;
const UDP_PORT = 30182;
/** labtool's HTTP server: /clientip answers with the address the backend sees. */
const HTTP_PORT = 30183;

function workloads(image: string): string {
  const items = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: APP, namespace: NS },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: APP } },
        template: {
          metadata: { labels: { app: APP } },
          spec: {
            terminationGracePeriodSeconds: 1,
            // One backend per node: each node then has a local and a remote one.
            topologySpreadConstraints: [
              {
                maxSkew: 1,
                topologyKey: 'kubernetes.io/hostname',
                whenUnsatisfiable: 'DoNotSchedule',
                labelSelector: { matchLabels: { app: APP } },
              },
            ],
            containers: [
              {
                name: 'serve',
                image,
                imagePullPolicy: 'IfNotPresent',
                args: ['serve', '--tcp', '8080', '--udp', '8081', '--http', '8082'],
                env: [{ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
                readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1 },
              },
            ],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: APP, namespace: NS },
      spec: {
        type: 'NodePort',
        selector: { app: APP },
        ipFamilyPolicy: 'RequireDualStack',
        ipFamilies: ['IPv4', 'IPv6'],
        ports: [
          { name: 'tcp', port: 80, targetPort: 8080, protocol: 'TCP', nodePort: TCP_PORT },
          { name: 'udp', port: 81, targetPort: 8081, protocol: 'UDP', nodePort: UDP_PORT },
          { name: 'http', port: 82, targetPort: 8082, protocol: 'TCP', nodePort: HTTP_PORT },
        ],
      },
    },
  ];
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
}

interface Status {
  devices: Array<{ device: string; runs: string }>;
  counters: Array<{ hook: string; reason: string; packets: number }>;
}
const statusOf = (n: (typeof cluster.nodes)[number]) => svcmapStatus<Status>(n);
const xdpPackets = (s: Status) => s.counters.filter((c) => c.hook === 'xdp').reduce((sum, c) => sum + c.packets, 0);

let backends: string[] = [];

async function setValues(values: Record<string, string>): Promise<void> {
  await helmFor(cluster).run(['upgrade', RELEASE, CHART, '-n', NAMESPACE, '--reuse-values', ...Helm.sets(values)]);
  await waitAgentsReady(cluster);
}
const setAcceleration = (value: 'native' | 'disabled') => setValues({ acceleration: value });

/** The addresses the backends saw for `count` HTTP requests from the outside namespace to ip's NodePort (no port). */
async function clientAddresses(ip: string, count: number): Promise<string[]> {
  const url = `http://${ip.includes(':') ? `[${ip}]` : ip}:${HTTP_PORT}/clientip`;
  const seen: string[] = [];
  for (let i = 0; i < count; i++)
    seen.push(
      (await outsideTool(['http', url]))
        .trim()
        .replace(/:\d+$/, '')
        .replace(/^\[|\]$/g, ''),
    );
  return seen;
}

/** NodePort from the outside namespace on every node address, both families, TCP and UDP. */
async function nodePortsAnswer(t: Test): Promise<void> {
  for (const n of cluster.nodes) {
    for (const ip of [n.opts.net.ip, n.opts.net.ip6]) {
      const tcp = lines(await outsideTool(['tcp', ip, String(TCP_PORT), '40']));
      t.equal(tcp.length, 40, `${n.name} ${ip}:${TCP_PORT} TCP: 40 connections answered`);
      t.same([...new Set(tcp)].sort(), backends, `${n.name} ${ip}: both backends, local and remote`);
      const udp = lines(await outsideTool(['udp', ip, String(UDP_PORT), '10']));
      t.equal(udp.length, 10, `${n.name} ${ip}:${UDP_PORT} UDP: 10 replies from the node address`);
    }
  }
}

t.test('svcmap installed, one backend on each node behind a dual-stack NodePort', async (t) => {
  await installSvcmap(cluster, splitRef(ref('svcmap')));
  await k.apply(workloads(ref('labtool')));
  await k.run(['-n', NS, 'rollout', 'status', `deployment/${APP}`, '--timeout=120s'], { timeoutMs: 130_000 });
  const pods = await k.json<{ items: Array<{ metadata: { name: string }; spec: { nodeName: string } }> }>([
    '-n',
    NS,
    'get',
    'pods',
    '-l',
    `app=${APP}`,
  ]);
  backends = pods.items.map((p) => p.metadata.name).sort();
  t.same(new Set(pods.items.map((p) => p.spec.nodeName)).size, 2, 'one backend on each node');
  for (const n of cluster.nodes)
    t.same(
      (await statusOf(n)).devices.map((d) => d.runs),
      ['tc only'],
      `${n.name}: tc only by default`,
    );
});

/** What status says of a node's eth0 with XDP in driver mode while the switch side takes no XDP frames. */
const LEFT_TO_TC = 'xdp native; forwarding left to tc: the peer takes no XDP frames';
/** The switch side of each node's eth0 (lab/cluster/topology.ts). */
const switchPort = (n: (typeof cluster.nodes)[number]) => `s-${n.name}`.slice(0, 15);
const switchGro = async (on: boolean) => {
  for (const n of cluster.nodes) await cluster.lab.exec(cluster.net.switch, 'ethtool', ['-K', switchPort(n), 'gro', on ? 'on' : 'off']);
};

t.test('acceleration: native on the live release: XDP in driver mode on each node, NodePort from outside answered', async (t) => {
  await setAcceleration('native');
  for (const n of cluster.nodes) {
    await waitUntil(`${n.name}: XDP in driver mode`, async () => (await statusOf(n)).devices.some((d) => d.runs === LEFT_TO_TC), {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
  }
  const before = await Promise.all(cluster.nodes.map(statusOf));
  await nodePortsAnswer(t);
  for (const [i, n] of cluster.nodes.entries()) {
    const s = await statusOf(n);
    t.same(
      s.devices.map((d) => d.runs),
      [LEFT_TO_TC],
      `${n.name}: svcmap status says the external device runs XDP natively, forwarding left to tc: the switch side has no GRO (${JSON.stringify(s.devices)})`,
    );
    const seen = xdpPackets(s) - xdpPackets(before[i]!);
    t.ok(
      seen > 0,
      `${n.name}: ${seen} packets from outside counted at the xdp hook (${JSON.stringify(s.counters.filter((c) => c.hook === 'xdp'))})`,
    );
  }
});

t.test("the switch side's GRO on: each agent notices, XDP forwards, NodePort from outside answered", async (t) => {
  t.teardown(() => switchGro(false));
  await switchGro(true);
  for (const n of cluster.nodes) {
    await waitUntil(`${n.name}: XDP forwards`, async () => (await statusOf(n)).devices.every((d) => d.runs === 'xdp native'), {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
  }
  await nodePortsAnswer(t);
});

t.test('acceleration: disabled again: tc only, XDP detached, NodePort still answered', async (t) => {
  await setAcceleration('disabled');
  for (const n of cluster.nodes) {
    await waitUntil(`${n.name}: tc only`, async () => (await statusOf(n)).devices.every((d) => d.runs === 'tc only'), {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    const links = await n.exec('bpftool', ['link', 'show']);
    t.notMatch(links, /type xdp/, `${n.name}: no XDP link left`);
  }
  await nodePortsAnswer(t);
});

t.test(
  'lbMode: dsr with acceleration native: every backend, remote ones too, sees the outside client; NodePort answered from the node address',
  async (t) => {
    // Before: with the default (snat) a remote backend sees the node that forwarded.
    const node1 = cluster.nodes[0]!;
    const snat = new Set(await clientAddresses(node1.opts.net.ip, 20));
    t.ok(snat.has(node1.opts.net.ip), `snat: a remote backend saw node1's address (${[...snat].join(', ')})`);
    await setValues({ acceleration: 'native', lbMode: 'dsr' });
    for (const n of cluster.nodes) {
      await waitUntil(
        `${n.name}: XDP in driver mode`,
        async () => (await statusOf(n)).devices.some((d) => d.runs.startsWith('xdp native')),
        {
          timeoutMs: EVENT_TIMEOUT_MS,
          intervalMs: 500,
        },
      );
    }
    await nodePortsAnswer(t);
    const outside = cluster.net.outside;
    for (const n of cluster.nodes) {
      for (const [ip, client] of [
        [n.opts.net.ip, outside.ip],
        [n.opts.net.ip6, outside.ip6],
      ] as const) {
        const seen = await clientAddresses(ip, 20);
        t.same([...new Set(seen)], [client], `${n.name} ${ip}:${HTTP_PORT}: 20 requests, the backends saw only the client ${client}`);
      }
      const s = await svcmapStatus<{ counters: Array<{ hook: string; reason: string; packets: number }> }>(n);
      const accepted = s.counters.filter((c) => c.reason === 'dsr_accepted').reduce((sum, c) => sum + c.packets, 0);
      t.ok(accepted > 0, `${n.name}: ${accepted} packets from the other node accepted as direct server return (dsr_accepted)`);
    }
  },
);
