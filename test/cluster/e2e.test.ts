// The real-cluster e2e (make e2e): svcmap as its users run it. A real
// Kubernetes v1.34 cluster (lab/cluster: kube-apiserver, kube-controller-
// manager, kube-scheduler, two kubelets with containerd, no kube-proxy), the
// images built locally, svcmap installed by its Helm chart as a DaemonSet,
// then from real pods and from outside the cluster: ClusterIP TCP and UDP,
// a RequireDualStack and an IPv6 SingleStack Service over both families (the
// cluster is dual-stack), the kubernetes Service, DNS through the kube-dns Service (CoreDNS reaches
// the API server only through svcmap), NodePort and externalIPs with both
// traffic policies, a dual-stack LoadBalancer with loadBalancerSourceRanges
// from outside over both families, `helm test`, `helm upgrade` to a new image tag while a
// client loops (0 failed connections), stale-socket termination of pods'
// connected sockets (UDP by default, TCP with staleSockets.tcp) when their
// backend leaves the Service, a pod's hostPorts served by svcmap (the nodes'
// CNI has no portmap) from outside and from the node, and `helm uninstall` leaving no
// programs, links or pins on either node. On failure: the agents' logs and
// `svcmap status` of each node.
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { deployCoreDns } from '../../lab/cluster/addons.ts';
import { Cluster } from '../../lab/cluster/cluster.ts';
import { Helm } from '../../lab/cluster/helm.ts';
import { buildImages } from '../../lab/cluster/images/index.ts';
import {
  AGENT_SELECTOR,
  helmFor,
  installSvcmap,
  NAMESPACE,
  PIN_DIR,
  RELEASE,
  splitRef,
  svcmapDiagnostics,
  waitAgentsReady,
} from '../../lab/cluster/svcmap.ts';
import { CHART } from '../../lab/cluster/helm.ts';
import { EVENT_TIMEOUT_MS, waitUntil } from '../../lab/cluster/component.ts';
import { REPO_ROOT, stateDir } from '../../lab/cluster/paths.ts';
import { listNetns } from '../../lab/netns.ts';
import {
  clientPod,
  HOST_PORTS,
  hostPortWorkloads,
  EXTERNAL_IP_CLUSTER,
  EXTERNAL_IP_LOCAL,
  LB_IPS,
  lbService,
  NS,
  PORTS,
  STALE,
  staleWorkloads,
  workloads,
} from './fixtures/workloads.ts';
import { type ImageFile, judgeImageFiles, LIST_FILES } from './fixtures/image-files.ts';
import type { HoldEvent } from './fixtures/traffic.ts';

const log = (l: string) => t.comment(l);
const savedPanicOnOops = readFileSync('/proc/sys/kernel/panic_on_oops', 'utf8').trim();
const images = await buildImages({ only: ['pause', 'labtool', 'svcmap', 'coredns'], log });
const ref = (name: 'pause' | 'labtool' | 'svcmap' | 'coredns') => images.get(name)!.ref;
// svcmap serves hostPorts (the chart's default): the nodes' CNI has no portmap plugin.
const cluster = await Cluster.up({ images: [...images.values()].map((i) => i.archive), log, portmap: false });
let diagnosed = false;
/** On the first failure: the agents' logs and svcmap status of each node, while the cluster still runs. */
const diagnose = async () => {
  if (diagnosed || t.passing()) return;
  diagnosed = true;
  t.comment(await svcmapDiagnostics(cluster));
};
t.teardown(async () => {
  await diagnose();
  // Restarts the test did not ask for are upstream kubelet crashes: shown, with their cause.
  for (const r of cluster.kubeletRestarts()) t.comment(`kubelet restart: ${r}`);
  await cluster.down();
});
const k = cluster.kubectl;
const [node1, node2] = cluster.nodes as [(typeof cluster.nodes)[0], (typeof cluster.nodes)[0]];
const outsideTool = (args: readonly string[], timeoutMs = 60_000) => k.exec(images.get('labtool')!.binary!, args, { timeoutMs });
const inClient = (args: readonly string[]) => k.run(['-n', NS, 'exec', 'client', '--', '/labtool', ...args], { timeoutMs: 60_000 });
const lines = (s: string) =>
  s
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
const distinct = (s: string) => new Set(lines(s)).size;

await deployCoreDns(k, ref('coredns'));

t.test('helm install: the DaemonSet is Ready on both nodes (readiness = /readyz)', async (t) => {
  await installSvcmap(cluster, splitRef(ref('svcmap')));
  const pods = await k.json<{
    items: Array<{ spec: { nodeName: string }; status: { containerStatuses: Array<{ ready: boolean; image: string }> } }>;
  }>(['-n', NAMESPACE, 'get', 'pods', '-l', AGENT_SELECTOR]);
  t.same(pods.items.map((p) => p.spec.nodeName).sort(), ['node1', 'node2'], 'one agent per node');
  t.ok(
    pods.items.every((p) => p.status.containerStatuses.every((c) => c.ready)),
    'every agent Ready',
  );
  for (const n of cluster.nodes) {
    const status = await n.exec(join(REPO_ROOT, 'bin', 'svcmap'), ['status', '--pin-dir', PIN_DIR, '-o', 'json']);
    const report = JSON.parse(status) as { programs: Array<{ attachedTo: string }> };
    t.ok(report.programs.length > 0, `${n.name}: programs attached (${report.programs.map((p) => p.attachedTo).join(', ')})`);
  }
});

t.test(
  "each node its own hostname (a UTS namespace per node): the node's processes and its hostNetwork pods (the agents) see the node's name",
  async (t) => {
    const pods = await k.json<{ items: Array<{ metadata: { name: string }; spec: { nodeName: string; hostNetwork?: boolean } }> }>([
      '-n',
      NAMESPACE,
      'get',
      'pods',
      '-l',
      AGENT_SELECTOR,
    ]);
    for (const p of pods.items) {
      t.ok(p.spec.hostNetwork, `${p.metadata.name} is a hostNetwork pod`);
      // (The image has no cat: its node reads the file.)
      const seen = (
        await k.run([
          '-n',
          NAMESPACE,
          'exec',
          p.metadata.name,
          '--',
          'node',
          '-p',
          "require('node:fs').readFileSync('/proc/sys/kernel/hostname', 'utf8')",
        ])
      ).trim();
      t.equal(seen, p.spec.nodeName, `${p.metadata.name} on ${p.spec.nodeName} sees hostname ${seen}`);
    }
    for (const n of cluster.nodes) t.equal((await n.exec('hostname', [])).trim(), n.name, `${n.name}: hostname in the node`);
  },
);

