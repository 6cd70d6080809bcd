// svcmap agent: datapath up, metrics and health endpoints up, then the
// source (a manifest directory, or the Kubernetes API) drives the sync. On
// SIGTERM the agent exits and leaves the datapath pinned and working;
// svcmap cleanup removes it.
import type { LbAlgorithmName } from '../maps/constants.ts';
import { readBackendConnections } from '../maps/backend-connections.ts';
import { readDatapathCounters } from '../maps/datapath-counters.ts';
import type { Frontend } from '../model/types.ts';
import { FileSource, MANIFEST_READ } from '../sources/file/file-source.ts';
import type { KubeConnection } from '../sources/kubernetes/config.ts';
import { MapsAdapter } from '../sync/maps-adapter.ts';
import { Syncer } from '../sync/syncer.ts';
import { ZoneNames } from '../sync/zones.ts';
import { FamilySyncers } from '../sync/families.ts';
import { Components } from './components.ts';
import { CONNS_ADJUST_PROGRAM, ConnCounts } from './datapath/conn-counts.ts';
import { CtGc, type CtLifetimes } from './loops/ct-gc.ts';
import { type DatapathOptions, bringUpDatapath } from './datapath/datapath.ts';
import { type HealthCheckService, HealthCheckPorts, healthCheckOf } from './http/health-check-ports.ts';
import { proxyHealthy, serveHealth, serveMetrics } from './http/http-servers.ts';
import { type ModelSource, SyncLoop } from './loops/sync-loop.ts';
import type { Logger } from './log.ts';
import { AgentMetrics, type BuildLabels } from './http/metrics.ts';
import type { IpFamily } from './http/kube-proxy-metrics.ts';
import { countingProblemReporter } from './loops/problems-log.ts';
import { SyncStatus } from './loops/sync-status.ts';
import { HeapReclaimer } from './loops/heap.ts';
import { SocketCounter } from './datapath/socket-recount.ts';
import { SocketTerminator } from './datapath/socket-terminator.ts';
import { TcDatapath } from './datapath/tc-datapath.ts';
import type { Family } from '../util/family.ts';

