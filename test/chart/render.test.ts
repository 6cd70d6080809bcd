// helm template on charts/svcmap with default and edge values, checked on the
// parsed manifests. Runs the real helm: a missing helm is a failure (make
// test installs it first), not a skip.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { allFlags } from '../../src/cli/args.ts';
import { mountHostFsCommand } from '../../src/cli/mount-host-fs.ts';
import {
  EDGE_VALUES,
  type Container,
  type Manifest,
  type PodSpec,
  allContainers,
  byKind,
  container,
  envValue,
  helm,
  helmMissingMessage,
  isHook,
  one,
  podSpec,
  render,
  sorted,
  templateArgs,
} from './helm.ts';

const HOST = '192.0.2.10';
// The default of securityContext.capabilities. No SYS_RESOURCE: BPF memory
// is charged to the memory cgroup since Linux 5.11, and a pod asking for a
// capability outside the host's bounding set does not start.
const AGENT_CAPS = ['BPF', 'NET_ADMIN', 'PERFMON', 'SYS_ADMIN'];
const INIT_CAPS = ['SYS_ADMIN', 'SYS_CHROOT', 'SYS_PTRACE'];
// group/resource:verb, the agent's whole ClusterRole.
const AGENT_RBAC = [
  '/services:get',
  '/services:list',
  '/services:watch',
  '/nodes:get',
  '/nodes:list',
  '/nodes:watch',
  '/pods:get',
  '/pods:list',
  '/pods:watch',
  '/namespaces:get',
  '/namespaces:list',
  '/namespaces:watch',
  'discovery.k8s.io/endpointslices:get',
  'discovery.k8s.io/endpointslices:list',
  'discovery.k8s.io/endpointslices:watch',
  '/events:create',
  '/events:patch',
  'events.k8s.io/events:create',
  'events.k8s.io/events:patch',
].sort();

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

function flattenRules(role: Manifest): string[] {
  const out: string[] = [];
  for (const r of (role.rules ?? []) as Rule[]) {
    for (const g of r.apiGroups ?? []) {
      for (const res of r.resources ?? []) {
        for (const v of r.verbs ?? []) out.push(`${g}/${res}:${v}`);
      }
    }
  }
  return out.sort();
}

function workloads(ms: Manifest[]): { m: Manifest; spec: PodSpec }[] {
  const out: { m: Manifest; spec: PodSpec }[] = [];
  for (const m of ms) {
    const spec = podSpec(m);
    if (spec) out.push({ m, spec });
  }
  return out;
}

function agentDaemonSet(ms: Manifest[]): Manifest {
  const ds = byKind(ms, 'DaemonSet').filter((m) => !isHook(m));
  if (ds.length !== 1) throw new Error(`expected one agent DaemonSet, found ${ds.length}`);
  return ds[0] as Manifest;
}

function agentSpec(ms: Manifest[]): PodSpec {
  const spec = podSpec(agentDaemonSet(ms));
  if (!spec) throw new Error('agent DaemonSet has no pod template');
  return spec;
}

function mount(c: Container, path: string) {
  return c.volumeMounts?.find((v) => v.mountPath === path);
}

