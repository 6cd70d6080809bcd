// Upgrades as an operator runs them (make e2e): the previous release
// (RELEASES; its chart and image built from its own commit, lab/release)
// installed by helm on the two-node lab cluster, then `helm upgrade` to this
// build, `helm rollback`, the upgrade again and an upgrade that only grows a
// map through a chart value, while traffic runs: pods connect again and
// again to a ClusterIP and to the other node's NodePort, the outside
// namespace to each node's NodePort, and long-lived TCP flows from outside to
// the NodePorts (tc, conntrack; some to the other node's backend, SNATed) stay
// open across every phase. When this build knows the test layout
// (SVCMAP_TEST_LAYOUT=1 through the chart's extraEnv: the backend map with a
// reserved field), the upgrade crosses a map layout change and the rollback
// crosses it back. Per phase: connections tried and failed in each direction
// (printed), 0 failed; afterwards the maps on each node (svcmap dump in its
// agent) are exactly what the API server says and no old pins are left.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import t, { type Test } from 'tap';
import { parse } from 'yaml';
import { Cluster } from '../../lab/cluster/cluster.ts';
import { EVENT_TIMEOUT_MS, waitUntil } from '../../lab/cluster/component.ts';
import { CHART, Helm } from '../../lab/cluster/helm.ts';
import { buildImages } from '../../lab/cluster/images/index.ts';
import { REPO_ROOT } from '../../lab/cluster/paths.ts';
import {
  AGENT_SELECTOR,
  chartValues,
  helmFor,
  type ImageRef,
  NAMESPACE,
  PIN_DIR,
  RELEASE,
  splitRef,
  svcmapDiagnostics,
  waitAgentsReady,
} from '../../lab/cluster/svcmap.ts';
import { buildRelease } from '../../lab/release/build.ts';
import { TEST_LAYOUT_ENV } from '../../src/bpf/test-layout.ts';
import { SVCMAP_MAP_BACKENDS, SVCMAP_MAP_CT } from '../../src/maps/generated/constants.gen.ts';
import { previousRelease, releasesFile } from '../../lab/release/releases.ts';
import { type ApiService, type ApiSlice, type DumpFrontend, mapsVersusApi } from './fixtures/api-maps.ts';
import { HeldFlow, Loops, type PhaseCounts } from './fixtures/traffic.ts';
import { NS, PORTS, workloads } from './fixtures/workloads.ts';

const log = (l: string) => t.comment(l);
const version = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const from = previousRelease(releasesFile(), version);
const previous = await buildRelease(from, log);
const images = await buildImages({ only: ['pause', 'labtool', 'svcmap'], log });
const labtoolRef = images.get('labtool')!.ref;
const labtool = images.get('labtool')!.binary!;
const current = splitRef(images.get('svcmap')!.ref);
// The release's image under its release name, as a registry would have it.
const released: ImageRef = { repository: 'localhost/svcmap', tag: from.version.replace(/^v/, '') };

// The upgrade changes a map's layout (the test layout: SVCMAP_TEST_LAYOUT=1) when
// both this build and the release migrate pinned maps across layouts (the
// rollback crosses it back); until then it keeps the layouts.
const MIGRATION = join('src', 'maps', 'migration', 'migrate.ts');
const migrates = (root: string) => existsSync(join(root, MIGRATION));
const crossLayout = migrates(REPO_ROOT) && migrates(dirname(dirname(previous.chart)));
const testLayoutEnv = crossLayout ? TEST_LAYOUT_ENV : undefined;
// A value that sizes a map, once the chart has one.
const chartDefaults = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;
const sizeValue = ['maxBackends', 'conntrackSize'].find((v) => typeof chartDefaults[v] === 'number');

const cluster = await Cluster.up({ images: [...[...images.values()].map((i) => i.archive), previous.archive], log });
let diagnosed = false;
const diagnose = async () => {
  if (diagnosed || t.passing()) return;
  diagnosed = true;
  t.comment(await svcmapDiagnostics(cluster));
};
const flowDir = mkdtempSync(join(tmpdir(), 'svcmap-held-'));
t.teardown(async () => {
  await diagnose();
  for (const r of cluster.kubeletRestarts()) t.comment(`kubelet restart: ${r}`);
  await cluster.down();
  rmSync(flowDir, { recursive: true, force: true });
});
const k = cluster.kubectl;
const nodes = cluster.nodes;
const nodeIp = (name: string) => cluster.net.nodes.find((n) => n.name === name)!.ip;
const helm = helmFor(cluster);
const lines = (s: string) =>
  s
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);

