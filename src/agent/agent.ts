// svcmap agent: a list of parts (components.ts), started in order: the
// datapath first, then the parts built on its maps, metrics and health
// endpoints, the sync loop, and last the source (a manifest directory, or
// the Kubernetes API) that drives the sync. On SIGTERM the agent stops them
// in the reverse order and leaves the datapath pinned and working; svcmap
// cleanup removes it.
import type { LbAlgorithmName, LbMode } from '../maps/constants.ts';
import { readBackendConnections } from '../maps/backend-connections.ts';
import { readDatapathCounters } from '../maps/datapath-counters.ts';
import { EVERY_NODE_ADDRESS, type NodePortAddressSpec } from '../model/nodeport-addresses.ts';
import { DEFAULT_NODE_PORT_RANGE, type PortRange } from '../model/host-ports.ts';
import type { Frontend, NodeInfo } from '../model/types.ts';
import type { KubeConfig } from '../sources/kubernetes/client-node.ts';
import type { KubeConnection } from '../sources/kubernetes/config.ts';
import { FamilySyncers } from '../sync/families.ts';
import { MapsAdapter } from '../sync/maps-adapter.ts';
import { Syncer } from '../sync/syncer.ts';
import { ZoneNames } from '../sync/zones.ts';
import type { Family } from '../util/family.ts';
import { type Component, Components } from './components.ts';
import { CONNS_ADJUST_PROGRAM, ConnCounts } from './datapath/conn-counts.ts';
import { type Datapath, type DatapathOptions, DatapathPart, vethLbOn } from './datapath/datapath.ts';
import { leftInPlace } from './datapath/left-in-place.ts';
import { SocketCounter } from './datapath/socket-recount.ts';
import { SocketTerminator } from './datapath/socket-terminator.ts';
import { PodBypass } from './datapath/sock-bypass.ts';
import { TcDatapath } from './datapath/tc-datapath.ts';
import { XDP_PROGRAM, XDP_TX_MAP, XdpDevices } from './datapath/xdp-devices.ts';
import { clearRemovedFlows } from './loops/ct-clear.ts';
import { VethDatapath } from './datapath/veth-datapath.ts';
import { readHostNet, uplinkDevices } from './datapath/host-net.ts';
import { type HealthCheckService, HealthCheckPorts, healthCheckOf } from './http/health-check-ports.ts';
import { HttpServers, proxyHealthy } from './http/http-servers.ts';
import type { IpFamily } from './http/kube-proxy-metrics.ts';
import { AgentMetrics, type BuildLabels } from './http/metrics.ts';
import type { Logger } from './log.ts';
import { CtGc, type CtLifetimes } from './loops/ct-gc.ts';
import { HeapReclaimer } from './loops/heap.ts';
import { countingProblemReporter } from './loops/problems-log.ts';
import { fileSourcePart } from './loops/source-part.ts';
import { SyncLoop } from './loops/sync-loop.ts';
import { DEFAULT_LB_MODE } from './loops/targets.ts';
import { SyncStatus } from './loops/sync-status.ts';

/** stallMs: how long a watch may stay silent before its API server counts as stalled (default: server-bound.ts). */
export type AgentSource = { kind: 'files'; dir: string } | ({ kind: 'kubernetes'; stallMs?: number } & KubeConnection);

export interface AgentConfig extends DatapathOptions {
  source: AgentSource;
  nodeName?: string;
  metrics: { bindAddress: string; port: number } | null;
  health: { bindAddress: string; port: number } | null;
  /** How long a change may wait for the maps before /healthz and /livez answer 503 (default: 60 s, or twice minSyncIntervalMs if longer). */
  healthTimeoutMs?: number;
  /** What svcmap_build_info says. */
  build?: BuildLabels;
  /** Minimum time between syncs (0: as soon as a change arrives). */
  minSyncIntervalMs: number;
  /** Maximum time between syncs: the periodic full resync. */
  syncPeriodMs: number;
  /** Interfaces for the tc datapath; default: those holding the node's addresses. */
  devices?: string[];
  /** tcx links where the kernel has them (auto), or force one kind. */
  tcAttach?: 'auto' | 'tcx' | 'tc';
  /** Conntrack GC of the tc datapath: interval (default 10 s; 0 = off) and idle lifetimes (Cilium's defaults). */
  ctGc?: { intervalMs?: number; lifetimes?: Partial<CtLifetimes> };
  /** The load-balancing algorithm of a Service without svcmap.io/lb-algorithm (default random). */
  lbAlgorithm?: LbAlgorithmName;
  /** How NodePort/LoadBalancer/externalIP traffic reaches a remote backend when its Service has no svcmap.io/lb-mode (default snat). */
  lbMode?: LbMode;
  /** Also destroy connected TCP sockets sent to a removed backend (UDP ones always are, where the kernel can). */
  destroyTcpSockets?: boolean;
  /** Socket termination finds pods' network namespaces in this directory of pinned namespaces, not through the cgroup's processes. */
  netnsDir?: string;
  /** Which of the node's addresses serve NodePorts (--nodeport-addresses; default: every one). */
  nodePortAddresses?: NodePortAddressSpec;
  /** Serve this node's Pods' hostPorts (--host-ports; default: on). */
  hostPorts?: boolean;
  /** The cluster's NodePort range: hostPorts inside it are ignored (--node-port-range; default 30000-32767). */
  nodePortRange?: PortRange;
}