function expectedArgs(v: {
  url: string;
  pinDir: string;
  metricsAddress: string;
  healthzAddress: string;
  logLevel: string;
  /** maxServices, maxBackends, conntrackSize, maxAffinity (default: the C defaults). */
  capacities?: [number, number, number, number];
  lbAlgorithm?: string;
  /** lbMode (default snat). */
  lbMode?: string;
  /** nodePort.localhost, nodePort.bindProtection (default true) and nodePort.addresses. */
  localhostNodePorts?: boolean;
  bindProtection?: boolean;
  nodePortAddresses?: string[];
  /** nodePort.range (default 30000-32767) and hostPort.enabled (default true). */
  nodePortRange?: string;
  hostPorts?: boolean;
  /** socketLB.mode (default all) and the --veth-lb it implies with socketLB.vethTranslation (default true). */
  socketLb?: string;
  vethLb?: boolean;
  devices?: string[];
  /** acceleration (default disabled). */
  acceleration?: string;
  compile?: boolean;
  /** --netns-dir (staleSockets.podNamespaces: netnsDir, the default); false: not passed. */
  netnsDir?: boolean;
  extra?: string[];
}): string[] {
  const args = [
    'agent',
    '--k8s-api-server',
    v.url,
    '--node-name',
    '$(NODE_NAME)',
    '--cgroup',
    '/run/svcmap/cgroupv2',
    '--pin-dir',
    v.pinDir,
    '--metrics-bind-address',
    v.metricsAddress,
    '--healthz-bind-address',
    v.healthzAddress,
    '--log-level',
    v.logLevel,
    ...(['--max-services', '--max-backends', '--max-conntrack', '--max-affinity'] as const).flatMap((flag, i) => [
      flag,
      String((v.capacities ?? [65536, 65536, 262144, 65536])[i]),
    ]),
    '--lb-algorithm',
    v.lbAlgorithm ?? 'random',
    '--lb-mode',
    v.lbMode ?? 'snat',
    '--acceleration',
    v.acceleration ?? 'disabled',
    '--localhost-nodeports',
    String(v.localhostNodePorts ?? true),
    '--bind-protection',
    String(v.bindProtection ?? true),
    '--node-port-range',
    v.nodePortRange ?? '30000-32767',
    '--host-ports',
    String(v.hostPorts ?? true),
    '--socket-lb',
    v.socketLb ?? 'all',
    '--veth-lb',
    String(v.vethLb ?? true),
  ];
  if (v.nodePortAddresses?.length) args.push('--nodeport-addresses', v.nodePortAddresses.join(','));
  if (v.devices && v.devices.length > 0) args.push('--devices', v.devices.join(','));
  if (v.compile) args.push('--compile', '--bpf-dir', '/run/svcmap/bpf');
  if (v.netnsDir ?? true) args.push('--netns-dir', '/run/svcmap/netns');
  args.push(...(v.extra ?? []));
  return args;
}

t.test('helm is installed (make chart-deps)', async (t) => {
  t.equal(helmMissingMessage(), undefined);
});

