// Prometheus metrics, in a registry of the agent's own: svcmap's series
// (svcmap_*), kube-proxy's beside them where the meaning is the same
// (kubeproxy_*, kube-proxy-metrics.ts: its dashboards and alerts read svcmap
// unchanged), and the process's under Prometheus' standard names (process_*,
// nodejs_*), as every Node exporter names them.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { BackendConnectionsRow } from '../../maps/backend-connections.ts';
import type { DpCounterRow } from '../../maps/datapath-counters.ts';
import { type IpFamily, KubeProxyMetrics } from './kube-proxy-metrics.ts';
import { LB_MODES, type LbMode } from '../../maps/constants.ts';
import { DEFAULT_LB_MODE } from '../loops/targets.ts';

/** What svcmap_build_info says: the release and commit running, and the Node it runs on. */
export interface BuildLabels {
  version: string;
  /** Short commit hash; "unknown" when built without git. */
  commit: string;
}

export interface MetricsOptions {
  /** The address families whose maps the agent syncs (default IPv4). */
  families?: readonly IpFamily[];
  build?: BuildLabels;
  /** The node's --lb-mode (svcmap_lb_mode_info; default snat). */
  lbMode?: LbMode;
}

export const SYNC_ERROR_KINDS = ['invalid_object', 'map_full', 'write_failed', 'frontend_conflict', 'source', 'annotation_value'] as const;
export type SyncErrorKind = (typeof SYNC_ERROR_KINDS)[number];

export class AgentMetrics {
  readonly registry = new Registry();
  readonly syncDuration: Histogram<'kind'>;
  readonly programmingLatency: Histogram;
  readonly mapEntries: Gauge<'map'>;
  readonly mapCapacity: Gauge<'map'>;
  readonly syncErrors: Counter<'kind'>;
  readonly syncFailures: Counter<'kind'>;
  readonly lastSync: Gauge;
  readonly ready: Gauge;
  readonly frontends: Gauge;
  readonly conntrackEntries: Gauge;
  readonly conntrackGcDeleted: Counter;
  readonly datapathPackets: Counter<'hook' | 'reason'>;
  readonly backendConnections: Gauge<'family' | 'backend' | 'protocol' | 'datapath'>;
  readonly kubeProxy: KubeProxyMetrics;
  readonly #apiServer: Gauge<'url'>;
  readonly #devices: Gauge<'device' | 'runs'>;
  readonly #apiFailovers: Counter;
  #readDatapath: (() => DpCounterRow[]) | undefined;
  #readConnections: (() => BackendConnectionsRow[]) | undefined;

  /** The API server in use: at start, and after each failover (moved). */
  /** The external devices and what meets traffic from outside on each (svcmap_external_device_info). */
  externalDevices(devices: ReadonlyArray<{ device: string; runs: string }>): void {
    this.#devices.reset();
    for (const d of devices) this.#devices.set({ device: d.device, runs: d.runs }, 1);
  }

  apiServer(url: string, moved: boolean): void {
    this.#apiServer.reset();
    this.#apiServer.set({ url }, 1);
    if (moved) this.#apiFailovers.inc();
  }

