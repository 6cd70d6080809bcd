// kube-proxy's own series (its pkg/proxy/metrics, as of Kubernetes 1.34),
// exported beside svcmap's so that the dashboards and alerts written for
// kube-proxy read svcmap unchanged: the same names, types, buckets and
// labels (ip_family "IPv4"/"IPv6" where kube-proxy has it, one value per
// address family whose maps the agent runs), set at the same moments:
//   last_queued_timestamp: each time a change queues a sync (kube-proxy's
//     Sync()), and once at start (kube-proxy synthesizes one while its
//     informers sync);
//   last_timestamp: each time the maps are brought up to date, a sync that
//     found nothing to write included (kube-proxy's syncProxyRules() runs
//     and succeeds then too), so that last_queued - last_timestamp grows
//     only while a change waits: the usual "proxy stuck" alert;
//   sync durations: every attempt, failed ones too, per family (each family
//     has its own maps and its own write), full or partial;
//   endpoint/service changes: every EndpointSlice / Service event the
//     source delivers, before anything decides whether it changes the maps.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export type IpFamily = 'IPv4' | 'IPv6';

/** metrics.ExponentialBuckets(0.001, 2, 15): 1 ms to 16.384 s. */
const SYNC_BUCKETS = Array.from({ length: 15 }, (_, i) => 0.001 * 2 ** i);

/** kube-proxy's MergeBuckets(0; 0.25, 0.5; 1..59 by 1; 60..115 by 5; 120..300 by 30). */
const PROGRAMMING_BUCKETS = [
  0,
  0.25,
  0.5,
  ...Array.from({ length: 59 }, (_, i) => 1 + i),
  ...Array.from({ length: 12 }, (_, i) => 60 + 5 * i),
  ...Array.from({ length: 7 }, (_, i) => 120 + 30 * i),
];

export class KubeProxyMetrics {
  readonly #families: readonly IpFamily[];
  readonly #syncDuration: Histogram<'ip_family'>;
  readonly #fullDuration: Histogram<'ip_family'>;
  readonly #partialDuration: Histogram<'ip_family'>;
  readonly #lastTimestamp: Gauge<'ip_family'>;
  readonly #lastQueued: Gauge<'ip_family'>;
  readonly #programming: Histogram<'ip_family'>;
  readonly #endpointChanges: Counter;
  readonly #serviceChanges: Counter;

  /** families: the address families whose maps this agent syncs. */
  constructor(registry: Registry, families: readonly IpFamily[]) {
    this.#families = families;
    const registers = [registry];
    const histogram = (name: string, help: string, buckets: number[]) =>
      new Histogram({ name, help, labelNames: ['ip_family'], buckets, registers });
    this.#syncDuration = histogram(
      'kubeproxy_sync_proxy_rules_duration_seconds',
      "kube-proxy's name: time to write one sync into one address family's maps (full and partial syncs, failed ones included).",
      SYNC_BUCKETS,
    );
    this.#fullDuration = histogram(
      'kubeproxy_sync_full_proxy_rules_duration_seconds',
      "kube-proxy's name: kubeproxy_sync_proxy_rules_duration_seconds of full syncs (every frontend written).",
      SYNC_BUCKETS,
    );
    this.#partialDuration = histogram(
      'kubeproxy_sync_partial_proxy_rules_duration_seconds',
      "kube-proxy's name: kubeproxy_sync_proxy_rules_duration_seconds of partial syncs (the changed Services' frontends).",
      SYNC_BUCKETS,
    );
    this.#programming = histogram(
      'kubeproxy_network_programming_duration_seconds',
      "kube-proxy's name: from an EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time to the map write that reflects it (ip_family: the slice's addressType).",
      PROGRAMMING_BUCKETS,
    );
    this.#lastTimestamp = new Gauge({
      name: 'kubeproxy_sync_proxy_rules_last_timestamp_seconds',
      help: "kube-proxy's name: when the maps were last brought up to date (unix time), also by a sync that found nothing to write.",
      labelNames: ['ip_family'],
      registers,
    });
    this.#lastQueued = new Gauge({
      name: 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds',
      help: "kube-proxy's name: when a change last queued a sync (unix time). Far above kubeproxy_sync_proxy_rules_last_timestamp_seconds: syncs fail or are stuck.",
      labelNames: ['ip_family'],
      registers,
    });
    this.#endpointChanges = new Counter({
      name: 'kubeproxy_sync_proxy_rules_endpoint_changes_total',
      help: "kube-proxy's name: EndpointSlice events received (added, updated, deleted), whether or not they changed the maps.",
      registers,
    });
    this.#serviceChanges = new Counter({
      name: 'kubeproxy_sync_proxy_rules_service_changes_total',
      help: "kube-proxy's name: Service events received (added, updated, deleted), whether or not they changed the maps.",
      registers,
    });
  }

  /** A change queued a sync (and, at start, the synthesized first one). */
  queued(now = Date.now()): void {
    for (const f of this.#families) this.#lastQueued.set({ ip_family: f }, now / 1000);
  }

  /** The maps of every family reflect every change taken in. */
  upToDate(now = Date.now()): void {
    for (const f of this.#families) this.#lastTimestamp.set({ ip_family: f }, now / 1000);
  }

  /** One family's part of a sync attempt took `ms`, whether or not it succeeded. */
  synced(family: IpFamily, full: boolean, ms: number): void {
    const labels = { ip_family: family };
    this.#syncDuration.observe(labels, ms / 1000);
    (full ? this.#fullDuration : this.#partialDuration).observe(labels, ms / 1000);
  }

  programmed(family: IpFamily, seconds: number): void {
    this.#programming.observe({ ip_family: family }, seconds);
  }

  endpointSliceEvent(): void {
    this.#endpointChanges.inc();
  }

  serviceEvent(): void {
    this.#serviceChanges.inc();
  }
}