t.test('default values (k8sServiceHost set)', async (t) => {
  const ms = render({ set: [`k8sServiceHost=${HOST}`] });

  t.test('renders the expected objects', async (t) => {
    const names = ms.map((m) => `${m.kind}/${m.metadata.name}`).sort();
    t.same(names, [
      'ClusterRole/svcmap',
      'ClusterRoleBinding/svcmap',
      'ConfigMap/svcmap-scripts',
      'DaemonSet/svcmap',
      'DaemonSet/svcmap-cleanup',
      'Job/svcmap-cleanup-wait',
      'Pod/svcmap-test-service',
      'Role/svcmap-cleanup',
      'RoleBinding/svcmap-cleanup',
      'ServiceAccount/svcmap',
      'ServiceAccount/svcmap-cleanup',
    ]);
    for (const m of ms) {
      if (m.kind.startsWith('Cluster')) continue;
      t.equal(m.metadata.namespace, 'kube-system', `${m.kind}/${m.metadata.name} is in the release namespace`);
    }
  });

  t.test('RBAC: exactly get/list/watch on services, endpointslices, nodes, pods, namespaces and create/patch on events', async (t) => {
    const roles = byKind(ms, 'ClusterRole');
    t.equal(roles.length, 1, 'one ClusterRole');
    const role = roles[0] as Manifest;
    t.same(flattenRules(role), AGENT_RBAC);
    for (const r of (role.rules ?? []) as Rule[]) {
      t.notOk(r.resourceNames, 'no resourceNames');
      t.notOk(r.nonResourceURLs, 'no nonResourceURLs');
      t.notOk(r.verbs?.includes('*'), 'no verb wildcard');
      t.notOk(r.resources?.includes('*'), 'no resource wildcard');
      t.notOk(r.apiGroups?.includes('*'), 'no group wildcard');
    }
    const binding = one(ms, 'ClusterRoleBinding', 'svcmap');
    t.match(binding, {
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'svcmap' },
      subjects: [{ kind: 'ServiceAccount', name: 'svcmap', namespace: 'kube-system' }],
    });
    t.equal((binding.subjects as unknown[]).length, 1, 'one subject');
    t.equal(agentSpec(ms).serviceAccountName, 'svcmap', 'the DaemonSet runs as the bound ServiceAccount');
  });

  t.test('the only other role: the cleanup hook may get its own DaemonSet', async (t) => {
    const roles = byKind(ms, 'Role');
    t.equal(roles.length, 1);
    const role = roles[0] as Manifest;
    t.ok(isHook(role, 'pre-delete'), 'exists only during helm uninstall');
    t.same(role.rules, [{ apiGroups: ['apps'], resources: ['daemonsets'], resourceNames: ['svcmap-cleanup'], verbs: ['get'] }]);
    const rb = one(ms, 'RoleBinding', 'svcmap-cleanup');
    t.match(rb, {
      roleRef: { kind: 'Role', name: 'svcmap-cleanup' },
      subjects: [{ kind: 'ServiceAccount', name: 'svcmap-cleanup', namespace: 'kube-system' }],
    });
    const job = one(ms, 'Job', 'svcmap-cleanup-wait');
    t.equal(podSpec(job)?.serviceAccountName, 'svcmap-cleanup');
  });

  t.test('no privileged container, no host IPC, no host PID, no Bidirectional mount anywhere', async (t) => {
    // Bidirectional propagation is accepted by the API server only on
    // privileged containers, so with no privileged container it must not appear.
    const ws = workloads(ms);
    t.equal(ws.length, 4, 'agent DaemonSet, cleanup DaemonSet, cleanup Job, test Pod');
    for (const { m, spec } of ws) {
      const where = `${m.kind}/${m.metadata.name}`;
      t.notOk(spec.hostPID, `${where}: no hostPID`);
      t.notOk(spec.hostIPC, `${where}: no hostIPC`);
      for (const c of allContainers(spec)) {
        t.not(c.securityContext?.privileged, true, `${where}/${c.name}: not privileged`);
        t.same(c.securityContext?.capabilities?.drop, ['ALL'], `${where}/${c.name}: drops ALL capabilities`);
        for (const vm of c.volumeMounts ?? []) {
          t.not(vm.mountPropagation, 'Bidirectional', `${where}/${c.name}: ${vm.mountPath} not Bidirectional`);
        }
      }
    }
  });

  t.test('agent DaemonSet: placement, update strategy, host network', async (t) => {
    const ds = agentDaemonSet(ms);
    const spec = agentSpec(ms);
    t.match(ds.spec, { updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } } });
    t.equal(spec.priorityClassName, 'system-node-critical');
    t.same(spec.tolerations, [{ operator: 'Exists' }], 'tolerates every taint');
    t.equal(spec.hostNetwork, true);
    t.equal(spec.dnsPolicy, 'Default', "the node's resolver, not cluster DNS");
    const sel = (ds.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
    const labels = (ds.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;
    for (const [k, v] of Object.entries(sel)) t.equal(labels[k], v, `template carries selector label ${k}`);
    t.equal(sel['app.kubernetes.io/component'], 'agent', 'selector does not match cleanup or test pods');
    t.match(spec.securityContext, { appArmorProfile: { type: 'Unconfined' }, seLinuxOptions: { type: 'spc_t' } });
  });

  t.test(
    "agent container: capabilities exactly BPF, NET_ADMIN, PERFMON, SYS_ADMIN; read-only root, the runtime's seccomp profile",
    async (t) => {
      const agent = container(agentSpec(ms), 'agent');
      t.same(sorted(agent.securityContext?.capabilities?.add), sorted(AGENT_CAPS), 'no SYS_PTRACE');
      t.equal(agent.securityContext?.readOnlyRootFilesystem, true, 'readOnlyRootFilesystem');
      t.same(agent.securityContext?.seccompProfile, { type: 'RuntimeDefault' }, 'seccompProfile RuntimeDefault');
      t.notOk(agent.securityContext?.capabilities?.add?.includes('SYS_RESOURCE'), 'no SYS_RESOURCE by default');
      t.same(agent.securityContext?.capabilities?.drop, ['ALL']);
      t.equal(agent.securityContext?.privileged, false);
      t.equal(agent.securityContext?.runAsUser, 0, 'uid 0, so the added capabilities are effective');
      t.not(agent.securityContext?.allowPrivilegeEscalation, false, 'not set false (the API rejects it with SYS_ADMIN)');
    },
  );

  t.test(
    "staleSockets: pods' namespaces from the runtime's netns directory by default; hostPID the fallback; podSockets=false neither",
    async (t) => {
      const spec = agentSpec(ms);
      const dflt = container(spec, 'agent');
      t.notOk(dflt.args?.includes('--destroy-tcp-sockets'), 'TCP sockets are not destroyed by default');
      const netns = mount(dflt, '/run/svcmap/netns');
      t.match(
        netns,
        { mountPropagation: 'HostToContainer', readOnly: true },
        "the netns directory: read-only, pods' namespaces pinned later reach it",
      );
      t.same(spec.volumes?.find((v) => v.name === netns?.name)?.hostPath, { path: '/var/run/netns', type: 'DirectoryOrCreate' });
      t.same(dflt.args?.slice(dflt.args.indexOf('--netns-dir'), dflt.args.indexOf('--netns-dir') + 2), [
        '--netns-dir',
        '/run/svcmap/netns',
      ]);
      t.notOk(spec.hostPID, 'no hostPID');

      const byPid = agentSpec(render({ set: [`k8sServiceHost=${HOST}`, 'staleSockets.podNamespaces=hostPID'] }));
      const fallback = container(byPid, 'agent');
      t.equal(byPid.hostPID, true, 'podNamespaces=hostPID: hostPID');
      t.same(sorted(fallback.securityContext?.capabilities?.add), sorted([...AGENT_CAPS, 'SYS_PTRACE']), 'and SYS_PTRACE');
      t.notOk(fallback.args?.includes('--netns-dir'), 'no --netns-dir');
      t.notOk(mount(fallback, '/run/svcmap/netns'), 'no netns mount');

      const custom = agentSpec(render({ set: [`k8sServiceHost=${HOST}`, 'staleSockets.netnsDir=/run/containerd/netns'] }));
      t.same(custom.volumes?.find((v) => v.name === 'netns')?.hostPath?.path, '/run/containerd/netns', 'netnsDir: the host path');

      const off = render({ set: [`k8sServiceHost=${HOST}`, 'staleSockets.podSockets=false', 'staleSockets.tcp=true'] });
      const offSpec = agentSpec(off);
      t.notOk(offSpec.hostPID, 'podSockets=false: no hostPID');
      const agent = container(offSpec, 'agent');
      t.same(sorted(agent.securityContext?.capabilities?.add), AGENT_CAPS, 'the four capabilities only');
      t.notOk(agent.args?.includes('--netns-dir'), 'no --netns-dir');
      t.notOk(mount(agent, '/run/svcmap/netns'), 'no netns mount');
      t.ok(agent.args?.includes('--destroy-tcp-sockets'), 'tcp=true: --destroy-tcp-sockets');
      // A list that already names SYS_PTRACE keeps it once.
      const listed = render({
        set: [
          `k8sServiceHost=${HOST}`,
          'staleSockets.podNamespaces=hostPID',
          `securityContext.capabilities={${[...AGENT_CAPS, 'SYS_PTRACE'].join(',')}}`,
        ],
      });
      t.same(sorted(container(agentSpec(listed), 'agent').securityContext?.capabilities?.add), sorted([...AGENT_CAPS, 'SYS_PTRACE']));
    },
  );

  t.test('securityContext.seccompProfile: a Localhost profile, or none', async (t) => {
    const local = render({
      set: [
        `k8sServiceHost=${HOST}`,
        'securityContext.seccompProfile.type=Localhost',
        'securityContext.seccompProfile.localhostProfile=svcmap.json',
      ],
    });
    for (const name of ['agent', 'preflight'])
      t.same(
        container(agentSpec(local), name).securityContext?.seccompProfile,
        { type: 'Localhost', localhostProfile: 'svcmap.json' },
        name,
      );
    const none = render({ set: [`k8sServiceHost=${HOST}`, 'securityContext.seccompProfile=null'] });
    t.notOk(container(agentSpec(none), 'agent').securityContext?.seccompProfile, 'null: none set');
  });

  t.test('init container: mounts bpffs and cgroup v2 on the host, with only setns capabilities', async (t) => {
    const spec = agentSpec(ms);
    t.same(
      spec.initContainers?.map((c) => c.name),
      ['mount-host-fs', 'preflight'],
      'the mounts first, then preflight',
    );
    const init = container(spec, 'mount-host-fs');
    t.same(sorted(init.securityContext?.capabilities?.add), INIT_CAPS);
    t.same(init.command, ['svcmap'], 'a svcmap subcommand, no shell');
    t.same(init.args, ['mount-host-fs', '--host-proc', '/hostproc', '--cgroup-root', '/run/svcmap/cgroupv2']);
    for (const flag of (init.args ?? []).filter((a) => a.startsWith('--')))
      t.ok(flag.slice(2) in allFlags(mountHostFsCommand), `svcmap mount-host-fs takes ${flag}`);
    t.match(mount(init, '/hostproc'), { name: 'hostproc', readOnly: true });
    t.same(
      init.volumeMounts?.map((m) => m.name),
      ['hostproc'],
      "only the host's /proc",
    );
    const vol = spec.volumes?.find((v) => v.name === 'hostproc');
    t.same(vol?.hostPath, { path: '/proc', type: 'Directory' });
  });

  t.test("preflight init container: svcmap preflight with the agent's --cgroup, --pin-dir, capabilities and mounts", async (t) => {
    const spec = agentSpec(ms);
    const pre = container(spec, 'preflight');
    const agent = container(spec, 'agent');
    t.same(pre.command, ['svcmap']);
    t.same(pre.args, ['preflight', '--cgroup', '/run/svcmap/cgroupv2', '--pin-dir', '/sys/fs/bpf/svcmap']);
    t.same(pre.image, agent.image);
    t.same(pre.securityContext, agent.securityContext, 'probes what the agent will have (seccomp profile included)');
    t.same(
      pre.volumeMounts,
      agent.volumeMounts?.filter((m) => m.mountPath !== '/run/svcmap/netns'),
      "the agent's bpffs and cgroup mounts (not the netns directory: it probes no pod)",
    );
    t.equal(pre.terminationMessagePolicy, 'FallbackToLogsOnError', 'why it failed reaches the pod status');
    t.match(pre.resources, { limits: { memory: '384Mi' } });
  });

  t.test('agent mounts: bpffs at /sys/fs/bpf and the host cgroup v2 root', async (t) => {
    const spec = agentSpec(ms);
    const agent = container(spec, 'agent');
    const bpf = mount(agent, '/sys/fs/bpf');
    t.ok(bpf, 'bpffs mounted at /sys/fs/bpf');
    t.equal(bpf?.mountPropagation, 'HostToContainer', 'sees bpffs mounted on the host after the pod started');
    t.not(bpf?.readOnly, true, 'writable: the agent pins there');
    t.same(spec.volumes?.find((v) => v.name === bpf?.name)?.hostPath, { path: '/sys/fs/bpf', type: 'DirectoryOrCreate' });
    const cg = mount(agent, '/run/svcmap/cgroupv2');
    t.ok(cg, 'cgroup root mounted');
    t.equal(cg?.mountPropagation, 'HostToContainer');
    t.same(spec.volumes?.find((v) => v.name === cg?.name)?.hostPath, {
      path: '/run/svcmap/cgroupv2',
      type: 'DirectoryOrCreate',
    });
  });

  t.test('probes: /healthz liveness and startup, /readyz readiness, on the health port', async (t) => {
    const agent = container(agentSpec(ms), 'agent');
    t.same(agent.livenessProbe?.httpGet, { path: '/healthz', port: 10256 });
    t.same(agent.startupProbe?.httpGet, { path: '/healthz', port: 10256 });
    t.same(agent.readinessProbe?.httpGet, { path: '/readyz', port: 10256 });
    t.same(
      agent.ports?.map((p) => [p.name, p.containerPort]),
      [
        ['metrics', 10249],
        ['health', 10256],
      ],
    );
  });

  t.test('agent args and environment match the values', async (t) => {
    const agent = container(agentSpec(ms), 'agent');
    t.same(agent.command, ['svcmap']);
    t.same(
      agent.args,
      expectedArgs({
        url: `https://${HOST}:6443`,
        pinDir: '/sys/fs/bpf/svcmap',
        metricsAddress: '127.0.0.1:10249',
        healthzAddress: '0.0.0.0:10256',
        logLevel: 'info',
      }),
    );
    t.equal(envValue(agent, 'SVCMAP_K8S_API_SERVER'), `https://${HOST}:6443`);
    t.equal(envValue(agent, 'KUBERNETES_SERVICE_HOST'), HOST);
    t.equal(envValue(agent, 'KUBERNETES_SERVICE_PORT'), '6443');
    t.same(agent.env?.find((e) => e.name === 'NODE_NAME')?.valueFrom, { fieldRef: { fieldPath: 'spec.nodeName' } });
    const appVersion = (parse(readFileSync(new URL('../../charts/svcmap/Chart.yaml', import.meta.url), 'utf8')) as { appVersion: string })
      .appVersion;
    t.equal(agent.image, `svcmap:${appVersion}`, 'tag defaults to the appVersion');
    t.same(agent.resources, { requests: { cpu: '100m', memory: '256Mi' }, limits: {} });
  });

  t.test('scripts ConfigMap carries the chart files verbatim', async (t) => {
    const cm = one(ms, 'ConfigMap', 'svcmap-scripts');
    const data = cm.data as Record<string, string>;
    const chartDir = new URL('../../charts/svcmap/files/', import.meta.url);
    t.same(Object.keys(data).sort(), ['cleanup-wait.mjs', 'helm-test.mjs'], 'node scripts only (the hook Job, helm test)');
    for (const f of Object.keys(data)) t.equal(data[f], readFileSync(new URL(f, chartDir), 'utf8'), f);
    const ds = agentDaemonSet(ms);
    // (null: the template's annotations block can be empty.)
    const ann = (ds.spec as { template: { metadata: { annotations: Record<string, string> | null } } }).template.metadata.annotations ?? {};
    t.notOk('checksum/scripts' in ann, 'the agent DaemonSet uses no script: nothing to roll it for');
    t.notOk(
      agentSpec(ms).volumes?.some((v) => v.configMap),
      'nor mounts the ConfigMap',
    );
    t.notOk('prometheus.io/port' in ann, 'no scrape annotations while metrics are on loopback (the default)');
    const open = render({ set: [`k8sServiceHost=${HOST}`, 'metricsBindAddress=0.0.0.0'] });
    const openAnn = (agentDaemonSet(open).spec as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata
      .annotations;
    t.equal(openAnn['prometheus.io/port'], '10249', 'scrape annotations once metrics listen beyond loopback');
    t.equal(container(agentSpec(open), 'agent').args?.[10], '0.0.0.0:10249');
  });
});

