// svcmap agent: flags -> config -> runAgent, with signal handling.
import { z } from 'zod';
import { defaultCgroup } from '../bpf/environment.ts';
import { type AgentSource, runAgent } from '../agent/agent.ts';
import { LOG_LEVELS, createLogger } from '../agent/log.ts';
import { LB_ALGORITHMS_IMPLEMENTED } from '../maps/constants.ts';
import { UsageError, duration, intString, parseFlags, pinDirFlag } from './args.ts';

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
  --metrics-port N       Prometheus /metrics (default 10249; 0 = any free port; off)
  --health-port N        /healthz, /livez, /readyz (default 10256; 0 = any; off)
  --bind-address ADDR    address for both (default: metrics 127.0.0.1, health 0.0.0.0);
                         healthCheckNodePort servers listen on every address
                         of both families, as kube-proxy's
  --log-level LEVEL      debug, info, warn or error (default info)`;

const port = z.string().regex(/^(\d+|off)$/, 'must be a port number, 0 for any free port, or off').transform((v) => (v === 'off' ? -1 : Number(v)))
  .refine((n) => n <= 65535, { message: 'must be between 0 and 65535' });

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
  'metrics-port': port.default(10249),
  'health-port': port.default(10256),
  'bind-address': z.ipv4({ message: 'must be an IPv4 address' }).optional(),
  'log-level': z.enum(LOG_LEVELS, { message: `must be one of ${LOG_LEVELS.join(', ')}` }).default('info'),
});

export async function agent(argv: string[]): Promise<void> {
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
    'metrics-port': { type: 'string' },
    'health-port': { type: 'string' },
    'bind-address': { type: 'string' },
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
  const endpoint = (p: number, defaultAddress: string) => (p < 0 ? null : { bindAddress: f['bind-address'] ?? defaultAddress, port: p });
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
    metrics: endpoint(f['metrics-port'], '127.0.0.1'),
    health: endpoint(f['health-port'], '0.0.0.0'),
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