t.test(
  'the agent image on the cluster (kubectl exec into each agent): no shell, package manager or compiler; svcmap version and preflight run in it; the init steps ran without a shell',
  async (t) => {
    const pods = await k.json<{
      items: Array<{
        metadata: { name: string };
        spec: { nodeName: string; initContainers: Array<{ name: string; command: string[] }> };
        status: { initContainerStatuses: Array<{ name: string; state: { terminated?: { exitCode: number } } }> };
      }>;
    }>(['-n', NAMESPACE, 'get', 'pods', '-l', AGENT_SELECTOR]);
    for (const p of pods.items) {
      const inAgent = (argv: readonly string[]) =>
        k.run(['-n', NAMESPACE, 'exec', p.metadata.name, '-c', 'agent', '--', ...argv], { timeoutMs: 120_000 });
      // The image's files as the running container has them, listed by its own node.
      const files = JSON.parse(await inAgent(['node', '-e', LIST_FILES])) as ImageFile[];
      const v = judgeImageFiles(files);
      t.same(v.forbidden, [], `${p.spec.nodeName}: no shell, apt/dpkg, compiler or coreutils in the agent's image`);
      t.same(v.unexpected, [], `${p.spec.nodeName}: outside /app only node, /etc/passwd, /etc/group, libraries and copyright files`);
      t.same(v.missing, [], `${p.spec.nodeName}: node, /app, libbpf`);
      t.comment(`${p.spec.nodeName}: ${files.length} files in the agent's image`);
      await t.rejects(inAgent(['sh', '-c', 'true']), `${p.spec.nodeName}: kubectl exec ... sh fails: there is none`);
      t.match(
        await inAgent(['svcmap', 'version']),
        /^svcmap {2}\S+ \(commit \S+, built \S+\)\nnode {4}v24\.[\s\S]*\nlibbpf {2}1\.\d+\n/,
        `${p.spec.nodeName}: svcmap version`,
      );
      const pre = JSON.parse(
        await inAgent(['svcmap', 'preflight', '--cgroup', '/run/svcmap/cgroupv2', '--pin-dir', PIN_DIR, '-o', 'json']),
      ) as { canRun: boolean; requirements: Array<{ id: string; status: string }> };
      t.ok(pre.canRun, `${p.spec.nodeName}: svcmap preflight in the agent container: can run`);
      // The chart's init containers: svcmap subcommands, and they ran to exit 0. (Here that
      // is preflight: the lab turns mount-host-fs off, since its nodes' PID 1 is this
      // machine's and the mounts would land in its namespace; test/cli/mount-host-fs.test.ts
      // runs it against a namespace of its own.)
      t.same(
        p.spec.initContainers.map((c) => c.command),
        p.spec.initContainers.map(() => ['svcmap']),
        'init containers run svcmap, no shell',
      );
      t.same(
        p.status.initContainerStatuses.map((s) => [s.name, s.state.terminated?.exitCode]),
        p.spec.initContainers.map((c) => [c.name, 0]),
        `${p.spec.nodeName}: every init container exited 0 (${p.spec.initContainers.map((c) => c.name).join(', ')})`,
      );
    }
  },
);

t.test('CoreDNS becomes ready: it reaches the API server through the kubernetes Service', async (t) => {
  await k.run(['-n', 'kube-system', 'rollout', 'status', 'deployment/coredns', '--timeout=120s'], { timeoutMs: 130_000 });
  t.pass('coredns rolled out');
});

t.test('workloads', async (t) => {
  await k.apply(workloads(ref('labtool')));
  for (const d of ['echo', 'local'])
    await k.run(['-n', NS, 'rollout', 'status', `deployment/${d}`, '--timeout=120s'], { timeoutMs: 130_000 });
  await k.run(['-n', NS, 'wait', '--for=condition=Ready', 'pod/client', '--timeout=120s'], { timeoutMs: 130_000 });
  t.pass('echo x2, local x1 and the client are running');
});

const vip = async (svc: string) => (await k.run(['-n', NS, 'get', 'service', svc, '-o', 'jsonpath={.spec.clusterIP}'])).trim();

interface ServiceSpec {
  spec: { clusterIPs: string[]; ipFamilies: string[]; ipFamilyPolicy: string };
}
interface SliceList {
  items: Array<{ addressType: string; endpoints?: Array<{ addresses: string[]; conditions?: { ready?: boolean } }> }>;
}
interface PodList {
  items: Array<{ metadata: { name: string }; status: { podIPs?: Array<{ ip: string }> } }>;
}
const isV6 = (ip: string) => ip.includes(':');
/** The echo pods' names and addresses of each family, from the API server. */
const echoPods = async () => {
  const pods = await k.json<PodList>(['-n', NS, 'get', 'pods', '-l', 'app=echo']);
  const ips = pods.items.flatMap((p) => (p.status.podIPs ?? []).map((a) => a.ip));
  return { names: pods.items.map((p) => p.metadata.name).sort(), v4: ips.filter((ip) => !isV6(ip)).sort(), v6: ips.filter(isV6).sort() };
};
/** Waits until the Service's EndpointSlices (as the endpointslice controller writes them) hold `want`, ready, per addressType. */
const waitSlices = async (svc: string, want: Record<string, string[]>) => {
  let got: Record<string, string[]> = {};
  await waitUntil(
    `the EndpointSlices of ${svc}`,
    async () => {
      const slices = await k.json<SliceList>(['-n', NS, 'get', 'endpointslices', '-l', `kubernetes.io/service-name=${svc}`]);
      got = {};
      for (const sl of slices.items) {
        const ready = (sl.endpoints ?? []).filter((e) => e.conditions?.ready !== false).flatMap((e) => e.addresses);
        got[sl.addressType] = [...(got[sl.addressType] ?? []), ...ready].sort();
      }
      const byType = (r: Record<string, string[]>) =>
        JSON.stringify(
          Object.keys(r)
            .sort()
            .map((type) => [type, r[type]]),
        );
      return byType(got) === byType(want);
    },
    { timeoutMs: EVENT_TIMEOUT_MS, intervalMs: 500 },
  ).catch(() => {});
  return got;
};
/** 20 TCP connections to ip: the set of pod names that answered. */
const tcpNames = async (ip: string) => [...new Set(lines(await inClient(['tcp', ip, String(PORTS.tcp.port), '20'])))].sort();

t.test('ClusterIP from a pod', async (t) => {
  const ip = await vip('echo');
  // Ready pods are not yet endpoints: the endpointslice controller writes them a moment later.
  const echo = await echoPods();
  t.same(await waitSlices('echo', { IPv4: echo.v4 }), { IPv4: echo.v4 }, `the echo EndpointSlice holds both pods (${echo.v4.join(', ')})`);
  const tcp = await inClient(['tcp', ip, String(PORTS.tcp.port), '20']);
  t.equal(distinct(tcp), 2, `TCP: 20 connections reached both backends (${[...new Set(lines(tcp))].join(', ')})`);
  const udp = await inClient(['udp', ip, String(PORTS.udp.port), '20']);
  t.equal(lines(udp).length, 20, 'UDP: 20 replies, every one from the ClusterIP (reverse NAT; labtool fails otherwise)');
});

