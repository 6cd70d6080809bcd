// What both sync loops share: recording each sync's outcome in metrics,
// logs and the health state.
import { ApplyError } from '../../sync/apply.ts';
import type { Capacity } from '../../sync/plan.ts';
import type { SyncKind } from '../../sync/retry.ts';
import type { SyncReport } from '../../sync/syncer.ts';
import type { HealthState } from '../http/http-servers.ts';
import type { Logger } from '../log.ts';
import type { AgentMetrics } from '../http/metrics.ts';
import {
  SVCMAP_MAP_BACKENDS,
  SVCMAP_MAP_BACKENDS6,
  SVCMAP_MAP_REVNAT,
  SVCMAP_MAP_REVNAT6,
  SVCMAP_MAP_SERVICES,
  SVCMAP_MAP_SERVICES6,
} from '../../maps/constants.ts';

/** A failed sync and what happens next. */
export interface SyncFailure {
  kind: SyncKind;
  /** Failed syncs in a row, this one included. */
  failures: number;
  /** When the retry runs (its backoff). */
  retryInMs: number;
  /** What the retry will be: the same partial sync, or a full resync. */
  next: SyncKind;
}

export class SyncStatus {
  readonly health: HealthState = {
    ready: false,
    lastSyncAt: 0,
    lastUpdatedAt: Date.now(),
    consecutiveFailures: 0,
    pendingSince: 0,
    nodeEligible: true,
  };
  readonly #metrics: AgentMetrics;
  readonly #log: Logger;
  readonly #afterFullSync: (() => void) | undefined;

  /** afterFullSync: called after each successful full sync is recorded (the heap reclaimer). */
  constructor(metrics: AgentMetrics, log: Logger, opts: { afterFullSync?: () => void } = {}) {
    this.#metrics = metrics;
    this.#log = log;
    this.#afterFullSync = opts.afterFullSync;
  }

  /** A change arrived that is not in the maps yet. */
  pending(): void {
    if (!this.health.pendingSince) this.health.pendingSince = Date.now();
  }

  /** The maps hold every change taken in: after a sync, or when the changes needed no write. */
  upToDate(): void {
    this.health.pendingSince = 0;
    this.health.lastUpdatedAt = Date.now();
    this.#metrics.kubeProxy.upToDate(this.health.lastUpdatedAt);
  }

  succeeded(r: SyncReport, capacity: Capacity, frontends: number, extra: Record<string, unknown> = {}): void {
    const m = this.#metrics;
    m.syncDuration.observe({ kind: r.full ? 'full' : 'partial' }, r.durationMs / 1000);
    m.mapEntries.set({ map: SVCMAP_MAP_SERVICES }, r.entries.services);
    m.mapEntries.set({ map: SVCMAP_MAP_BACKENDS }, r.entries.backends);
    m.mapEntries.set({ map: SVCMAP_MAP_REVNAT }, r.entries.revNat);
    m.mapCapacity.set({ map: SVCMAP_MAP_SERVICES }, capacity.services);
    m.mapCapacity.set({ map: SVCMAP_MAP_BACKENDS }, capacity.backends);
    m.mapCapacity.set({ map: SVCMAP_MAP_REVNAT }, capacity.revNat);
    if (r.v6) {
      m.mapEntries.set({ map: SVCMAP_MAP_SERVICES6 }, r.v6.entries.services);
      m.mapEntries.set({ map: SVCMAP_MAP_BACKENDS6 }, r.v6.entries.backends);
      m.mapEntries.set({ map: SVCMAP_MAP_REVNAT6 }, r.v6.entries.revNat);
      m.mapCapacity.set({ map: SVCMAP_MAP_SERVICES6 }, r.v6.capacity.services);
      m.mapCapacity.set({ map: SVCMAP_MAP_BACKENDS6 }, r.v6.capacity.backends);
      m.mapCapacity.set({ map: SVCMAP_MAP_REVNAT6 }, r.v6.capacity.revNat);
    }
    m.frontends.set(frontends);
    m.lastSync.set(Date.now() / 1000);
    for (const d of r.deferred) {
      m.syncErrors.inc({ kind: 'map_full' });
      this.#log.error(
        { frontend: d.id, service: d.label },
        `not programmed: ${d.reason}; raise the map size (--max-services / --max-backends)`,
      );
    }
    this.health.lastSyncAt = Date.now();
    this.health.consecutiveFailures = 0;
    this.upToDate();
    if (r.full && !this.health.ready) {
      this.health.ready = true;
      m.ready.set(1);
    }
    const level = r.changed > 0 || r.full ? 'info' : 'debug';
    this.#log[level](
      {
        full: r.full,
        changed: r.changed,
        ops: r.ops,
        entries: r.entries,
        durationMs: Number(r.durationMs.toFixed(3)),
        frontends,
        ...extra,
      },
      'sync done',
    );
    if (r.full) this.#afterFullSync?.();
  }

  failed(err: unknown, f: SyncFailure): void {
    this.#metrics.syncErrors.inc({ kind: 'write_failed' });
    this.#metrics.syncFailures.inc({ kind: f.kind });
    this.health.consecutiveFailures = f.failures;
    // Every phase before `phase` was written whole: readers see a consistent map, partly updated.
    const phase = err instanceof ApplyError ? err.phase : undefined;
    this.#log.error(
      { err, kind: f.kind, phase, failures: f.failures, retryInMs: f.retryInMs, next: f.next },
      `${f.kind} sync failed; retrying ${f.next === 'full' ? 'as a full resync' : 'the same Services'} in ${f.retryInMs / 1000} s`,
    );
  }
}