t.test('edge values (custom ports, devices, resources, IPv6 API server, no init container)', async (t) => {
  const ms = render({ valuesFiles: [EDGE_VALUES], namespace: 'net' });
  const values = parse(readFileSync(EDGE_VALUES, 'utf8')) as { resources: unknown };
  const spec = agentSpec(ms);
  const agent = container(spec, 'agent');

  t.test('args follow the values', async (t) => {
    t.same(
      agent.args,
      expectedArgs({
        url: 'https://[fd00:10::1]:16443',
        pinDir: '/sys/fs/bpf/tenant-a/svcmap',
        metricsAddress: '[::]:19249',
        healthzAddress: '[::1]:19256',
        logLevel: 'debug',
        capacities: [131072, 262144, 524288, 1024],
        lbAlgorithm: 'rr',
        lbMode: 'hybrid',
        localhostNodePorts: false,
        bindProtection: false,
        nodePortRange: '20000-22767',
        hostPorts: false,
        nodePortAddresses: ['192.168.0.0/16', 'fd00:10::/64'],
        socketLb: 'host-only',
        vethLb: true,
        devices: ['eth0', 'eth1', 'bond0.100'],
        acceleration: 'best-effort',
        compile: true,
        extra: ['--example-flag=1'],
      }),
    );
    t.equal(envValue(agent, 'KUBERNETES_SERVICE_HOST'), 'fd00:10::1', 'no brackets in the env form');
    t.same(agentSpec(ms).volumes?.find((v) => v.name === 'netns')?.hostPath?.path, '/run/custom-runtime/netns', 'staleSockets.netnsDir');
    t.same(agent.securityContext?.seccompProfile, { type: 'Localhost', localhostProfile: 'profiles/svcmap.json' });
    t.equal(agent.securityContext?.readOnlyRootFilesystem, true, 'read-only root, bpf.compile writing to an emptyDir');
    t.same(agentSpec(ms).volumes?.find((v) => v.name === mount(agent, '/run/svcmap/bpf')?.name)?.emptyDir, {});
    t.equal(envValue(agent, 'EXTRA'), 'yes', 'extraEnv appended');
  });

  t.test('probes and ports on the custom ports; probes target the bind address', async (t) => {
    t.same(agent.livenessProbe?.httpGet, { host: '::1', path: '/healthz', port: 19256 });
    t.same(agent.readinessProbe?.httpGet, { host: '::1', path: '/readyz', port: 19256 });
    t.same(agent.startupProbe?.httpGet, { host: '::1', path: '/healthz', port: 19256 });
    t.same(
      agent.ports?.map((p) => p.containerPort),
      [19249, 19256],
    );
  });

  t.test('resources, image, names, placement', async (t) => {
    t.same(agent.resources, values.resources);
    t.equal(agent.image, 'registry.example.test/net/svcmap@sha256:' + '0123456789abcdef'.repeat(4), 'digest wins');
    t.equal(agentDaemonSet(ms).metadata.name, 'kp-replacement');
    t.equal(spec.serviceAccountName, 'proxy-agent');
    t.equal(one(ms, 'ServiceAccount', 'proxy-agent').metadata.annotations?.['example.test/role'], 'proxy');
    t.match(one(ms, 'ClusterRoleBinding', 'kp-replacement'), {
      subjects: [{ name: 'proxy-agent', namespace: 'net' }],
    });
    t.equal(spec.priorityClassName, 'custom-critical');
    t.same(spec.nodeSelector, { 'kubernetes.io/os': 'linux', pool: 'net' }, 'maps merge with the defaults');
    t.same(spec.imagePullSecrets, [{ name: 'regcred' }]);
    t.match(agentDaemonSet(ms).spec, { updateStrategy: { rollingUpdate: { maxUnavailable: '10%' } } });
    t.notOk(spec.securityContext, 'AppArmor and SELinux settings switched off');
  });

  t.test('cgroup.hostRoot is mounted at the fixed --cgroup path; no mounting init container', async (t) => {
    t.same(
      spec.initContainers?.map((c) => c.name),
      ['preflight'],
      'both autoMounts off: preflight only',
    );
    t.notOk(
      spec.volumes?.find((v) => v.name === 'hostproc'),
      'no host /proc',
    );
    const cg = mount(agent, '/run/svcmap/cgroupv2');
    t.same(spec.volumes?.find((v) => v.name === cg?.name)?.hostPath, {
      path: '/sys/fs/cgroup',
      type: 'DirectoryOrCreate',
    });
  });

  t.test('RBAC and capabilities do not move with the values (Pods and Namespaces: for hostPorts or the veth translation)', async (t) => {
    t.same(
      flattenRules(byKind(ms, 'ClusterRole')[0] as Manifest),
      AGENT_RBAC,
      'hostPort.enabled false, host-only: Pods and Namespaces read',
    );
    const neither = render({ set: [`k8sServiceHost=${HOST}`, 'hostPort.enabled=false', 'socketLB.vethTranslation=false'] });
    t.same(
      flattenRules(byKind(neither, 'ClusterRole')[0] as Manifest),
      AGENT_RBAC.filter((r) => !r.startsWith('/pods:') && !r.startsWith('/namespaces:')),
      'neither hostPorts nor veth translation: no Pods, no Namespaces',
    );
    t.same(sorted(agent.securityContext?.capabilities?.add), sorted(AGENT_CAPS));
    for (const { m, spec: s } of workloads(ms)) {
      for (const c of allContainers(s)) {
        t.not(c.securityContext?.privileged, true, `${m.kind}/${m.metadata.name}/${c.name}: not privileged`);
      }
    }
    t.notOk(
      ms.find((m) => m.kind === 'Pod'),
      'test.enabled=false drops the test Pod',
    );
  });

  t.test('the cleanup hook follows pinDir and the timeout', async (t) => {
    const cds = one(ms, 'DaemonSet', 'kp-replacement-cleanup');
    const c = container(podSpec(cds) as PodSpec, 'cleanup');
    t.same(c.args?.slice(0, 4), ['cleanup', '--force', '--pin-dir', '/sys/fs/bpf/tenant-a/svcmap']);
    const job = one(ms, 'Job', 'kp-replacement-cleanup-wait');
    t.equal((job.spec as { activeDeadlineSeconds: number }).activeDeadlineSeconds, 960);
    const wait = container(podSpec(job) as PodSpec, 'wait');
    t.equal(envValue(wait, 'TIMEOUT_SECONDS'), '900');
    t.equal(envValue(wait, 'API_SERVER'), 'https://[fd00:10::1]:16443');
    t.equal(envValue(wait, 'NAMESPACE'), 'net');
  });
});