  constructor(opts: MetricsOptions = {}) {
    // Read from the kernel at scrape time: the datapath keeps the counts.
    const read = () => this.#readDatapath?.() ?? [];
    const readConnections = () => this.#readConnections?.() ?? [];
    collectDefaultMetrics({ register: this.registry });
    this.kubeProxy = new KubeProxyMetrics(this.registry, opts.families ?? ['IPv4']);
    const build = new Gauge({
      name: 'svcmap_build_info',
      help: 'Always 1; the labels say what runs: svcmap version, commit (unknown without git) and node_version (the Node.js runtime).',
      labelNames: ['version', 'commit', 'node_version'],
      registers: [this.registry],
    });
    build.set({ version: opts.build?.version ?? 'unknown', commit: opts.build?.commit ?? 'unknown', node_version: process.version }, 1);
    this.syncDuration = new Histogram({
      name: 'svcmap_sync_duration_seconds',
      help: 'Time to bring the BPF maps in line with the desired state (kind: full or partial).',
      labelNames: ['kind'],
      buckets: [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [this.registry],
    });
    this.programmingLatency = new Histogram({
      name: 'svcmap_network_programming_duration_seconds',
      help: "From an EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time to the map write that reflects it.",
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 30, 45, 60, 120, 300],
      registers: [this.registry],
    });
    this.mapEntries = new Gauge({
      name: 'svcmap_map_entries',
      help: 'Entries in each BPF map.',
      labelNames: ['map'],
      registers: [this.registry],
    });
    this.mapCapacity = new Gauge({
      name: 'svcmap_map_capacity',
      help: 'max_entries of each BPF map.',
      labelNames: ['map'],
      registers: [this.registry],
    });
    this.#devices = new Gauge({
      name: 'svcmap_external_device_info',
      help: "Always 1, for each external device (the tc datapath's) with what meets traffic from outside there (runs): xdp native, xdp generic (--acceleration) or tc only; xdp native with '; forwarding left to tc: the peer takes no XDP frames' (a veth whose peer has neither GRO nor XDP) or '... the driver takes no XDP frames' where XDP decides but tc forwards.",
      labelNames: ['device', 'runs'],
      registers: [this.registry],
    });
    const lbMode = new Gauge({
      name: 'svcmap_lb_mode_info',
      help: `Always 1, for the node's --lb-mode (mode: ${LB_MODES.join(', ')}): how NodePort, LoadBalancer and externalIP traffic reaches a backend on another node when its Service has no svcmap.io/lb-mode annotation.`,
      labelNames: ['mode'],
      registers: [this.registry],
    });
    lbMode.set({ mode: opts.lbMode ?? DEFAULT_LB_MODE }, 1);
    this.#apiServer = new Gauge({
      name: 'svcmap_k8s_api_server_info',
      help: 'Always 1, for the API server the agent lists and watches through now (url); another after a failover.',
      labelNames: ['url'],
      registers: [this.registry],
    });
    this.#apiFailovers = new Counter({
      name: 'svcmap_k8s_api_failovers_total',
      help: 'Moves to the next API server (--k8s-api-server with several) because the one in use stopped answering: connection refused or reset, a timeout, a watch silent past --k8s-api-stall-timeout, an HTTP 5xx.',
      registers: [this.registry],
    });
    this.syncErrors = new Counter({
      name: 'svcmap_sync_errors_total',
      help: 'Problems met while syncing, by kind: invalid_object, map_full, write_failed, frontend_conflict, source, annotation_value (a svcmap.io/ annotation not accepted: the default is used).',
      labelNames: ['kind'],
      registers: [this.registry],
    });
    for (const k of SYNC_ERROR_KINDS) this.syncErrors.inc({ kind: k }, 0);
    this.syncFailures = new Counter({
      name: 'svcmap_sync_failures_total',
      help: 'Syncs whose map writes failed, by kind: partial (some Services) or full (every frontend). Each is retried with backoff (1 s doubling to 30 s); repeated partial failures escalate to a full resync.',
      labelNames: ['kind'],
      registers: [this.registry],
    });
    for (const k of ['partial', 'full']) this.syncFailures.inc({ kind: k }, 0);
    this.lastSync = new Gauge({
      name: 'svcmap_sync_last_success_timestamp_seconds',
      help: 'When the maps were last synced successfully (unix time).',
      registers: [this.registry],
    });
    this.ready = new Gauge({
      name: 'svcmap_ready',
      help: '1 once the first full sync is done (/readyz answers 200), else 0.',
      registers: [this.registry],
    });
    this.ready.set(0);
    this.frontends = new Gauge({
      name: 'svcmap_frontends',
      help: 'Frontends (VIP:port/proto and scope) programmed.',
      registers: [this.registry],
    });
    this.conntrackEntries = new Gauge({
      name: 'svcmap_conntrack_entries',
      help: 'Entries in the tc connection tracking map (two per flow) after the last conntrack GC run.',
      registers: [this.registry],
    });
    this.conntrackGcDeleted = new Counter({
      name: 'svcmap_conntrack_gc_deleted_total',
      help: 'Connection tracking entries the conntrack GC removed (closed or idle flows).',
      registers: [this.registry],
    });
    this.datapathPackets = new Counter({
      name: 'svcmap_datapath_packets_total',
      help: 'Packets (tc) and calls (socket hooks) the datapath handled, by hook and by what became of them (reason): translated, passed, or each kind of drop. Read from the datapath at scrape time; every packet is counted once.',
      labelNames: ['hook', 'reason'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const r of read()) this.inc({ hook: r.hook, reason: r.reason }, Number(r.packets));
      },
    });
    this.backendConnections = new Gauge({
      name: 'svcmap_backend_connections',
      help: 'Live connections per backend as the datapath counts them for lc, sed and nq: sockets the socket LB connected (datapath="socket") and open tc flows (datapath="tc"). Only backends with a connection are listed. Read from the datapath at scrape time.',
      labelNames: ['family', 'backend', 'protocol', 'datapath'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const r of readConnections()) {
          const labels = { family: r.family, backend: r.backend, protocol: r.protocol };
          if (r.socket) this.set({ ...labels, datapath: 'socket' }, r.socket);
          if (r.tc) this.set({ ...labels, datapath: 'tc' }, r.tc);
        }
      },
    });
  }

  /** Where svcmap_datapath_packets_total comes from (the datapath's counters map). */
  readDatapathCountersWith(read: () => DpCounterRow[]): void {
    this.#readDatapath = read;
  }

  /** Where svcmap_backend_connections comes from (the connection count maps). */
  readBackendConnectionsWith(read: () => BackendConnectionsRow[]): void {
    this.#readConnections = read;
  }
}