export type AgentSource = { kind: 'files'; dir: string } | ({ kind: 'kubernetes' } & KubeConnection);

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
  /** Also destroy connected TCP sockets sent to a removed backend (UDP ones always are, where the kernel can). */
  destroyTcpSockets?: boolean;
  /** Socket termination finds pods' network namespaces in this directory of pinned namespaces, not through the cgroup's processes. */
  netnsDir?: string;
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
          ...(await import('../sources/kubernetes/source.ts')),
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

  const dp = bringUpDatapath(cfg, (msg, fields) => log.info(fields ?? {}, msg));
  // Each part once started; stopped in the reverse order.
  const parts = new Components((name, err) => log.error({ err, part: name }, 'stopping a part of the agent failed'));
  parts.add('datapath', () => {
    dp.maps.close();
    dp.sock.close(); // pins and links stay: the datapath keeps working
    dp.tc.close();
    dp.pinLock.release(); // from here svcmap cleanup no longer asks for --force
  });
  // A part that fails to start stops the ones started before it: nothing is left running behind the error.
  try {
    for (const n of dp.notes) log.warn(n);
    log.info(
      {
        objects: dp.objectPaths,
        reusedMaps: dp.reusedMaps,
        links: dp.links,
        cgroup: cfg.cgroup,
        pinDir: cfg.pinDir,
      },
      dp.reusedMaps.length ? 'datapath up (reusing pinned maps)' : 'datapath up',
    );

    // Backends that leave a frontend: the sockets the socket LB sent to them are destroyed (each family's by its own map).
    const { v4, v6 } = dp.maps;
    const families: IpFamily[] = v6 ? ['IPv4', 'IPv6'] : ['IPv4'];
    const metrics = new AgentMetrics({ families, ...(cfg.build ? { build: cfg.build } : {}) });
    const syncer = new FamilySyncers(
      new Syncer(new MapsAdapter(v4), { onBackendsRemoved: (removed) => terminator.enqueue(removed, 4) }),
      v6 ? new Syncer(new MapsAdapter(v6), { onBackendsRemoved: (removed) => terminator.enqueue(removed, 6) }) : undefined,
      (family, full, ms) => metrics.kubeProxy.synced(family === 6 ? 'IPv6' : 'IPv4', full, ms),
    );
    log.info({ frontends: syncer.state.frontends.size, backends: syncer.state.backends.size }, 'read current map state');

    const terminator = SocketTerminator.start(
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
    parts.add('socket terminator', () => terminator.close());
    const counters = dp.maps.counters;
    if (counters) metrics.readDatapathCountersWith(() => readDatapathCounters(counters));
    metrics.readBackendConnectionsWith(() => readBackendConnections([dp.maps.family(4), dp.maps.family(6)]));
    // Live connection counts (lc, sed, nq): the GC takes collected flows off them and recounts tc's.
    const counter = (family: Family) =>
      SocketCounter.load(
        {
          pinDir: cfg.pinDir,
          family,
          ...(cfg.objectDir ? { objectDir: cfg.objectDir } : {}),
          ...(cfg.forceCompile ? { forceCompile: true } : {}),
        },
        log,
      );
    const sockets = v4.conns ? counter(4) : undefined;
    const conns = v4.conns
      ? new ConnCounts(
          { conns: v4.conns, backends: v4.backends },
          dp.tc.programFd(CONNS_ADJUST_PROGRAM),
          sockets,
          v6?.conns ? { maps: { conns: v6.conns, backends: v6.backends }, sockets: sockets ? counter(6) : undefined } : undefined,
        )
      : undefined;
    if (conns) parts.add('connection counts', () => conns.close());
    const ctGc = v4.ct ? new CtGc(v4.ct, { ...cfg.ctGc, metrics, log, map6: v6?.ct, ...(conns ? { conns } : {}) }) : undefined;
    if (ctGc) {
      ctGc.start();
      parts.add('conntrack GC', () => ctGc.stop());
    }
    // Kubernetes Events about what could not be programmed: only where there is an API server to hold them.
    const events = k8s ? k8s.startKubernetesEvents(kc!, cfg.nodeName!, log, metrics) : undefined;
    if (events) parts.add('events', () => events.stop());
    const heap = new HeapReclaimer(log);
    const statusArgs = [metrics, log, { afterFullSync: () => heap.afterFullSync() }] as const;
    const status = events?.syncStatus(...statusArgs) ?? new SyncStatus(...statusArgs);
    const problems = countingProblemReporter(log, metrics, events?.problems);
    const tcDatapath = new TcDatapath(
      dp.tc,
      { config: dp.maps.config!, devAddr: v4.devAddr!, devAddr6: v6?.devAddr },
      cfg.pinDir,
      log,
      cfg.devices,
      cfg.tcAttach ?? 'auto',
    );
    const attachTc = (node: { name: string; addresses: string[] } | undefined) => {
      try {
        tcDatapath.update(node);
      } catch (err) {
        metrics.syncErrors.inc({ kind: 'write_failed' });
        log.error({ err }, 'attaching the tc datapath failed; NodePort/LoadBalancer/externalIP traffic from outside is not translated');
      }
    };
    if (cfg.devices?.length) attachTc(cfg.nodeName ? { name: cfg.nodeName, addresses: [] } : undefined);
    else attachTc(undefined); // the SNAT addresses, and the devices with routes out of the node
    // From now on the node's address and route changes are followed without a restart.
    tcDatapath.follow();
    parts.add('tc datapath', () => tcDatapath.stop());
    const healthTimeoutMs = cfg.healthTimeoutMs ?? Math.max(60_000, 2 * cfg.minSyncIntervalMs);
    const healthChecks = new HealthCheckPorts(log, () => proxyHealthy(status.health, healthTimeoutMs));
    parts.add('health check ports', () => healthChecks.close());
    const running: Partial<RunningAgent> = {};
    if (cfg.metrics) {
      const m = await serveMetrics(metrics, cfg.metrics);
      parts.add('metrics server', () => m.server.close());
      running.metricsPort = m.port;
    }
    if (cfg.health) {
      const h = await serveHealth(() => status.health, healthTimeoutMs, { ...cfg.health, families });
      parts.add('health server', () => h.server.close());
      running.healthPort = h.port;
    }
    log.info(
      {
        metricsPort: running.metricsPort,
        healthPort: running.healthPort,
        metricsAddress: cfg.metrics?.bindAddress,
        healthAddress: cfg.health?.bindAddress,
      },
      'serving metrics and health',
    );

    // One sync loop for both sources; the source only feeds its model.
    let loop: SyncLoop | undefined;
    const changed = () => loop?.poke();
    const countEvent = (kind: 'Service' | 'EndpointSlice') =>
      kind === 'Service' ? metrics.kubeProxy.serviceEvent() : metrics.kubeProxy.endpointSliceEvent();
    let source: ModelSource & { stop(): void };
    let started: () => Promise<void>;
    if (cfg.source.kind === 'files') {
      const files = new FileSource({
        dir: cfg.source.dir,
        ...(cfg.nodeName ? { nodeName: cfg.nodeName } : {}),
        changed,
        event: countEvent,
        onNode: (node) => attachTc(node),
        // Debug: a test that writes a file waits for this, then for the sync after it.
        onRead: (file) => log.debug({ file }, MANIFEST_READ),
        onError: (err) => {
          metrics.syncErrors.inc({ kind: 'source' });
          log.error({ err }, 'reading manifests failed; keeping the last state');
        },
      });
      source = files;
      started = async () => {
        await files.start();
        log.info({ manifests: (cfg.source as { dir: string }).dir }, 'watching manifests');
      };
    } else {
      const kube = new k8s!.KubernetesSource(kc!, cfg.nodeName, {
        changed,
        informerError: (kind, err, retryMs) => {
          metrics.syncErrors.inc({ kind: 'source' });
          log.warn(
            { informer: kind, err: String((err as Error)?.message ?? err), retryMs },
            'watch failed; the maps keep their state, retrying',
          );
        },
        sliceTrigger: (svc, at, family) => loop?.trigger(svc, at, family),
        node: (node) => attachTc(node),
        nodeEligible: (eligible) => {
          if (eligible !== status.health.nodeEligible)
            log.warn({ node: cfg.nodeName, eligible }, eligible ? 'node eligible again' : 'node is being deleted: /healthz answers 503');
          status.health.nodeEligible = eligible;
        },
        event: countEvent,
      });
      kube.model.setNode({ name: cfg.nodeName!, addresses: [] });
      source = kube;
      started = async () => {
        kube.start();
        log.info({ apiServer: kc!.getCurrentCluster()?.server, node: cfg.nodeName }, 'watching the Kubernetes API');
        void kube.synced.then(() => log.info('informers synced'));
      };
    }
    loop = new SyncLoop(source, syncer, status, metrics, problems, log, {
      minIntervalMs: cfg.minSyncIntervalMs,
      syncPeriodMs: cfg.syncPeriodMs,
      ...(cfg.lbAlgorithm ? { lbAlgorithm: cfg.lbAlgorithm } : {}),
      ...(dp.maps.zones ? { zones: new ZoneNames(dp.maps.zones, (msg, zone) => log.warn({ zone }, msg)) } : {}),
      onServices: (changed, full) => {
        // A full sync lists every Service: one that is gone (say, deleted while
        // a partial sync failed) loses its health check server here.
        if (full) healthChecks.replaceAll(healthChecksByService([...changed.values()].flat()));
        else for (const [svc, frontends] of changed) healthChecks.set(svc, healthCheckOf(frontends));
      },
    });
    loop.start();
    parts.add('sync loop', () => loop.stop());
    await started();
    parts.add('source', () => source.stop());

    let resolveStopped!: () => void;
    const stopped = new Promise<void>((r) => (resolveStopped = r));
    let done = false;
    const stop = () => {
      if (done) return;
      done = true;
      parts.stop();
      log.info('agent stopped; datapath left in place (svcmap cleanup removes it)');
      resolveStopped();
    };
    return { ...running, stop, stopped };
  } catch (err) {
    parts.stop();
    throw err;
  }
}

function healthChecksByService(frontends: Iterable<Frontend>): Map<string, HealthCheckService> {
  const bySvc = new Map<string, Frontend[]>();
  for (const f of frontends) {
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