t.test('securityContext.capabilities', async (t) => {
  const capsOf = (ms: Manifest[]) => {
    const agent = container(agentSpec(ms), 'agent');
    const cleanup = container(podSpec(one(ms, 'DaemonSet', 'svcmap-cleanup')) as PodSpec, 'cleanup');
    const init = container(agentSpec(ms), 'mount-host-fs');
    return {
      agent: agent.securityContext?.capabilities,
      cleanup: cleanup.securityContext?.capabilities,
      init: init.securityContext?.capabilities,
    };
  };

  // Both get the list as it is (the agent adds SYS_PTRACE only with staleSockets.podNamespaces: hostPID).
  const plus = (_which: 'agent' | 'cleanup', caps: string[]) => caps;

  t.test('default: no SYS_RESOURCE on the agent or the cleanup DaemonSet', async (t) => {
    const c = capsOf(render({ set: [`k8sServiceHost=${HOST}`] }));
    for (const which of ['agent', 'cleanup'] as const) {
      t.same(sorted(c[which]?.add), sorted(plus(which, AGENT_CAPS)), `${which}: the default list`);
      t.notOk(c[which]?.add?.includes('SYS_RESOURCE'), `${which}: no SYS_RESOURCE`);
      t.same(c[which]?.drop, ['ALL'], `${which}: drops ALL`);
    }
  });

  t.test('kernels older than 5.11: an override adds SYS_RESOURCE', async (t) => {
    const withRes = [...AGENT_CAPS, 'SYS_RESOURCE'];
    const c = capsOf(render({ set: [`k8sServiceHost=${HOST}`, `securityContext.capabilities={${withRes.join(',')}}`] }));
    for (const which of ['agent', 'cleanup'] as const) {
      t.same(sorted(c[which]?.add), sorted(plus(which, withRes)), `${which}: the given list`);
      t.same(c[which]?.drop, ['ALL'], `${which}: still drops ALL`);
    }
    t.same(sorted(c.init?.add), INIT_CAPS, 'the init container keeps its own list');
  });

  t.test('the same through a values file, in the given order', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'svcmap-chart-caps-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'values.yaml');
    writeFileSync(file, 'securityContext:\n  capabilities: [SYS_ADMIN, BPF, NET_ADMIN, PERFMON, SYS_RESOURCE]\n');
    const c = capsOf(render({ set: [`k8sServiceHost=${HOST}`], valuesFiles: [file] }));
    t.same(c.agent?.add, ['SYS_ADMIN', 'BPF', 'NET_ADMIN', 'PERFMON', 'SYS_RESOURCE']);
  });
});