for (const n of nodes) await n.tagImage(previous.imageRef, `${released.repository}:${released.tag}`);
t.comment(
  `upgrade from ${from.version} (${from.commit}${from.provisional ? ', provisional' : ''}: ${previous.imageRef}) to ${version} (${current.repository}:${current.tag})`,
);
t.comment(
  `layout change: ${testLayoutEnv ? `${testLayoutEnv}=1 on the upgrade` : `none (${MIGRATION} missing in ${migrates(REPO_ROOT) ? from.version : 'this build'}): the upgrade keeps the layouts`}`,
);

interface AgentPod {
  metadata: { name: string };
  spec: { nodeName: string; containers: Array<{ name: string; image: string; env?: Array<{ name: string; value?: string }> }> };
  status?: { containerStatuses?: Array<{ name: string; state?: { running?: { startedAt?: string } } }> };
}
const agents = async () => (await k.json<{ items: AgentPod[] }>(['-n', NAMESPACE, 'get', 'pods', '-l', AGENT_SELECTOR])).items;

/** Both agents run `image` (and, when asked, with the test layout's variable set). */
async function checkAgents(t: Test, image: ImageRef, testLayout: boolean): Promise<void> {
  const pods = await agents();
  t.same(pods.map((p) => p.spec.nodeName).sort(), ['node1', 'node2'], 'an agent on each node');
  for (const p of pods) {
    const c = p.spec.containers.find((x) => x.name === 'agent')!;
    t.equal(c.image, `${image.repository}:${image.tag}`, `${p.spec.nodeName}: the agent runs ${c.image}`);
    if (testLayoutEnv)
      t.equal(
        c.env?.some((e) => e.name === testLayoutEnv && e.value === '1'),
        testLayout,
        `${p.spec.nodeName}: ${testLayoutEnv}=1: ${testLayout}`,
      );
    const v = await k.run(['-n', NAMESPACE, 'exec', p.metadata.name, '-c', 'agent', '--', 'svcmap', 'version']);
    // When it started: a failure's time (printed with it) says which agent's datapath served it.
    const started = p.status?.containerStatuses?.find((x) => x.name === 'agent')?.state?.running?.startedAt;
    t.comment(`${p.spec.nodeName}: ${lines(v)[0]} (started ${started} = ${started ? Date.parse(started) : '?'})`);
  }
}

/** helm upgrade (not --reuse-values: the values an operator keeps in a file) and the agents Ready. */
async function upgrade(chart: string, image: ImageRef, extra: { testLayout: boolean; sets?: Record<string, string> }): Promise<void> {
  const env =
    extra.testLayout && testLayoutEnv ? ['--set', `extraEnv[0].name=${testLayoutEnv}`, '--set-string', 'extraEnv[0].value=1'] : [];
  await helm.run(['upgrade', RELEASE, chart, '-n', NAMESPACE, ...Helm.sets({ ...chartValues(cluster, image), ...extra.sets }), ...env]);
  await waitAgentsReady(cluster);
}

/**
 * Each node's maps (svcmap dump in its agent: the agent's own build reads its
 * own layout) against the API; no old pins. The API and the maps are read
 * one after the other, so a change between the two reads (an EndpointSlice
 * the agent already has) is read again until they agree or 30 s pass.
 */
async function checkDatapath(t: Test): Promise<void> {
  for (const p of await agents()) {
    const node = cluster.net.nodes.find((n) => n.name === p.spec.nodeName)!;
    let diffs: string[] = [];
    let frontends = 0;
    const agree = async () => {
      const services = (await k.json<{ items: ApiService[] }>(['get', 'services', '-A'])).items;
      const slices = (await k.json<{ items: ApiSlice[] }>(['get', 'endpointslices', '-A'])).items;
      const dump = JSON.parse(
        await k.run(['-n', NAMESPACE, 'exec', p.metadata.name, '-c', 'agent', '--', 'svcmap', 'dump', '--pin-dir', PIN_DIR, '-o', 'json']),
      ) as { frontends: DumpFrontend[] };
      frontends = dump.frontends.length;
      diffs = mapsVersusApi(dump.frontends, services, slices, { name: node.name, addresses: [node.ip, node.ip6] });
      return diffs.length === 0;
    };
    await waitUntil(`${node.name}: the maps and the API to agree`, agree, { timeoutMs: EVENT_TIMEOUT_MS, intervalMs: 1000 }).catch(
      () => {},
    );
    t.same(diffs, [], `${node.name}: the maps are what the API server says (${frontends} frontends)`);
    const n = nodes.find((x) => x.name === node.name)!;
    const migrating = join(PIN_DIR, 'migrating');
    const left = await n.exec('sh', ['-c', `[ -d "$1" ] && ls -A "$1" || true`, 'sh', migrating]);
    t.same(lines(left), [], `${node.name}: nothing under ${migrating}`);
  }
}

