// svcmap agent: flags -> config -> runAgent, with signal handling.
import { z } from 'zod';
import { defaultCgroup } from '../bpf/environment.ts';
import { type AgentSource, runAgent } from '../agent/agent.ts';
import { DEFAULT_CT_GC_INTERVAL_MS, DEFAULT_CT_LIFETIMES } from '../agent/loops/ct-gc.ts';
import { createLogger } from '../agent/log.ts';
import {
  LB_ALGORITHM_NAMES,
  LB_MODES,
  SVCMAP_AFFINITY_MAX,
  SVCMAP_BACKENDS_MAX,
  SVCMAP_CT_MAX,
  SVCMAP_SERVICES_MAX,
} from '../maps/constants.ts';
import { EVERY_NODE_ADDRESS, localhostNodePorts, parseNodePortAddresses } from '../model/nodeport-addresses.ts';
import { parsePortRange } from '../model/host-ports.ts';
import { DEFAULT_STALL_MS } from '../sources/kubernetes/server-failure.ts';
import { UsageError, command, duration, intString, parseFlags, pinDirFlag } from './args.ts';
import { bindAddressFlag } from './bind-address.ts';
import { buildIdentity } from './version.ts';
import { SOCKET_LB_MODES } from '../agent/datapath/datapath.ts';
import { ACCELERATION_MODES } from '../agent/datapath/xdp-devices.ts';

/** Flags of earlier releases, with what replaced them: named in the error rather than "unknown option". */
const REPLACED: Record<string, string> = {
  'metrics-port': '--metrics-bind-address ADDR:PORT',
  'health-port': '--healthz-bind-address ADDR:PORT',
  'bind-address': '--metrics-bind-address and --healthz-bind-address',
};
const capacity = (what: string, dflt: number) =>
  ({
    value: 'N',
    schema: intString(1, 16_777_216),
    otherwise: String(dflt),
    help: `${what} capacity (a map pinned with another is migrated to it at start)`,
  }) as const;