t.test('DNS through the kube-dns Service', async (t) => {
  const ip = await vip('echo');
  const got = lines(await inClient(['dns', `echo.${NS}.svc.cluster.local`]));
  t.same(got, [ip], `echo.${NS}.svc.cluster.local -> ${got.join(' ')}`);
  const short = lines(await inClient(['dns', 'echo']));
  t.same(short, [ip], "the short name through the pod's search path");
  t.ok(lines(await inClient(['tcp', 'echo', String(PORTS.tcp.port), '3'])).length === 3, 'TCP by Service name');
  t.same(lines(await inClient(['dns', 'kubernetes.default'])), ['10.96.0.1'], 'kubernetes.default -> 10.96.0.1');
});

t.test('dual-stack cluster: every node and pod has an address of each family', async (t) => {
  const nodes = await k.json<{
    items: Array<{
      metadata: { name: string };
      spec: { podCIDRs?: string[] };
      status: { addresses: Array<{ type: string; address: string }> };
    }>;
  }>(['get', 'nodes']);
  for (const n of nodes.items) {
    const internal = n.status.addresses.filter((a) => a.type === 'InternalIP').map((a) => a.address);
    const net = cluster.nodes.find((c) => c.name === n.metadata.name)!.opts.net;
    t.same(internal, [net.ip, net.ip6], `${n.metadata.name}: InternalIPs ${internal.join(', ')}`);
    t.same(n.spec.podCIDRs, [net.podCidr, net.podCidr6], `${n.metadata.name}: podCIDRs ${n.spec.podCIDRs?.join(', ')}`);
  }
  const echo = await echoPods();
  t.equal(echo.v4.length, 2, `echo pods' IPv4 addresses: ${echo.v4.join(', ')}`);
  t.equal(echo.v6.length, 2, `echo pods' IPv6 addresses: ${echo.v6.join(', ')}`);
});

t.test('a RequireDualStack Service created through the API server: reached over its IPv4 and its IPv6 ClusterIP', async (t) => {
  const svc = await k.json<ServiceSpec>(['-n', NS, 'get', 'service', 'echo-dual']);
  t.same(svc.spec.ipFamilies, ['IPv4', 'IPv6'], 'ipFamilies IPv4, IPv6');
  const [ip4, ip6] = svc.spec.clusterIPs as [string, string];
  t.ok(
    svc.spec.clusterIPs.length === 2 && ip4.startsWith('10.96.') && ip6.startsWith('fd00:10:96::'),
    `clusterIPs ${svc.spec.clusterIPs.join(', ')}: one from each Service range`,
  );
  const echo = await echoPods();
  t.same(
    await waitSlices('echo-dual', { IPv4: echo.v4, IPv6: echo.v6 }),
    { IPv4: echo.v4, IPv6: echo.v6 },
    "one EndpointSlice per addressType, each with both pods' address of its family",
  );
  t.same(await tcpNames(ip4), echo.names, `TCP to ${ip4}: 20 connections spread over both pods (${echo.names.join(', ')})`);
  t.same(await tcpNames(ip6), echo.names, `TCP to [${ip6}]: 20 connections spread over both pods`);
  t.equal(
    lines(await inClient(['udp', ip6, String(PORTS.udp.port), '10'])).length,
    10,
    `UDP to [${ip6}]: 10 replies, each from the ClusterIP (recvmsg6; labtool fails otherwise)`,
  );
  t.equal(lines(await inClient(['udp', ip4, String(PORTS.udp.port), '10'])).length, 10, `UDP to ${ip4}: 10 replies from the ClusterIP`);
});

t.test('an IPv6 SingleStack Service: an IPv6 ClusterIP only, IPv6 EndpointSlices only, reached from a pod', async (t) => {
  const svc = await k.json<ServiceSpec>(['-n', NS, 'get', 'service', 'echo-v6']);
  t.same(svc.spec.ipFamilies, ['IPv6'], 'ipFamilies IPv6');
  t.ok(
    svc.spec.clusterIPs.length === 1 && svc.spec.clusterIPs[0]!.startsWith('fd00:10:96::'),
    `clusterIPs ${svc.spec.clusterIPs.join(', ')}`,
  );
  const ip6 = svc.spec.clusterIPs[0]!;
  const echo = await echoPods();
  t.same(await waitSlices('echo-v6', { IPv6: echo.v6 }), { IPv6: echo.v6 }, 'an IPv6 EndpointSlice with both pods, no IPv4 one');
  t.same(await tcpNames(ip6), echo.names, `TCP to [${ip6}]: both pods`);
  t.equal(lines(await inClient(['udp', ip6, String(PORTS.udp.port), '10'])).length, 10, `UDP to [${ip6}]: 10 replies from the ClusterIP`);
});

t.test("a RequireDualStack NodePort Service from a pod: the node's IPv6 and IPv4 InternalIP (socket LB)", async (t) => {
  const node = (await k.run(['-n', NS, 'get', 'pod', 'client', '-o', 'jsonpath={.spec.nodeName}'])).trim();
  const net = cluster.nodes.find((n) => n.name === node)!.opts.net;
  const { names } = await echoPods();
  const port = String(PORTS.dualTcp.nodePort);
  for (const ip of [net.ip6, net.ip]) {
    t.same(
      [...new Set(lines(await inClient(['tcp', ip, port, '20'])))].sort(),
      names,
      `${node} ${ip.includes(':') ? `[${ip}]` : ip}:${port} from the client pod on it: both pods`,
    );
  }
});

t.test('NodePort from outside the cluster, externalTrafficPolicy Cluster', async (t) => {
  for (const n of cluster.nodes) {
    const ip = n.opts.net.ip;
    const tcp = await outsideTool(['tcp', ip, String(PORTS.tcp.nodePort), '20']);
    t.equal(distinct(tcp), 2, `${n.name} ${ip}:${PORTS.tcp.nodePort} TCP: both backends, local and remote`);
    const udp = await outsideTool(['udp', ip, String(PORTS.udp.nodePort), '10']);
    t.equal(lines(udp).length, 10, `${n.name} ${ip}:${PORTS.udp.nodePort} UDP: 10 replies from the node address`);
  }
});

t.test("a RequireDualStack NodePort Service from outside the cluster over IPv6 (tc: DNAT, SNAT to the node's IPv6 address)", async (t) => {
  const { names } = await echoPods();
  const port = String(PORTS.dualTcp.nodePort);
  for (const n of cluster.nodes) {
    const ip6 = n.opts.net.ip6;
    const tcp = await outsideTool(['tcp', ip6, port, '20']);
    t.same([...new Set(lines(tcp))].sort(), names, `${n.name} [${ip6}]:${port} TCP from outside: both pods, local and remote`);
  }
});