t.test('preflight.enabled=false: no preflight init container', async (t) => {
  const on = agentSpec(render({ set: [`k8sServiceHost=${HOST}`, 'preflight.enabled=false'] }));
  t.same(
    on.initContainers?.map((c) => c.name),
    ['mount-host-fs'],
  );
  const none = agentSpec(
    render({
      set: [
        `k8sServiceHost=${HOST}`,
        'preflight.enabled=false',
        'bpf.autoMount=false',
        'cgroup.autoMount=false',
        'cgroup.hostRoot=/sys/fs/cgroup',
      ],
    }),
  );
  t.notOk(none.initContainers, 'nor any other: no initContainers at all');
});

t.test('init container modes', async (t) => {
  const onlyBpf = agentSpec(render({ set: [`k8sServiceHost=${HOST}`, 'cgroup.autoMount=false', 'cgroup.hostRoot=/sys/fs/cgroup'] }));
  const init = container(onlyBpf, 'mount-host-fs');
  t.same(
    init.args,
    ['mount-host-fs', '--host-proc', '/hostproc', '--cgroup-root', '/sys/fs/cgroup', '--no-mount-cgroup'],
    'still checks the cgroup mount, without mounting',
  );
  const onlyCgroup = agentSpec(render({ set: [`k8sServiceHost=${HOST}`, 'bpf.autoMount=false'] }));
  t.same(container(onlyCgroup, 'mount-host-fs').args, [
    'mount-host-fs',
    '--host-proc',
    '/hostproc',
    '--cgroup-root',
    '/run/svcmap/cgroupv2',
    '--no-mount-bpffs',
  ]);
});