export interface RunningAgent {
  stop(): void;
  stopped: Promise<void>;
  metricsPort?: number;
  healthPort?: number;
}

export async function runAgent(cfg: AgentConfig, log: Logger): Promise<RunningAgent> {
  // The Kubernetes client (client-node's config and informers, without its generated API): loaded only when it is the source.
  const k8s =
    cfg.source.kind === 'kubernetes'
      ? {
          ...(await import('../sources/kubernetes/config.ts')),
          ...(await import('./loops/kube-source-part.ts')),
          ...(await import('./events/k8s-sink.ts')),
        }
      : undefined;
  // Fail on bad credentials before touching the datapath.
  const kc = cfg.source.kind === 'kubernetes' ? k8s!.loadKubeConfig(cfg.source) : undefined;
  if (cfg.source.kind === 'kubernetes' && !cfg.nodeName) {
    throw new Error(
      "the Kubernetes source needs this node's name: --node-name NAME or the NODE_NAME environment variable (from the downward API: spec.nodeName)",
    );
  }

  const parts = new Components((name, err) => log.error({ err, part: name }, 'stopping a part of the agent failed'));
  // The datapath first: its maps are what the other parts are built on.
  const datapath = new DatapathPart(cfg, log);
  await parts.start([datapath]);
  try {
    const list = buildParts(cfg, log, datapath.datapath, k8s && kc ? { ...k8s, kc } : undefined);
    await parts.start(list.parts);
    let resolveStopped!: () => void;
    const stopped = new Promise<void>((r) => (resolveStopped = r));
    let done = false;
    const stop = () => {
      if (done) return;
      done = true;
      parts.stop();
      // The last line: the datapath goes on serving without the agent, and what holds it there.
      log.info(
        leftInPlace(cfg.pinDir, list.tc.attachments),
        'agent stopped; the datapath keeps serving: the programs stay attached through their pinned links and the maps stay pinned (svcmap cleanup removes them)',
      );
      resolveStopped();
    };
    const { metricsPort, healthPort } = list.servers;
    return { ...(metricsPort !== undefined ? { metricsPort } : {}), ...(healthPort !== undefined ? { healthPort } : {}), stop, stopped };
  } catch (err) {
    parts.stop(); // the datapath too, when building the list failed
    throw err;
  }
}

/** What the Kubernetes source brings: its part, its Events sink, and the client's config. */
type KubeKit = typeof import('./loops/kube-source-part.ts') &
  typeof import('./events/k8s-sink.ts') &
  Pick<typeof import('../sources/kubernetes/config.ts'), 'apiServerUrls'> & { kc: KubeConfig };

/**
 * The agent's parts on a datapath that is up, in the order they start (the
 * reverse of the order they stop): nothing here acquires anything yet.
 */