t.test(
  "hostPort without the CNI's portmap: a pod's hostPorts from outside (tc) and from the node (socket LB: its addresses, 127.0.0.1, [::1])",
  async (t) => {
    const conflist = readFileSync(join(node1.opts.dir, 'cni', 'net.d', '10-lab.conflist'), 'utf8');
    t.notMatch(conflist, /portmap/, "node1's CNI config has no portmap plugin");
    await k.apply(hostPortWorkloads(ref('labtool')));
    for (const pod of [HOST_PORTS.pod, HOST_PORTS.client])
      await k.run(['-n', NS, 'wait', '--for=condition=Ready', `pod/${pod}`, '--timeout=120s'], { timeoutMs: 130_000 });
    const { ip, ip6 } = node1.opts.net;
    const [tcp, udp] = [String(HOST_PORTS.tcp), String(HOST_PORTS.udp)];
    // The agent programs the Pod once it is Running with its IPs: the first connection may come before that sync.
    await waitUntil(
      'the hostPort from outside',
      async () => (await outsideTool(['tcp', ip, tcp, '1', '--timeout', '2s']).catch(() => '')).trim() !== '',
      {
        timeoutMs: EVENT_TIMEOUT_MS,
        intervalMs: 500,
      },
    );
    for (const addr of [ip, ip6]) {
      t.same(new Set(lines(await outsideTool(['tcp', addr, tcp, '10']))), new Set([HOST_PORTS.pod]), `${addr}:${tcp} TCP from outside`);
      t.same(new Set(lines(await outsideTool(['udp', addr, udp, '5']))), new Set([HOST_PORTS.pod]), `${addr}:${udp} UDP from outside`);
    }
    const fromNode = (args: readonly string[]) =>
      k.run(['-n', NS, 'exec', HOST_PORTS.client, '--', '/labtool', ...args], { timeoutMs: 60_000 });
    for (const addr of [ip, ip6, '127.0.0.1', '::1']) {
      t.same(new Set(lines(await fromNode(['tcp', addr, tcp, '10']))), new Set([HOST_PORTS.pod]), `${addr}:${tcp} TCP from node1`);
      t.same(new Set(lines(await fromNode(['udp', addr, udp, '5']))), new Set([HOST_PORTS.pod]), `${addr}:${udp} UDP from node1`);
    }
    await k.run(['-n', NS, 'delete', 'pod', HOST_PORTS.pod, HOST_PORTS.client, '--wait=true'], { timeoutMs: 60_000 });
  },
);

t.test('externalIP, externalTrafficPolicy Cluster', async (t) => {
  await cluster.lab.route(cluster.net.outside.ns, `${EXTERNAL_IP_CLUSTER}/32`, node1.opts.net.ip);
  const tcp = await outsideTool(['tcp', EXTERNAL_IP_CLUSTER, String(PORTS.tcp.port), '20']);
  t.equal(distinct(tcp), 2, `${EXTERNAL_IP_CLUSTER}:${PORTS.tcp.port} via node1: both backends`);
});

t.test('externalTrafficPolicy Local: the client address is kept, a node without a local endpoint does not answer', async (t) => {
  const outsideIp = cluster.net.outside.ip;
  const viaNode2 = await outsideTool(['http', `http://${node2.opts.net.ip}:${PORTS.localHttp.nodePort}/clientip`]);
  t.match(
    viaNode2.trim(),
    new RegExp(`^${outsideIp.replaceAll('.', '\\.')}:\\d+$`),
    `NodePort on node2 (local endpoint): the backend sees ${viaNode2.trim()}`,
  );
  await t.rejects(
    outsideTool(['tcp', node1.opts.net.ip, String(PORTS.localTcp.nodePort), '1', '--timeout', '2s'], 20_000),
    'NodePort on node1 (no local endpoint): no answer',
  );
  await cluster.lab.route(cluster.net.outside.ns, `${EXTERNAL_IP_LOCAL}/32`, node2.opts.net.ip);
  const ext = await outsideTool(['http', `http://${EXTERNAL_IP_LOCAL}:${PORTS.http.port}/clientip`]);
  t.match(
    ext.trim(),
    new RegExp(`^${outsideIp.replaceAll('.', '\\.')}:\\d+$`),
    `externalIP ${EXTERNAL_IP_LOCAL} via node2: client address kept`,
  );
});

/** What node1's datapath holds of loadBalancerSourceRanges (svcmap dump), per family, as sorted CIDRs. */
const node1Ranges = async () => {
  const read = async (map: string) =>
    (
      JSON.parse(await node1.exec(join(REPO_ROOT, 'bin', 'svcmap'), ['dump', '--map', map, '-o', 'json', '--pin-dir', PIN_DIR])) as {
        entries: Array<{ key: { prefixlen: number; addr: string } }>;
      }
    ).entries
      .map((e) => `${e.key.addr}/${e.key.prefixlen - 32}`)
      .sort();
  return { IPv4: await read('svcmap_srcrng'), IPv6: await read('svcmap_srcrng6') };
};
/** Waits until node1's agent has written `want` (the API server's change reached the maps); returns what it holds. */
const waitNode1Ranges = async (want: Record<'IPv4' | 'IPv6', string[]>) => {
  let got = await node1Ranges();
  await waitUntil(
    "node1's agent to write the source ranges",
    async () => JSON.stringify((got = await node1Ranges())) === JSON.stringify(want),
    { timeoutMs: EVENT_TIMEOUT_MS, intervalMs: 500 },
  ).catch(() => {});
  return got;
};
/** node1's tc drops of clients outside a frontend's ranges (svcmap status: summed over the CPUs). */
const node1SourceDenied = async () => {
  const s = JSON.parse(await node1.exec(join(REPO_ROOT, 'bin', 'svcmap'), ['status', '--pin-dir', PIN_DIR, '-o', 'json'])) as {
    counters: Array<{ hook: string; reason: string; packets: number }>;
  };
  return s.counters.find((c) => c.hook === 'tc_ingress' && c.reason === 'source_denied')?.packets ?? 0;
};