t.test('Kubernetes older than the tested releases (docs/compatibility.md): refused by kubeVersion', async (t) => {
  const r = helm(templateArgs({ set: [`k8sServiceHost=${HOST}`], kubeVersion: '1.33.9' }));
  t.not(r.status, 0);
  t.match(r.stderr, /kubeVersion: >=1\.34\.0-0 which is incompatible with Kubernetes v1\.33\.9/);
  t.ok(render({ set: [`k8sServiceHost=${HOST}`], kubeVersion: '1.34.4' }).length, 'v1.34.4, the tested one, renders');
});

t.test('k8sServiceHostFallbacks: the agent gets every API server, k8sServiceHost first, each as a URL', async (t) => {
  const spec = agentSpec(
    render({
      set: [
        `k8sServiceHost=${HOST}`,
        'k8sServicePort=6443',
        'k8sServiceHostFallbacks={192.0.2.11,192.0.2.12:7443,fd00::13,[fd00::14]:8443}',
      ],
    }),
  );
  const agent = spec.containers.find((c) => c.name === 'agent')!;
  const urls = `https://${HOST}:6443,https://192.0.2.11:6443,https://192.0.2.12:7443,https://[fd00::13]:6443,https://[fd00::14]:8443`;
  t.equal(agent.args![agent.args!.indexOf('--k8s-api-server') + 1], urls, '--k8s-api-server');
  t.equal(agent.env!.find((e) => e.name === 'SVCMAP_K8S_API_SERVER')?.value, urls, 'SVCMAP_K8S_API_SERVER');
  t.equal(agent.env!.find((e) => e.name === 'KUBERNETES_SERVICE_HOST')?.value, HOST, 'in-cluster clients: k8sServiceHost alone');
});
