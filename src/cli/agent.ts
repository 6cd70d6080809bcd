// svcmap agent: flags -> config -> runAgent, with signal handling.
import { z } from 'zod';
import { defaultCgroup } from '../bpf/environment.ts';
import { type AgentSource, runAgent } from '../agent/agent.ts';
import { LOG_LEVELS, createLogger } from '../agent/log.ts';
import { LB_ALGORITHMS_IMPLEMENTED } from '../maps/constants.ts';
import { UsageError, duration, intString, parseFlags, pinDirFlag } from './args.ts';
import { bindAddressFlag } from './bind-address.ts';
import { buildIdentity } from './version.ts';

export const agentHelp = `svcmap agent [--manifests DIR | --kubeconfig PATH] [flags]
  Loads the datapath, attaches it to a cgroup, and keeps the maps in sync.
  Source (one of):
    (default)            the Kubernetes API, with in-cluster credentials
    --kubeconfig PATH    the Kubernetes API, with this kubeconfig
    --manifests DIR      a directory of Service/EndpointSlice YAML (local runs)
  --k8s-api-server URL   https://HOST:PORT of the API server, bypassing the
                         kubernetes Service (env SVCMAP_K8S_API_SERVER)
  --node-name NAME       this node's name (env NODE_NAME); required with the API
  --cgroup PATH          cgroup v2 directory to attach the socket hooks to
                         (default: the cgroup v2 mount root)
  --pin-dir DIR          bpffs directory for pins (default /sys/fs/bpf/svcmap)
  --bpf-dir DIR          where compiled BPF objects are cached (default build/bpf)
  --compile              compile the BPF programs even if a cached object matches
  --max-services N       services map capacity for a new map (default 65536)
  --max-backends N       backends map capacity for a new map (default 65536)
  --max-conntrack N      tc connection tracking capacity (default 262144)
  --max-affinity N       session affinity (ClientIP) map capacity, clients x
                         services remembered (LRU; default 65536)
  --devices LIST         interfaces for NodePort/LoadBalancer/externalIP traffic
                         from outside (comma-separated; default: the interfaces
                         holding the node's InternalIP/ExternalIP, plus those
                         with a default route or a route through a gateway,
                         followed as routes change)
  --tc-attach MODE       auto (tcx links where the kernel has them, else clsact
                         filters), tcx, or tc (always clsact + cls_bpf)
  --ct-gc-interval D     how often idle flows are removed from the tc connection
                         tracking map (default 10s; 0 = never: LRU eviction only)
  --ct-tcp-timeout D     idle lifetime of an established TCP flow (default 6h);
                         not yet answered: 60s, closing (RST, or FIN both ways): 10s
  --ct-udp-timeout D     idle lifetime of a UDP flow (default 60s)
  --lb-algorithm ALG     how a frontend picks a backend when its Service has no
                         svcmap.io/lb-algorithm annotation: random (default),
                         rr, sh, lc, sed, nq, dh or maglev (see the README)
  --destroy-tcp-sockets  when a backend leaves a Service, also destroy the
                         connected TCP sockets the socket LB sent to it
                         (connected UDP ones always are; needs Linux 6.5+)
  --min-sync-interval D  minimum time between syncs (default 0s: immediate)
  --sync-period D        periodic full resync (default 1h)
  --metrics-bind-address ADDR:PORT
                         Prometheus /metrics (default 127.0.0.1:10249; IPv6 as
                         [::1]:10249; [::] both families; port 0 any; off)
  --healthz-bind-address ADDR:PORT
                         /healthz, /livez, /readyz (default 0.0.0.0:10256; as
                         above). healthCheckNodePort servers always listen on
                         both families, whatever these say
  --healthz-timeout D    how long a change may wait for the maps before /healthz
                         and /livez answer 503 (default 60s, kube-proxy's; or
                         twice --min-sync-interval if longer)
  --log-level LEVEL      debug, info, warn or error (default info)`;

/** Flags of earlier releases, with what replaced them: named in the error rather than "unknown option". */
const REPLACED: Record<string, string> = {
  'metrics-port': '--metrics-bind-address ADDR:PORT',
  'health-port': '--healthz-bind-address ADDR:PORT',
  'bind-address': '--metrics-bind-address and --healthz-bind-address',
};