t.test(
  'a dual-stack LoadBalancer with loadBalancerSourceRanges, its IPs set in its status: the outside client in the ranges is answered over IPv6 and IPv4, refused once they exclude it',
  async (t) => {
    const outside = cluster.net.outside;
    // Written as a user may (host bits set); the maps hold the networks.
    await k.apply(lbService([`${outside.ip6}/64`, `${outside.ip}/24`]));
    await k.run([
      '-n',
      NS,
      'patch',
      'service',
      'echo-lb',
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status: { loadBalancer: { ingress: [{ ip: LB_IPS.IPv4 }, { ip: LB_IPS.IPv6 }] } } }),
    ]);
    await cluster.lab.route(outside.ns, `${LB_IPS.IPv4}/32`, node1.opts.net.ip);
    await cluster.lab.ip(outside.ns, '-6', 'route', 'replace', `${LB_IPS.IPv6}/128`, 'via', node1.opts.net.ip6);
    const inside = { IPv4: ['172.30.0.0/24'], IPv6: ['fd00:172:30::/64'] };
    t.same(await waitNode1Ranges(inside), inside, 'node1 holds the ranges of each family, host bits cleared');
    const { names } = await echoPods();
    for (const family of ['IPv6', 'IPv4'] as const) {
      const tcp = await outsideTool(['tcp', LB_IPS[family], String(PORTS.tcp.port), '20']);
      t.same(
        [...new Set(lines(tcp))].sort(),
        names,
        `${family}: ${LB_IPS[family]} from ${family === 'IPv6' ? outside.ip6 : outside.ip} (inside the ranges): 20 connections answered by the echo pods`,
      );
    }

    await k.run([
      '-n',
      NS,
      'patch',
      'service',
      'echo-lb',
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { loadBalancerSourceRanges: ['fd00:172:31::/64', '198.51.100.0/24'] } }),
    ]);
    const excluding = { IPv4: ['198.51.100.0/24'], IPv6: ['fd00:172:31::/64'] };
    t.same(await waitNode1Ranges(excluding), excluding, "the changed ranges reached node1's maps");
    for (const family of ['IPv6', 'IPv4'] as const) {
      const before = await node1SourceDenied();
      await t.rejects(
        outsideTool(['tcp', LB_IPS[family], String(PORTS.tcp.port), '1', '--timeout', '2s'], 20_000),
        `${family}: ${LB_IPS[family]} from outside the ranges: no answer`,
      );
      const denied = (await node1SourceDenied()) - before;
      t.ok(denied >= 1, `${family}: node1's tc dropped it as source_denied (${denied} packets)`);
    }
    await k.run(['-n', NS, 'delete', 'service', 'echo-lb']);
  },
);

t.test('helm test', async (t) => {
  // Without --logs: the passing test Pod is deleted before helm would read them (the chart's NOTES say so).
  const out = await helmFor(cluster).run(['test', RELEASE, '-n', NAMESPACE, '--timeout', '3m']);
  t.match(out, /Phase:\s+Succeeded/, "the chart's test pod succeeded (DNS via kube-dns, GET /version via the kubernetes Service)");
});

t.test('a kubelet killed -9 is started again (as systemd would on a node); Services keep working meanwhile', async (t) => {
  const before = node2.kubeletRestarts.length;
  const old = node2.kubelet;
  await old.kill();
  const ip = await vip('echo');
  t.equal(lines(await inClient(['tcp', ip, String(PORTS.tcp.port), '10'])).length, 10, 'ClusterIP TCP while node2 has no kubelet');
  await waitUntil("node2's kubelet to be started again", () => node2.kubelet !== old && node2.kubelet.running, {
    timeoutMs: 10_000,
    intervalMs: 100,
  });
  t.equal(node2.kubeletRestarts.length, before + 1, `one restart recorded: ${node2.kubeletRestarts.at(-1)?.split('\n')[0]}`);
  await waitUntil(
    "node2's kubelet healthz",
    async () =>
      (await node2.exec('curl', ['-s', '--max-time', '2', 'http://127.0.0.1:10248/healthz'], { timeoutMs: 5000 })).trim() === 'ok',
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  await cluster.waitNodesReady();
  t.pass('node2 Ready with its new kubelet');
});

t.test('helm upgrade to a new image tag while a client loops: 0 failed connections', async (t) => {
  const image = splitRef(ref('svcmap'));
  const next = `${image.tag}-next`;
  for (const n of cluster.nodes) await n.tagImage(ref('svcmap'), `${image.repository}:${next}`);
  const ip = await vip('echo');
  await k.apply(
    JSON.stringify(
      clientPod(
        'looper',
        ref('labtool'),
        ['/labtool', 'loop', ip, String(PORTS.tcp.port), '--until-file', '/tmp/stop', '--interval', '5ms'],
        'Never',
      ),
    ),
  );
  await k.run(['-n', NS, 'wait', '--for=condition=Ready', 'pod/looper', '--timeout=60s'], { timeoutMs: 70_000 });
  await helmFor(cluster).run(['upgrade', RELEASE, CHART, '-n', NAMESPACE, '--reuse-values', ...Helm.sets({ 'image.tag': next })]);
  await waitAgentsReady(cluster);
  const images = await k.run([
    '-n',
    NAMESPACE,
    'get',
    'pods',
    '-l',
    AGENT_SELECTOR,
    '-o',
    'jsonpath={range .items[*]}{.spec.containers[0].image}{"\\n"}{end}',
  ]);
  t.same(lines(images), [`${image.repository}:${next}`, `${image.repository}:${next}`], 'both agents run the new tag');
  await k.run(['-n', NS, 'exec', 'looper', '--', 'touch', '/tmp/stop']);
  await waitUntil(
    'the looping client to finish',
    async () => (await k.run(['-n', NS, 'get', 'pod', 'looper', '-o', 'jsonpath={.status.phase}'])).trim() === 'Succeeded',
    { timeoutMs: EVENT_TIMEOUT_MS },
  );
  const summary = JSON.parse(lines(await k.run(['-n', NS, 'logs', 'looper'])).at(-1)!) as {
    ok: number;
    failed: number;
    errors: Record<string, number>;
  };
  t.comment(`looper: ${JSON.stringify(summary)}`);
  t.ok(summary.ok > 100, `${summary.ok} connections during the upgrade`);
  t.equal(summary.failed, 0, '0 failed connections');
});

/** The families whose stale sockets are checked: a holder of each protocol per family, through the dual-stack Service's ClusterIP of that family. */
const STALE_FAMILIES = ['IPv4', 'IPv6'] as const;
/** The chart's default metricsPort; the agent binds it on the node's loopback (metricsBindAddress 127.0.0.1, hostNetwork). */
const METRICS_PORT = 10249;
const holdEvents = async (pod: string) => lines(await k.run(['-n', NS, 'logs', pod])).map((l) => JSON.parse(l) as HoldEvent);
/** svcmap_sockets_destroyed_total of a node's agent, by proto. */
const destroyedTotal = async (node: typeof node1) => {
  const text = await node.exec('curl', ['-s', '--max-time', '5', `http://127.0.0.1:${METRICS_PORT}/metrics`], { timeoutMs: 10_000 });
  const value = (proto: string) => {
    const m = new RegExp(`^svcmap_sockets_destroyed_total\\{proto="${proto}"\\} (\\d+)$`, 'm').exec(text);
    if (!m) throw new Error(`${node.name}: no svcmap_sockets_destroyed_total{proto="${proto}"} in /metrics`);
    return Number(m[1]);
  };
  return { udp: value('udp'), tcp: value('tcp') };
};
/** The log lines of node1's agent (the node of the holding clients) that report a termination run. */
const terminationRuns = async () => {
  const pod = (
    await k.run([
      '-n',
      NAMESPACE,
      'get',
      'pods',
      '-l',
      AGENT_SELECTOR,
      '--field-selector',
      'spec.nodeName=node1',
      '-o',
      'jsonpath={.items[0].metadata.name}',
    ])
  ).trim();
  return lines(await k.run(['-n', NAMESPACE, 'logs', pod]))
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg?: string; namespaces?: number; destroyed?: { udp: number; tcp: number } })
    .filter((l) => l.msg === 'destroyed sockets connected to removed backends');
};
const podIPs = async (pod: string) => {
  const ips =
    (await k.json<{ status: { podIPs?: Array<{ ip: string }> } }>(['-n', NS, 'get', 'pod', pod])).status.podIPs?.map((a) => a.ip) ?? [];
  return { IPv4: ips.filter((ip) => !isV6(ip)), IPv6: ips.filter(isV6) };
};
const relabel = (pod: string, app: string) => k.run(['-n', NS, 'label', 'pod', pod, `app=${app}`, '--overwrite']);
/** An address as the kernel prints it (IPv6 compressed, lower case), so that kubectl's and svcmap dump's spellings compare. */
const canonical = (ip: string) => (isV6(ip) ? new URL(`http://[${ip}]`).hostname.slice(1, -1) : ip);
/** The active backends (address, port) node1's agent has in its maps behind VIP:port/proto: what a socket opened on node1 is sent to. */
const node1Backends = async (vip: string, port: number, proto: string) => {
  const dump = JSON.parse(await node1.exec(join(REPO_ROOT, 'bin', 'svcmap'), ['dump', '--pin-dir', PIN_DIR, '-o', 'json'])) as {
    frontends: Array<{ address: string; port: number; protocol: string; backends: Array<{ address: string; state: string }> }>;
  };
  return dump.frontends
    .filter((f) => canonical(f.address) === canonical(vip) && f.port === port && f.protocol === proto.toUpperCase())
    .flatMap((f) => f.backends.filter((b) => b.state === 'active').map((b) => b.address));
};