const vip = async (svc: string) => (await k.run(['-n', NS, 'get', 'service', svc, '-o', 'jsonpath={.spec.clusterIP}'])).trim();

/**
 * Loops in every direction around `action`; the counts printed, 0 failed; then the datapath checked.
 *
 * `sharePorts`: each node's pod -> ClusterIP and pod -> NodePort loops run in
 * one pod, so that they share its ephemeral ports. A ClusterIP connection
 * then often starts from the port of a NodePort connection a few seconds
 * old, sent straight (socket LB) to the backend the NodePort flow went to on
 * the other node; that node's conntrack still holds the closed flow's reply
 * entry, keyed by exactly the new connection's answers. This build forgets
 * such a flow at the new SYN (ct_forget_replaced(), bpf/lib/ct.h);
 * v0.1.0's datapath does not and rewrites the SYN-ACK to come from the
 * NodePort, and the connection times out. So the phases in which the
 * previous release serves a node run each direction in a pod of its own;
 * the phase with this build on both sides shares the ports.
 */
async function phase(t: Test, name: string, action: () => Promise<void>, opts: { sharePorts: boolean }): Promise<void> {
  const loops = new Loops(cluster);
  const ip = await vip('echo');
  for (const [n, other] of [
    ['node1', 'node2'],
    ['node2', 'node1'],
  ] as const) {
    const clusterIp = {
      name: 'pod -> ClusterIP',
      target: `${ip}:${PORTS.tcp.port}`,
      container: 'clusterip',
      host: ip,
      port: PORTS.tcp.port,
    };
    const nodePort = {
      name: 'pod -> NodePort',
      target: `${nodeIp(other)}:${PORTS.tcp.nodePort}`,
      container: 'nodeport',
      host: nodeIp(other),
      port: PORTS.tcp.nodePort,
    };
    if (opts.sharePorts) await loops.pod(`loop-${name}-${n}`, labtoolRef, n, [clusterIp, nodePort]);
    else for (const l of [clusterIp, nodePort]) await loops.pod(`loop-${name}-${n}-${l.container}`, labtoolRef, n, [l]);
  }
  for (const n of cluster.net.nodes) {
    loops.outside(labtool, { name: 'outside -> NodePort', target: `${n.ip}:${PORTS.tcp.nodePort}` }, n.ip, PORTS.tcp.nodePort);
  }
  await action();
  const counts = await loops.stop();
  t.comment(`${name}: ${counts.map(countLine).join('; ')}`);
  for (const c of counts) {
    t.ok(c.tried > 0, `${name}: ${c.direction}: ${c.tried} connections tried`);
    t.equal(c.failed, 0, `${name}: ${c.direction}: 0 failed (${c.failed} of ${c.tried}${errorsOf(c)})`);
  }
  await checkDatapath(t);
}
const errorsOf = (c: PhaseCounts) => (c.failedLoops.length ? `: ${c.failedLoops.join('; ')}` : '');
const countLine = (c: PhaseCounts) =>
  `${c.direction} ${c.tried} tried, ${c.failed} failed${c.portsReused ? ` (${c.portsReused} from a port the pod's other loop had used)` : ''}${errorsOf(c)}`;

t.test(`helm install ${from.version}: its chart and image`, async (t) => {
  await helm.run(['install', RELEASE, previous.chart, '-n', NAMESPACE, ...Helm.sets(chartValues(cluster, released))]);
  await waitAgentsReady(cluster);
  await checkAgents(t, released, false);
});

t.test('workloads: echo on both nodes, ClusterIP and NodePort Services', async (t) => {
  await k.apply(workloads(labtoolRef));
  for (const d of ['echo', 'local'])
    await k.run(['-n', NS, 'rollout', 'status', `deployment/${d}`, '--timeout=120s'], { timeoutMs: 130_000 });
  await checkDatapath(t);
});

const held: HeldFlow[] = [];
t.test('long-lived TCP flows from outside to each NodePort, some to the other node (SNAT)', async (t) => {
  const pods = await k.json<{ items: Array<{ metadata: { name: string }; spec: { nodeName: string } }> }>([
    '-n',
    NS,
    'get',
    'pods',
    '-l',
    'app=echo',
  ]);
  const nodeOf = new Map(pods.items.map((p) => [p.metadata.name, p.spec.nodeName]));
  // Two per node, more until each node holds one flow to the other node's backend (the backend is random).
  const crossed = new Set<string>();
  for (let i = 0; i < 24 && (held.length < 4 || crossed.size < 2); i++) {
    const n = cluster.net.nodes[i % 2]!;
    const f = new HeldFlow(cluster, labtool, n.ip, PORTS.tcp.nodePort, join(flowDir, `stop-${i}`));
    held.push(f);
    const server = await f.server();
    if (nodeOf.get(server) !== n.name) crossed.add(n.name);
    t.comment(`held flow ${i + 1}: ${f.target} -> ${server} on ${nodeOf.get(server)}`);
  }
  t.same([...crossed].sort(), ['node1', 'node2'], 'a held flow through each node to the other node');
});

t.test(`upgrade to ${version}${testLayoutEnv ? ` with ${testLayoutEnv}=1 (a map layout change)` : ''}`, async (t) => {
  await phase(t, 'upgrade', () => upgrade(CHART, current, { testLayout: true }), { sharePorts: false });
  await checkAgents(t, current, true);
});

t.test(`helm rollback to ${from.version}`, async (t) => {
  await phase(
    t,
    'rollback',
    async () => {
      await helm.run(['rollback', RELEASE, '1', '-n', NAMESPACE]);
      await waitAgentsReady(cluster);
    },
    { sharePorts: false },
  );
  await checkAgents(t, released, false);
});

t.test(`upgrade to ${version} again`, async (t) => {
  await phase(t, 'again', () => upgrade(CHART, current, { testLayout: true }), { sharePorts: false });
  await checkAgents(t, current, true);
});

t.test(
  'an upgrade that only grows a map through a chart value',
  { skip: sizeValue ? false : 'the chart has no map size value yet' },
  async (t) => {
    const value = sizeValue!;
    const size = String((chartDefaults[value] as number) * 2);
    await phase(t, 'resize', () => upgrade(CHART, current, { testLayout: true, sets: { [value]: size } }), { sharePorts: true });
    await checkAgents(t, current, true);
    // The map the value sizes, as each node has it pinned now.
    const map = value === 'maxBackends' ? SVCMAP_MAP_BACKENDS : SVCMAP_MAP_CT;
    for (const n of nodes) {
      const status = JSON.parse(await n.exec(join(REPO_ROOT, 'bin', 'svcmap'), ['status', '--pin-dir', PIN_DIR, '-o', 'json'])) as {
        maps: Array<{ name: string; maxEntries: number }>;
      };
      const got = status.maps.find((m) => m.name === map)?.maxEntries;
      t.equal(got, Number(size), `${n.name}: ${map} holds ${size} entries (${value}=${size})`);
    }
  },
);

t.test('the held flows: one socket each, answered throughout, no error, no timeout', async (t) => {
  for (const f of held) {
    const events = await f.stop();
    const summary = events.find((e) => e.event === 'summary');
    const replies = Object.values(summary?.replies ?? {}).reduce((a, b) => a + b, 0);
    t.comment(`held ${f.target}: ${JSON.stringify(summary)}`);
    t.equal(summary?.sockets, 1, `${f.target}: one socket from start to end`);
    t.same(summary?.errors ?? {}, {}, `${f.target}: no socket error`);
    t.equal(summary?.timeouts ?? 0, 0, `${f.target}: every request answered`);
    t.ok(replies > 0, `${f.target}: ${replies} replies`);
    t.equal(Object.keys(summary?.replies ?? {}).length, 1, `${f.target}: one backend throughout`);
  }
});

t.test('after it all: the maps are what the API server says on each node', async (t) => {
  await waitUntil('the agents Ready', async () => (await agents()).length === 2, { timeoutMs: EVENT_TIMEOUT_MS });
  await checkDatapath(t);
});