const L = DEFAULT_CT_LIFETIMES;
/** A true/false flag whose default is true (a switch can only turn things on). */
const bool = z.enum(['true', 'false'], { message: 'must be true or false' }).transform((v) => v === 'true');
const nodePortAddresses = z.string().transform((text, ctx) => {
  try {
    return parseNodePortAddresses(text);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});
const portRange = z.string().transform((text, ctx) => {
  try {
    return parsePortRange(text);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});
const lifetime = duration.refine((ms) => ms >= 1000, { message: 'must be at least 1s' });

export const agentCommand = command({
  name: 'agent',
  summary: 'loads the datapath and keeps its maps in sync with the Services',
  description:
    'Loads the datapath, attaches it to a cgroup, and keeps the maps in sync. Its source is the Kubernetes API (with in-cluster credentials, or --kubeconfig), or --manifests for local runs.',
  flags: {
    manifests: {
      value: 'DIR',
      schema: z.string().min(1),
      help: 'a directory of Service/EndpointSlice YAML to serve instead of the Kubernetes API (local runs)',
    },
    kubeconfig: {
      value: 'PATH',
      schema: z.string().min(1),
      otherwise: 'in-cluster credentials',
      help: 'the Kubernetes API, with this kubeconfig',
    },
    'k8s-api-server': {
      value: 'URL',
      schema: z.string(),
      otherwise: 'env SVCMAP_K8S_API_SERVER',
      help: 'https://HOST:PORT of the API server, bypassing the kubernetes Service; several, comma-separated: the next is used when one stops answering',
    },
    'k8s-api-stall-timeout': {
      value: 'D',
      schema: duration.refine((ms) => ms >= 1000, { message: 'must be at least 1s' }),
      default: `${DEFAULT_STALL_MS / 1000}s`,
      help: 'silence of a watch (no event, no bookmark: the API server sends one a minute while the resource changes) after which the agent asks its API server for /readyz; unanswered within 10s, the server counts as stalled and the next is used',
    },
    'node-name': { value: 'NAME', schema: z.string(), otherwise: 'env NODE_NAME', help: "this node's name; required with the API" },
    cgroup: {
      value: 'PATH',
      schema: z.string().startsWith('/', 'must be an absolute path'),
      otherwise: 'the cgroup v2 mount root',
      help: 'cgroup v2 directory to attach the socket hooks to',
    },
    'pin-dir': pinDirFlag,
    'bpf-dir': { value: 'DIR', schema: z.string(), otherwise: 'build/bpf', help: 'where compiled BPF objects are cached' },
    compile: { help: 'compiles the BPF programs even if a cached object matches' },
    'max-services': capacity('services map', SVCMAP_SERVICES_MAX),
    'max-backends': capacity('backends map', SVCMAP_BACKENDS_MAX),
    'max-conntrack': capacity('tc connection tracking', SVCMAP_CT_MAX),
    'max-affinity': {
      ...capacity('session affinity (ClientIP) map', SVCMAP_AFFINITY_MAX),
      help: 'session affinity (ClientIP) map capacity: clients x services remembered (LRU; a map pinned with another is migrated to it at start)',
    },
    devices: {
      value: 'LIST',
      schema: z.string().regex(/^[A-Za-z0-9_.:@-]{1,15}(,[A-Za-z0-9_.:@-]{1,15})*$/, 'must be a comma-separated list of interface names'),
      otherwise:
        "the interfaces holding the node's InternalIP/ExternalIP, plus those with a default route or a route through a gateway, followed as routes change",
      help: 'interfaces for NodePort/LoadBalancer/externalIP traffic from outside (comma-separated)',
    },
    'tc-attach': {
      value: 'MODE',
      schema: z.enum(['auto', 'tcx', 'tc'], { message: 'must be auto, tcx or tc' }),
      default: 'auto',
      help: 'auto: tcx links where the kernel has them, else clsact filters; tc: always clsact + cls_bpf',
    },
    acceleration: {
      value: 'MODE',
      schema: z.enum(ACCELERATION_MODES, { message: `must be one of ${ACCELERATION_MODES.join(', ')}` }),
      default: 'disabled',
      help: "XDP on the --devices in front of tc ingress, for NodePort/LoadBalancer/externalIP traffic from outside (what XDP cannot translate goes on to tc; egress is tc's). native: driver mode, a device whose driver refuses it runs tc only, with an error naming it; best-effort: driver mode, else generic mode, else tc only, per device, said in the log and by svcmap status; disabled: tc only",
    },
    'ct-gc-interval': {
      value: 'D',
      schema: duration,
      default: `${DEFAULT_CT_GC_INTERVAL_MS / 1000}s`,
      help: 'how often idle flows are removed from the tc connection tracking map (0 = never: LRU eviction only)',
    },
    'ct-tcp-timeout': {
      value: 'D',
      schema: lifetime,
      otherwise: `${L.tcpEstablishedMs / 3_600_000}h`,
      help: `idle lifetime of an established TCP flow (not yet answered: ${L.tcpSynMs / 1000}s; closing, RST or FIN both ways: ${L.tcpClosingMs / 1000}s)`,
    },
    'ct-udp-timeout': { value: 'D', schema: lifetime, otherwise: `${L.otherMs / 1000}s`, help: 'idle lifetime of a UDP flow' },
    'lb-algorithm': {
      value: 'ALG',
      schema: z.enum(LB_ALGORITHM_NAMES, { message: `must be one of ${LB_ALGORITHM_NAMES.join(', ')}` }),
      default: 'random',
      help: 'how a frontend picks a backend when its Service has no svcmap.io/lb-algorithm annotation (see docs/architecture.md)',
    },
    'lb-mode': {
      value: 'MODE',
      schema: z.enum(LB_MODES, { message: `must be one of ${LB_MODES.join(', ')}` }),
      default: 'snat',
      help: "how NodePort, LoadBalancer and externalIP traffic from outside reaches a backend on another node when its Service has no svcmap.io/lb-mode annotation. snat: the node's address as source, replies return through this node; dsr: the client's address kept, the backend's node answers the client directly (the agent must run on every node); hybrid: dsr for TCP, snat for UDP",
    },
    'destroy-tcp-sockets': {
      help: 'when a backend leaves a Service, also destroys the connected TCP sockets the socket LB sent to it (connected UDP ones always are; needs Linux 6.5+)',
    },
    'netns-dir': {
      value: 'DIR',
      schema: z.string().startsWith('/', 'must be an absolute path'),
      otherwise: "the processes in the --cgroup subtree (/proc/PID/ns/net: needs the host's PID namespace and CAP_SYS_PTRACE)",
      help: "where the container runtime pins pods' network namespaces (containerd, CRI-O: /var/run/netns): socket termination searches the namespaces of its files",
    },
    'nodeport-addresses': {
      value: 'LIST',
      schema: nodePortAddresses,
      otherwise: "every address of the node (the Node's InternalIP/ExternalIP and its interfaces')",
      help: "which node addresses serve NodePorts, as kube-proxy's flag: comma-separated CIDRs (a family without a CIDR of its own keeps every address), or primary (the Node's first address of each family). 127.0.0.1 and [::1] only if the family's CIDRs contain them",
    },
    'localhost-nodeports': {
      value: 'BOOL',
      schema: bool,
      default: 'true',
      help: "127.0.0.1:NodePort and [::1]:NodePort reach the NodePort from the node's own processes (kube-proxy's --iptables-localhost-nodeports)",
    },
    'bind-protection': {
      value: 'BOOL',
      schema: bool,
      default: 'true',
      help: "a node's own process cannot bind() a port a NodePort holds (EADDRINUSE, counted as nodeport_bind_denied), as Cilium's nodePort.bindProtection",
    },
    'host-ports': {
      value: 'BOOL',
      schema: bool,
      default: 'true',
      help: "serve this node's Pods' hostPorts (from every node address, and 127.0.0.1/[::1] for the node's own processes) in place of the CNI's portmap plugin; the Kubernetes source watches this node's Pods",
    },
    'node-port-range': {
      value: 'A-B',
      schema: portRange,
      default: '30000-32767',
      help: "the cluster's NodePort range (kube-apiserver's --service-node-port-range): a hostPort inside it is ignored, with a HostPortIgnored Event on its Pod",
    },
    'socket-lb': {
      value: 'MODE',
      schema: z.enum(SOCKET_LB_MODES, { message: `must be one of ${SOCKET_LB_MODES.join(', ')}` }),
      default: 'all',
      help: "all: every socket's connect()/sendmsg() to a Service is translated; host-only: only the node's own (host-network) sockets, pods' traffic is translated per packet at their veths (service meshes: a sidecar sees the ClusterIP)",
    },
    'veth-lb': {
      value: 'BOOL',
      schema: bool,
      otherwise: 'true with --socket-lb=host-only, else false',
      help: "per-packet Service translation at the host side of every pod's veth (tc), for traffic the socket LB did not translate",
    },
    'min-sync-interval': { value: 'D', schema: duration, default: '0s', help: 'minimum time between syncs (0s: immediate)' },
    'sync-period': {
      value: 'D',
      schema: duration.refine((ms) => ms > 0, { message: 'must be more than 0' }),
      default: '1h',
      help: 'periodic full resync',
    },
    'metrics-bind-address': {
      value: 'ADDR:PORT',
      schema: bindAddressFlag(10249),
      default: '127.0.0.1:10249',
      help: 'Prometheus /metrics (IPv6 as [::1]:10249; [::] both families; port 0 any free port; off)',
    },
    'healthz-bind-address': {
      value: 'ADDR:PORT',
      schema: bindAddressFlag(10256),
      default: '0.0.0.0:10256',
      help: '/healthz, /livez, /readyz (as above). healthCheckNodePort servers always listen on both families, whatever these say',
    },
    'healthz-timeout': {
      value: 'D',
      schema: duration.refine((ms) => ms > 0, { message: 'must be more than 0' }),
      otherwise: "60s, kube-proxy's; or twice --min-sync-interval if longer",
      help: 'how long a change may wait for the maps before /healthz and /livez answer 503',
    },
  },
});

export async function agent(argv: string[]): Promise<void> {
  for (const [old, now] of Object.entries(REPLACED)) {
    if (argv.some((a) => a === `--${old}` || a.startsWith(`--${old}=`)))
      throw new UsageError(`svcmap agent: --${old} was replaced by ${now}`);
  }
  const f = parseFlags(agentCommand, argv);
  if (f.manifests && (f.kubeconfig || f['k8s-api-server'])) {
    throw new UsageError('svcmap agent: --manifests is a local file source; it cannot be combined with --kubeconfig or --k8s-api-server');
  }
  if (f['socket-lb'] === 'host-only' && f['veth-lb'] === false) {
    throw new UsageError("svcmap agent: --socket-lb=host-only with --veth-lb=false would leave pods' traffic to Services untranslated");
  }
  const log = createLogger(f['log-level']);
  const nodeName = f['node-name'] ?? process.env.NODE_NAME;
  const apiServer = f['k8s-api-server'] ?? process.env.SVCMAP_K8S_API_SERVER;
  const nodePorts = f['nodeport-addresses'] ?? EVERY_NODE_ADDRESS;
  const source: AgentSource = f.manifests
    ? { kind: 'files', dir: f.manifests }
    : {
        kind: 'kubernetes',
        ...(f.kubeconfig ? { kubeconfig: f.kubeconfig } : {}),
        ...(apiServer ? { apiServer } : {}),
        stallMs: f['k8s-api-stall-timeout'],
      };
  const running = await runAgent(
    {
      source,
      cgroup: f.cgroup ?? defaultCgroup(),
      pinDir: f['pin-dir'],
      ...(nodeName ? { nodeName } : {}),
      ...(f['bpf-dir'] ? { objectDir: f['bpf-dir'] } : {}),
      forceCompile: f.compile,
      ...(f['max-services'] ? { maxServices: f['max-services'] } : {}),
      ...(f['max-backends'] ? { maxBackends: f['max-backends'] } : {}),
      ...(f['max-conntrack'] ? { maxConntrack: f['max-conntrack'] } : {}),
      ...(f['max-affinity'] ? { maxAffinity: f['max-affinity'] } : {}),
      ...(f.devices ? { devices: f.devices.split(',') } : {}),
      tcAttach: f['tc-attach'],
      acceleration: f.acceleration,
      metrics: f['metrics-bind-address'],
      health: f['healthz-bind-address'],
      ...(f['healthz-timeout'] ? { healthTimeoutMs: f['healthz-timeout'] } : {}),
      build: buildIdentity(),
      minSyncIntervalMs: f['min-sync-interval'],
      ctGc: {
        intervalMs: f['ct-gc-interval'],
        lifetimes: {
          ...(f['ct-tcp-timeout'] ? { tcpEstablishedMs: f['ct-tcp-timeout'] } : {}),
          ...(f['ct-udp-timeout'] ? { otherMs: f['ct-udp-timeout'] } : {}),
        },
      },
      syncPeriodMs: f['sync-period'],
      destroyTcpSockets: f['destroy-tcp-sockets'],
      ...(f['netns-dir'] ? { netnsDir: f['netns-dir'] } : {}),
      lbAlgorithm: f['lb-algorithm'],
      lbMode: f['lb-mode'],
      nodePortAddresses: nodePorts,
      hostPorts: f['host-ports'],
      nodePortRange: f['node-port-range'],
      sockSettings: {
        localhostNodePorts: {
          4: localhostNodePorts(nodePorts, 4, f['localhost-nodeports']),
          6: localhostNodePorts(nodePorts, 6, f['localhost-nodeports']),
        },
        bindProtection: f['bind-protection'],
        socketLb: f['socket-lb'],
      },
      vethLb: f['veth-lb'] ?? f['socket-lb'] === 'host-only',
    },
    log,
  );
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => running.stop());
  await running.stopped;
}