interface NodePodList {
  items: Array<{
    metadata: { name: string; namespace: string };
    spec: {
      nodeName: string;
      hostNetwork?: boolean;
      hostPID?: boolean;
      containers: Array<{ name: string; securityContext?: { capabilities?: { add?: string[] }; [k: string]: unknown } }>;
    };
    status: { phase: string; containerStatuses?: Array<{ name: string; containerID?: string; state: { running?: unknown } }> };
  }>;
}
/** The host pid of each running container task on a node (containerd's k8s.io namespace), by container id. */
const taskPids = async (node: typeof node1) => {
  const out = new Map<string, number>();
  for (const l of lines(await node.exec('ctr', ['-n', 'k8s.io', 'task', 'ls'])).slice(1)) {
    const [id, pid, status] = l.split(/\s+/);
    if (status === 'RUNNING') out.set(id!, Number(pid));
  }
  return out;
};
const containerId = (c: { containerID?: string } | undefined) => c?.containerID?.replace(/^containerd:\/\//, '');
/** node1's agent pod and the host pid of its agent container. */
const node1Agent = async () => {
  const pod = (await k.json<NodePodList>(['-n', NAMESPACE, 'get', 'pods', '-l', AGENT_SELECTOR, '--field-selector', 'spec.nodeName=node1']))
    .items[0]!;
  const id = containerId(pod.status.containerStatuses?.find((c) => c.name === 'agent'));
  const pid = id ? (await taskPids(node1)).get(id) : undefined;
  if (!pid) throw new Error(`node1's agent container ${id} has no running task`);
  return { pod, pid };
};
/** The network namespaces (inode numbers) of the nsfs files the agent sees in its netns mount, read through its root. */
const agentNetnsView = async (pid: number) => {
  const nsfs = Number(lines(await node1.exec('stat', ['-L', '-c', '%d', `/proc/${pid}/ns/net`]))[0]);
  const script = 'for f in "$1"/*; do [ -e "$f" ] && stat -c "%d %i" "$f"; done; true';
  const out = new Set<number>();
  for (const l of lines(await node1.exec('sh', ['-c', script, 'sh', `/proc/${pid}/root/run/svcmap/netns`]))) {
    const [dev, ino] = l.split(' ').map(Number);
    if (dev === nsfs) out.add(ino!);
  }
  return out;
};

/**
 * One round: clients on node1 hold a connected socket of each protocol and
 * family to the Service's only backend `from`; `to` joins the Service, then
 * `from` leaves it (relabeled: it keeps running and answering, so only
 * svcmap can end the sockets). Returns each holder's events once its UDP
 * socket was replaced (and, if `tcpDestroyed`, its TCP one too) and the
 * node1 agent's counter deltas.
 */
async function staleRound(t: Test, round: string, from: string, to: string, tcpDestroyed: boolean) {
  const svc = await k.json<ServiceSpec>(['-n', NS, 'get', 'service', STALE.service]);
  const vipOf = (family: string) => svc.spec.clusterIPs[svc.spec.ipFamilies.indexOf(family)]!;
  const holders = STALE_FAMILIES.flatMap((family) =>
    (['udp', 'tcp'] as const).map((proto) => ({
      family,
      proto,
      name: `hold-${proto}${family === 'IPv4' ? '4' : '6'}-${round}`,
      port: String(proto === 'udp' ? PORTS.udp.port : PORTS.tcp.port),
    })),
  );
  // The holders' first sockets must find `from` behind the VIP: the slices
  // hold it once it is Ready, and node1's agent has it in its maps a sync
  // later. A socket opened before that gets ECONNREFUSED from the connect
  // hook (a frontend without backends), which is not what this round tests.
  const ips = { from: await podIPs(from), to: await podIPs(to) };
  t.same(await waitSlices(STALE.service, ips.from), ips.from, `the EndpointSlices hold ${from} only`);
  for (const h of holders) {
    const target = String(h.proto === 'udp' ? PORTS.udp.target : PORTS.tcp.target);
    const want = ips.from[h.family].map((ip) => (isV6(ip) ? `[${canonical(ip)}]:${target}` : `${ip}:${target}`));
    let got: string[] = [];
    await waitUntil(
      `node1's agent to map ${vipOf(h.family)}:${h.port}/${h.proto} to ${from}`,
      async () => {
        got = (await node1Backends(vipOf(h.family), Number(h.port), h.proto)).map((a) =>
          a.replace(/^\[(.*)\]/, (_m, ip: string) => `[${canonical(ip)}]`),
        );
        return JSON.stringify(got) === JSON.stringify(want);
      },
      { timeoutMs: EVENT_TIMEOUT_MS, intervalMs: 500 },
    ).catch(() => {});
    t.same(got, want, `node1's agent maps ${vipOf(h.family)}:${h.port}/${h.proto} to ${from} only`);
  }
  for (const h of holders) {
    await k.apply(
      JSON.stringify(
        clientPod(
          h.name,
          ref('labtool'),
          ['/labtool', 'hold', h.proto, vipOf(h.family), h.port, '--until-file', '/tmp/stop', '--interval', '200ms'],
          'Never',
          'node1',
        ),
      ),
    );
  }
  for (const h of holders)
    await k.run(['-n', NS, 'wait', '--for=condition=Ready', `pod/${h.name}`, '--timeout=60s'], { timeoutMs: 70_000 });
  for (const h of holders) {
    await waitUntil(`${h.name}'s first reply`, async () => (await holdEvents(h.name)).some((e) => e.event === 'reply'), {
      timeoutMs: EVENT_TIMEOUT_MS,
      intervalMs: 500,
    });
    const first = (await holdEvents(h.name)).find((e) => e.event === 'reply')!;
    t.same(
      [first.socket, first.server],
      [1, from],
      `${h.name}: socket 1 to ${vipOf(h.family)}:${h.port}/${h.proto} answered by ${from}, the only backend`,
    );
  }
  const before = await destroyedTotal(node1);
  const runsBefore = (await terminationRuns()).length;
  await relabel(to, STALE.app);
  await waitSlices(STALE.service, { IPv4: [...ips.from.IPv4, ...ips.to.IPv4].sort(), IPv6: [...ips.from.IPv6, ...ips.to.IPv6].sort() });
  await relabel(from, STALE.out);
  t.same(await waitSlices(STALE.service, ips.to), ips.to, `${from} relabeled: the EndpointSlices hold ${to} only`);
  const replaced = (h: (typeof holders)[0]) => h.proto === 'udp' || tcpDestroyed;
  for (const h of holders.filter(replaced)) {
    await waitUntil(
      `${h.name}'s socket to be replaced`,
      async () => (await holdEvents(h.name)).some((e) => e.event === 'reply' && e.socket! >= 2),
      { timeoutMs: EVENT_TIMEOUT_MS, intervalMs: 500 },
    ).catch(() => {});
  }
  // The counter goes up within the run that destroyed the sockets (the clients saw it end first).
  const want = { udp: STALE_FAMILIES.length, tcp: tcpDestroyed ? STALE_FAMILIES.length : 0 };
  let after = before;
  await waitUntil(
    "node1's agent to count the destroyed sockets",
    async () => {
      after = await destroyedTotal(node1);
      return after.udp - before.udp >= want.udp && after.tcp - before.tcp >= want.tcp && (await terminationRuns()).length > runsBefore;
    },
    { timeoutMs: EVENT_TIMEOUT_MS, intervalMs: 500 },
  ).catch(() => {});
  // The TCP holders that must not be touched: stopped now, after the run.
  for (const h of holders) await k.run(['-n', NS, 'exec', h.name, '--', 'touch', '/tmp/stop']);
  const events = new Map<string, HoldEvent[]>();
  for (const h of holders) {
    await waitUntil(
      `${h.name} to finish`,
      async () => (await k.run(['-n', NS, 'get', 'pod', h.name, '-o', 'jsonpath={.status.phase}'])).trim() === 'Succeeded',
      { timeoutMs: EVENT_TIMEOUT_MS },
    );
    events.set(h.name, await holdEvents(h.name));
    await k.run(['-n', NS, 'delete', 'pod', h.name, '--wait=false']);
  }
  return {
    holders,
    replaced,
    events,
    destroyed: { udp: after.udp - before.udp, tcp: after.tcp - before.tcp },
    want,
    runs: (await terminationRuns()).slice(runsBefore),
  };
}

/** helm upgrade with the release's values and these set; resolves once the restarted agents are ready. */
async function upgradeAgents(values: Record<string, string>): Promise<void> {
  await helmFor(cluster).run(['upgrade', RELEASE, CHART, '-n', NAMESPACE, '--reuse-values', ...Helm.sets(values)]);
  await waitAgentsReady(cluster);
}

/** The holder's socket 1 got ECONNABORTED and nothing else; every reply after it came from `to`. */
function checkReplaced(t: Test, name: string, events: HoldEvent[], to: string) {
  const errors = events.filter((e) => e.event === 'error').map((e) => `${e.socket}:${e.error}`);
  t.same(errors, ['1:ECONNABORTED'], `${name}: socket 1 destroyed by svcmap, ECONNABORTED (errors: ${errors.join(', ') || 'none'})`);
  const later = events.filter((e) => e.event === 'reply' && e.socket! >= 2).map((e) => `${e.socket}:${e.server}`);
  t.same(later, [`2:${to}`], `${name}: socket 2 reached ${to}, the remaining backend, and only it`);
}

t.test(
  "least privilege: node1's agent runs without hostPID or SYS_PTRACE, on a read-only root under the runtime's default seccomp profile, and sees every pod's network namespace on node1 in its netns mount",
  async (t) => {
    const { pod, pid } = await node1Agent();
    const sc = pod.spec.containers.find((c) => c.name === 'agent')!.securityContext;
    t.notOk(pod.spec.hostPID, 'no hostPID');
    t.match(sc, { readOnlyRootFilesystem: true, seccompProfile: { type: 'RuntimeDefault' } }, JSON.stringify(sc));
    t.same(sc?.capabilities?.add, ['BPF', 'NET_ADMIN', 'PERFMON', 'SYS_ADMIN'], 'no SYS_PTRACE');
    // What the kernel enforces on the running process, not only what the spec asks.
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    t.match(status, /^Seccomp:\s+2$/m, 'a seccomp filter on the agent (mode 2)');
    const capEff = BigInt(`0x${/^CapEff:\s+([0-9a-f]+)$/m.exec(status)![1]}`);
    t.equal(capEff & (1n << 19n), 0n, 'CAP_SYS_PTRACE not in its effective set');
    const root = readFileSync(`/proc/${pid}/mountinfo`, 'utf8')
      .split('\n')
      .find((l) => l.split(' ')[4] === '/');
    t.match(root?.split(' ')[5], /^ro(,|$)/, `its root filesystem is mounted read-only (${root})`);
    t.not(readlinkSync(`/proc/${pid}/ns/pid`), readlinkSync('/proc/self/ns/pid'), "a PID namespace of its own, not the host's");

    // Every pod on node1 with a network namespace of its own: its namespace is among the files the agent sees.
    const pids = await taskPids(node1);
    const pods = (await k.json<NodePodList>(['get', 'pods', '-A', '--field-selector', 'spec.nodeName=node1'])).items.filter(
      (p) => !p.spec.hostNetwork && p.status.phase === 'Running',
    );
    const view = await agentNetnsView(pid);
    const missing: string[] = [];
    const checked: string[] = [];
    for (const p of pods) {
      const id = containerId(p.status.containerStatuses?.find((c) => c.state.running && c.containerID));
      const cpid = id ? pids.get(id) : undefined;
      if (!cpid) continue; // exited meanwhile
      const ino = Number(/^net:\[(\d+)\]$/.exec(readlinkSync(`/proc/${cpid}/ns/net`))![1]);
      checked.push(`${p.metadata.namespace}/${p.metadata.name}`);
      if (!view.has(ino)) missing.push(`${p.metadata.namespace}/${p.metadata.name} (net:[${ino}])`);
    }
    t.ok(checked.length > 0, `${checked.length} pods with a network namespace of their own on node1: ${checked.join(', ')}`);
    t.same(missing, [], `each of them in the agent's /run/svcmap/netns (${view.size} namespace files)`);
  },
);

t.test(
  "stale sockets (the chart's defaults: pods' namespaces from the runtime's netns directory, no hostPID, no SYS_PTRACE): a pod's connected sockets to a backend that left the Service are destroyed",
  async (t) => {
    await k.apply(staleWorkloads(ref('labtool')));
    for (const p of Object.values(STALE.pods))
      await k.run(['-n', NS, 'wait', '--for=condition=Ready', `pod/${p}`, '--timeout=120s'], { timeoutMs: 130_000 });
    const { a, b } = STALE.pods;

    // The chart's defaults: UDP destroyed, TCP left to run on (as kube-proxy leaves established connections).
    const one = await staleRound(t, '1', a, b, false);
    for (const h of one.holders) {
      const ev = one.events.get(h.name)!;
      if (one.replaced(h)) {
        checkReplaced(t, h.name, ev, b);
      } else {
        const sum = ev.at(-1)!;
        t.same(
          [sum.event, sum.sockets, sum.errors ?? {}, sum.timeouts ?? 0],
          ['summary', 1, {}, 0],
          `${h.name}: by default its TCP connection runs on, every request answered (${JSON.stringify(sum)})`,
        );
        t.same(Object.keys(sum.replies ?? {}), [a], `${h.name}: all ${sum.replies?.[a]} replies from ${a}, outside the Service now`);
      }
    }
    t.same(one.destroyed, one.want, `svcmap_sockets_destroyed_total on node1: +${one.destroyed.udp} udp, +${one.destroyed.tcp} tcp`);
    t.ok(
      one.runs.length > 0 && one.runs.every((r) => (r.namespaces ?? 0) >= 1 + one.holders.length),
      `node1's agent logged the run, searching its own namespace and at least the ${one.holders.length} holders' (pods started after the agent: the mount propagated them) (namespaces: ${one.runs.map((r) => r.namespaces).join(', ')})`,
    );

    // staleSockets.tcp: the agents restart with --destroy-tcp-sockets.
    await upgradeAgents({ 'staleSockets.tcp': 'true' });
    const two = await staleRound(t, '2', b, a, true);
    for (const h of two.holders) checkReplaced(t, h.name, two.events.get(h.name)!, a);
    t.same(
      two.destroyed,
      two.want,
      `with staleSockets.tcp, svcmap_sockets_destroyed_total on node1: +${two.destroyed.udp} udp, +${two.destroyed.tcp} tcp`,
    );

    // The fallback for runtimes that pin namespaces nowhere: through the pods' processes (hostPID, SYS_PTRACE).
    await upgradeAgents({ 'staleSockets.podNamespaces': 'hostPID' });
    const fallback = await node1Agent();
    t.equal(fallback.pod.spec.hostPID, true, 'podNamespaces=hostPID: hostPID');
    t.equal(readlinkSync(`/proc/${fallback.pid}/ns/pid`), readlinkSync('/proc/self/ns/pid'), "the agent in the host's PID namespace");
    const three = await staleRound(t, '3', a, b, true);
    for (const h of three.holders) checkReplaced(t, h.name, three.events.get(h.name)!, b);
    t.same(
      three.destroyed,
      three.want,
      `with podNamespaces=hostPID, svcmap_sockets_destroyed_total on node1: +${three.destroyed.udp} udp, +${three.destroyed.tcp} tcp`,
    );
    await k.run(['-n', NS, 'delete', 'pod', a, b, '--wait=false']);
    await k.run(['-n', NS, 'delete', 'service', STALE.service]);
  },
);

t.test('helm uninstall: no svcmap programs, links or pins left on either node', async (t) => {
  await k.run(['delete', 'namespace', NS, '--wait=false']);
  await helmFor(cluster).run(['uninstall', RELEASE, '-n', NAMESPACE, '--wait', '--timeout', '5m']);
  for (const n of cluster.nodes) {
    const pins = await n.exec('ls', ['-A', '/sys/fs/bpf']);
    t.notMatch(pins, /svcmap/, `${n.name}: no pins under /sys/fs/bpf`);
    const cg = await n.exec('bpftool', ['cgroup', 'tree', '/run/svcmap/cgroupv2']);
    t.same(
      lines(cg).filter((l) => !/^CgroupPath|^ID\s/.test(l)),
      [],
      `${n.name}: no program attached in the node's cgroup tree`,
    );
    const net = await n.exec('bpftool', ['net', 'show']);
    t.notMatch(net, /svcmap/, `${n.name}: no tc/tcx program on the node's devices`);
  }
  // The DaemonSet's pods go after it (background cascading deletion), within their grace period.
  let left = '';
  await waitUntil(
    'the svcmap pods to be gone',
    async () => {
      left = (
        await k.run(['-n', NAMESPACE, 'get', 'daemonsets,jobs,pods', '-l', `app.kubernetes.io/instance=${RELEASE}`, '-o', 'name'])
      ).trim();
      return left === '';
    },
    { timeoutMs: 60_000, intervalMs: 1000 },
  ).catch(() => {});
  t.equal(left, '', 'no svcmap objects left in kube-system');
});

t.test('teardown leaves nothing behind', async (t) => {
  const id = cluster.lab.id;
  await diagnose();
  const mounts = () =>
    readFileSync('/proc/self/mounts', 'utf8')
      .split('\n')
      .filter((l) => l.includes(id) || l.includes('svcmap-node-'));
  await cluster.down();
  t.same(
    listNetns().filter((n) => n.includes(id)),
    [],
    'no network namespace',
  );
  t.same(
    readdirSync('/sys/fs/cgroup').flatMap((h) => {
      try {
        return readdirSync(join('/sys/fs/cgroup', h))
          .filter((d) => d.includes(id))
          .map((d) => `${h}/${d}`);
      } catch {
        return [];
      }
    }),
    [],
    'no cgroup in any hierarchy',
  );
  t.notOk(existsSync(stateDir(id)), `no state directory (${stateDir(id)})`);
  t.same(mounts(), [], 'no mount');
  t.same(
    readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => {
        try {
          return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(id);
        } catch {
          return false;
        }
      }),
    [],
    'no process of the run',
  );
  t.equal(readFileSync('/proc/sys/kernel/panic_on_oops', 'utf8').trim(), savedPanicOnOops, 'kernel.panic_on_oops as before');
});