function buildParts(
  cfg: AgentConfig,
  log: Logger,
  dp: Datapath,
  k8s: KubeKit | undefined,
): { parts: Component[]; servers: HttpServers; tc: TcDatapath } {
  const families: IpFamily[] = dp.maps.v6 ? ['IPv4', 'IPv6'] : ['IPv4'];
  const metrics = new AgentMetrics({ families, lbMode: cfg.lbMode ?? DEFAULT_LB_MODE, ...(cfg.build ? { build: cfg.build } : {}) });
  const bpfBuild = { ...(cfg.objectDir ? { objectDir: cfg.objectDir } : {}), ...(cfg.forceCompile ? { forceCompile: true } : {}) };
  const terminator = new SocketTerminator(
    {
      pinDir: cfg.pinDir,
      cgroup: cfg.cgroup,
      tcp: cfg.destroyTcpSockets ?? false,
      ...(cfg.netnsDir ? { netnsDir: cfg.netnsDir } : {}),
      ...(cfg.objectDir ? { objectDir: cfg.objectDir } : {}),
      ...(cfg.forceCompile ? { forceCompile: true } : {}),
    },
    log,
    metrics.registry,
  );
  // Backends that leave a frontend: the sockets the socket LB sent to them are destroyed (each family's by its own map).
  // Backends that leave a frontend: their UDP flows' conntrack entries go too (kube-proxy clears UDP conntrack so).
  const syncer = new FamilySyncers(
    dp.maps.families().map((maps) => ({
      family: maps.family,
      syncer: new Syncer(new MapsAdapter(maps), {
        onBackendsRemoved: (removed) => {
          terminator.enqueue(removed, maps.family);
          const cleared = clearRemovedFlows(maps, removed);
          if (cleared) log.info({ family: maps.family, entries: cleared }, "conntrack entries of removed backends' UDP flows deleted");
        },
      }),
    })),
    (family, full, ms) => metrics.kubeProxy.synced(family === 6 ? 'IPv6' : 'IPv4', full, ms),
  );
  log.info({ frontends: syncer.state.frontends.size, backends: syncer.state.backends.size }, 'read current map state');
  const counters = dp.maps.counters;
  if (counters) metrics.readDatapathCountersWith(() => readDatapathCounters(counters));
  metrics.readBackendConnectionsWith(() => readBackendConnections(dp.maps.families()));

  // Live connection counts (lc, sed, nq): the GC takes collected flows off them and recounts tc's.
  const conns = new ConnCounts(dp.maps.families(), dp.tc.programFd(CONNS_ADJUST_PROGRAM), (family) =>
    SocketCounter.load({ pinDir: cfg.pinDir, family, ...bpfBuild }, log),
  );
  const ctGc = new CtGc(dp.maps.families(), { ...cfg.ctGc, metrics, log, ...(conns.any ? { conns } : {}) });
  // Kubernetes Events about what could not be programmed: only where there is an API server to hold them.
  const events = k8s ? k8s.startKubernetesEvents(k8s.kc, cfg.nodeName!, log, metrics) : undefined;
  const heap = new HeapReclaimer(log);
  const statusArgs = [metrics, log, { afterFullSync: () => heap.afterFullSync() }] as const;
  const status = events?.syncStatus(...statusArgs) ?? new SyncStatus(...statusArgs);
  const problems = countingProblemReporter(log, metrics, events?.problems);
  const tc = new TcDatapath(dp.tc, { config: dp.maps.config!, families: dp.maps.families() }, cfg.pinDir, log, {
    devices: cfg.devices,
    mode: cfg.tcAttach ?? 'auto',
    // With --devices the node's name is all there is to know at start; without, the devices come from its addresses and routes.
    node: cfg.devices?.length && cfg.nodeName ? { name: cfg.nodeName, addresses: [] } : undefined,
    onAttachFailed: () => metrics.syncErrors.inc({ kind: 'write_failed' }),
    onDevices: (devices) => metrics.externalDevices(devices),
    // Also with acceleration disabled: it detaches what an earlier run attached.
    xdp: new XdpDevices(
      () => {
        if (!dp.xdp) throw new Error('the XDP object is not loaded');
        return { progFd: dp.xdp.programFd(XDP_PROGRAM), tx: dp.xdp.map(XDP_TX_MAP) };
      },
      cfg.pinDir,
      cfg.acceleration ?? 'disabled',
      log,
    ),
    // Every address the node holds may serve NodePorts: the model builds their frontends.
    onNodeAddresses: (addresses) => {
      log.info({ addresses }, "the node's addresses");
      source.source.model.setNodePortAddresses(nodePorts, addresses);
      loop?.poke();
    },
  });
  const vethOn = vethLbOn(cfg);
  const veth = vethOn
    ? new VethDatapath(dp.veth!, cfg.pinDir, log, {
        mode: cfg.tcAttach ?? 'auto',
        // The tc datapath's devices, and every way out of the node (also before the Node is known and tc attached).
        externalDevices: () => [...tc.attachments.map((a) => a.device), ...uplinkDevices(readHostNet())],
      })
    : undefined;
  // Pods that bypass the socket LB (svcmap.io/socket-lb), found by their cgroups below the one the hooks attach to.
  const bypass =
    dp.maps.sockBypass && dp.maps.sockConfig
      ? new PodBypass({ bypass: dp.maps.sockBypass, sockConfig: dp.maps.sockConfig }, cfg.cgroup, log)
      : undefined;
  /** The objects whose svcmap.io/socket-lb problems were last reported non-empty: one that leaves has them cleared. */
  let bypassProblems = new Set<string>();
  const takeBypass = () => {
    if (!bypass || !source.source.isSynced) return; // the first lists are not in: the pinned entries stay
    const r = source.source.model.socketLb.take({ nodeName: cfg.nodeName, vethOn: Boolean(vethOn) });
    if (!r) return;
    const now = new Set<string>();
    for (const [key, list] of r.problems) {
      if (list.length) now.add(key);
      if (list.length || bypassProblems.has(key)) problems.reportObject(`${key} socket-lb`, list);
    }
    for (const key of bypassProblems) if (!r.problems.has(key)) problems.reportObject(`${key} socket-lb`, []);
    bypassProblems = now;
    bypass.set(r.pods);
  };
  const healthTimeoutMs = cfg.healthTimeoutMs ?? Math.max(60_000, 2 * cfg.minSyncIntervalMs);
  const healthChecks = new HealthCheckPorts(log, () => proxyHealthy(status.health, healthTimeoutMs));
  const servers = new HttpServers(
    metrics,
    {
      metrics: cfg.metrics,
      health: cfg.health && { ...cfg.health, families, lbMode: cfg.lbMode ?? DEFAULT_LB_MODE },
      state: () => status.health,
      timeoutMs: healthTimeoutMs,
    },
    log,
  );

  // One sync loop for both sources; the source only feeds its model.
  let loop: SyncLoop | undefined;
  const hooks = {
    changed: () => {
      loop?.poke();
      takeBypass();
    },
    event: (kind: 'Service' | 'EndpointSlice') =>
      kind === 'Service' ? metrics.kubeProxy.serviceEvent() : metrics.kubeProxy.endpointSliceEvent(),
    node: (node: NodeInfo | undefined) => {
      tc.attach(node);
      veth?.resync(); // the node's devices are known now: none of them is a pod's
    },
    failed: () => metrics.syncErrors.inc({ kind: 'source' }),
    sliceTrigger: (svc: string, at: number, family: Family) => loop?.trigger(svc, at, family),
    apiServer: (url: string, moved: boolean) => metrics.apiServer(url, moved),
  };
  const source =
    cfg.source.kind === 'files'
      ? fileSourcePart(cfg.source.dir, cfg.nodeName, hooks, log)
      : k8s!.kubeSourcePart(k8s!.kc, cfg.nodeName!, hooks, status, log, {
          ...(cfg.source.apiServer ? { apiServers: k8s!.apiServerUrls(cfg.source.apiServer) } : {}),
          ...(cfg.source.stallMs ? { stallMs: cfg.source.stallMs } : {}),
          // For their hostPorts, and for svcmap.io/socket-lb.
          pods: (cfg.hostPorts ?? true) || Boolean(vethOn),
        });
  const nodePorts = cfg.nodePortAddresses ?? EVERY_NODE_ADDRESS;
  source.source.model.setNodePortAddresses(nodePorts, []);
  source.source.model.setHostPorts(cfg.hostPorts ?? true, cfg.nodePortRange ?? DEFAULT_NODE_PORT_RANGE);
  loop = new SyncLoop(source.source, syncer, status, metrics, problems, log, {
    minIntervalMs: cfg.minSyncIntervalMs,
    syncPeriodMs: cfg.syncPeriodMs,
    ...(cfg.lbAlgorithm ? { lbAlgorithm: cfg.lbAlgorithm } : {}),
    ...(cfg.lbMode ? { lbMode: cfg.lbMode } : {}),
    ...(dp.maps.zones ? { zones: new ZoneNames(dp.maps.zones, (msg, zone) => log.warn({ zone }, msg)) } : {}),
    onServices: (changed, full) => {
      // A full sync lists every Service: one that is gone (say, deleted while
      // a partial sync failed) loses its health check server here.
      if (full) healthChecks.replaceAll(healthChecksByService([...changed.values()].flat()));
      else for (const [svc, frontends] of changed) healthChecks.set(svc, healthCheckOf(frontends));
    },
  });

  const parts: Array<Component | undefined> = [
    terminator,
    conns.any ? conns : undefined,
    ctGc.any ? ctGc : undefined,
    events,
    tc,
    veth,
    bypass,
    healthChecks,
    servers,
    loop,
    source,
  ];
  return { parts: parts.filter((p) => p !== undefined), servers, tc };
}

function healthChecksByService(frontends: Iterable<Frontend>): Map<string, HealthCheckService> {
  const bySvc = new Map<string, Frontend[]>();
  for (const f of frontends) {
    if (f.service.kind === 'Pod') continue; // a hostPort has no health check
    const id = `${f.service.namespace}/${f.service.name}`;
    const list = bySvc.get(id);
    if (list) list.push(f);
    else bySvc.set(id, [f]);
  }
  const out = new Map<string, HealthCheckService>();
  for (const [id, list] of bySvc) {
    const hc = healthCheckOf(list);
    if (hc) out.set(id, hc);
  }
  return out;
}