const schema = z.object({
  manifests: z.string().min(1).optional(),
  kubeconfig: z.string().min(1).optional(),
  'k8s-api-server': z.string().optional(),
  cgroup: z.string().startsWith('/', 'must be an absolute path').optional(),
  'pin-dir': pinDirFlag,
  'node-name': z.string().optional(),
  'bpf-dir': z.string().optional(),
  compile: z.boolean().default(false),
  'max-services': intString(1, 16_777_216).optional(),
  'max-backends': intString(1, 16_777_216).optional(),
  'max-conntrack': intString(1, 16_777_216).optional(),
  'max-affinity': intString(1, 16_777_216).optional(),
  'tc-attach': z.enum(['auto', 'tcx', 'tc'], { message: 'must be auto, tcx or tc' }).default('auto'),
  devices: z.string().regex(/^[A-Za-z0-9_.:@-]{1,15}(,[A-Za-z0-9_.:@-]{1,15})*$/, 'must be a comma-separated list of interface names').optional(),
  'ct-gc-interval': duration.default(10_000),
  'ct-tcp-timeout': duration.refine((ms) => ms >= 1000, { message: 'must be at least 1s' }).optional(),
  'ct-udp-timeout': duration.refine((ms) => ms >= 1000, { message: 'must be at least 1s' }).optional(),
  'lb-algorithm': z.enum(LB_ALGORITHMS_IMPLEMENTED, { message: `must be one of ${LB_ALGORITHMS_IMPLEMENTED.join(', ')}` }).default('random'),
  'destroy-tcp-sockets': z.boolean().default(false),
  'min-sync-interval': duration.default(0),
  'sync-period': duration.default(3_600_000),
  'metrics-bind-address': bindAddressFlag(10249).default(() => ({ bindAddress: '127.0.0.1', port: 10249 })),
  'healthz-bind-address': bindAddressFlag(10256).default(() => ({ bindAddress: '0.0.0.0', port: 10256 })),
  'healthz-timeout': duration.refine((ms) => ms > 0, { message: 'must be more than 0' }).optional(),
  'log-level': z.enum(LOG_LEVELS, { message: `must be one of ${LOG_LEVELS.join(', ')}` }).default('info'),
});

export async function agent(argv: string[]): Promise<void> {
  for (const [old, now] of Object.entries(REPLACED)) {
    if (argv.some((a) => a === `--${old}` || a.startsWith(`--${old}=`))) throw new UsageError(`svcmap agent: --${old} was replaced by ${now}`);
  }
  const f = parseFlags(argv, {
    manifests: { type: 'string' },
    kubeconfig: { type: 'string' },
    'k8s-api-server': { type: 'string' },
    cgroup: { type: 'string' },
    'pin-dir': { type: 'string' },
    'node-name': { type: 'string' },
    'bpf-dir': { type: 'string' },
    compile: { type: 'boolean' },
    'max-services': { type: 'string' },
    'max-backends': { type: 'string' },
    'max-conntrack': { type: 'string' },
    'max-affinity': { type: 'string' },
    devices: { type: 'string' },
    'tc-attach': { type: 'string' },
    'ct-gc-interval': { type: 'string' },
    'ct-tcp-timeout': { type: 'string' },
    'ct-udp-timeout': { type: 'string' },
    'lb-algorithm': { type: 'string' },
    'destroy-tcp-sockets': { type: 'boolean' },
    'min-sync-interval': { type: 'string' },
    'sync-period': { type: 'string' },
    'metrics-bind-address': { type: 'string' },
    'healthz-bind-address': { type: 'string' },
    'healthz-timeout': { type: 'string' },
    'log-level': { type: 'string' },
  }, schema, 'agent');
  if (f.manifests && (f.kubeconfig || f['k8s-api-server'])) {
    throw new UsageError('svcmap agent: --manifests is a local file source; it cannot be combined with --kubeconfig or --k8s-api-server');
  }
  if (f['sync-period'] <= 0) throw new UsageError('svcmap agent: --sync-period: must be more than 0');
  const log = createLogger(f['log-level']);
  const nodeName = f['node-name'] ?? process.env.NODE_NAME;
  const apiServer = f['k8s-api-server'] ?? process.env.SVCMAP_K8S_API_SERVER;
  const source: AgentSource = f.manifests
    ? { kind: 'files', dir: f.manifests }
    : { kind: 'kubernetes', ...(f.kubeconfig ? { kubeconfig: f.kubeconfig } : {}), ...(apiServer ? { apiServer } : {}) };
  const running = await runAgent({
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
    lbAlgorithm: f['lb-algorithm'],
  }, log);
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => running.stop());
  await running.stopped;
}
