// The sync loop of both sources: the Kubernetes informers, or the manifest
// files, feed an incremental model; a bounded-frequency runner turns its
// changes into partial syncs (one Service's frontends each), with a full sync
// first (only once the source has read everything - every informer listed,
// every file read - so nothing is pruned early), while some frontend is
// deferred for lack of map space, and periodically. A failed sync is retried
// by the runner with backoff: a partial one as a partial sync of the same
// Services (plus whatever changed meanwhile), and only after repeated
// failures as a full resync (src/sync/retry.ts).
import type { Frontend } from '../../model/types.ts';
import type { IncrementalModel } from '../../model/incremental.ts';
import { RetryState, type SyncKind } from '../../sync/retry.ts';
import { type Backoff, BoundedFrequencyRunner, type RunReason, type Timers } from '../../sync/runner.ts';
import type { SyncReport } from '../../sync/syncer.ts';
import type { SyncEngine } from '../../sync/families.ts';
import type { ZoneNames } from '../../sync/zones.ts';
import type { FrontendTarget } from '../../sync/targets.ts';
import { TriggerTimes } from '../../sync/trigger-times.ts';
import type { LbAlgorithmName, LbMode } from '../../maps/constants.ts';
import { NODE_DEFAULTS, type NodeDefaults, toTarget } from './targets.ts';
import type { Component } from '../components.ts';
import type { Logger } from '../log.ts';
import type { AgentMetrics } from '../http/metrics.ts';
import type { ProblemReporter } from './problems-log.ts';
import type { SyncStatus } from './sync-status.ts';
import type { Family } from '../../util/family.ts';

export interface LoopOptions {
  minIntervalMs: number;
  syncPeriodMs: number;
  /** Retry delays after a failed sync (default 1 s doubling to 30 s). */
  backoff?: Backoff;
  /** Consecutive failed syncs after which the retry is a full resync (default 3). */
  escalateAfter?: number;
  /** The runner's timers and clock, also for the age of the last full sync; tests pass fake ones. */
  timers?: Timers;
  /** When the agent started (ms since the epoch): trigger times before it are not measured. Default: now. */
  startedAt?: number;
  /** The algorithm of frontends whose Service names none (--lb-algorithm; default random). */
  lbAlgorithm?: LbAlgorithmName;
  /** How frontends from outside whose Service names none reach remote backends (--lb-mode; default snat). */
  lbMode?: LbMode;
  /** The names of the backends' zones (svcmap_zones); without it every backend's zone id is 0. */
  zones?: ZoneNames;
  /** After a successful sync: the Services whose frontends changed, with their frontends now; after a full sync (full = true), every Service. */
  onServices?: (changed: ReadonlyMap<string, Frontend[]>, full: boolean) => void;
}

/** What the loop syncs from: the Kubernetes source, or the file source. */
export interface ModelSource {
  /** Everything has been read once: until then nothing is synced (and nothing pruned). */
  readonly isSynced: boolean;
  readonly model: IncrementalModel;
}

/** Logged (debug) when a change reached the model but left every frontend as programmed. */
export const NOTHING_TO_SYNC = 'nothing to sync: every frontend is as programmed';

export class SyncLoop implements Component {
  readonly name = 'sync loop';
  readonly #source: ModelSource;
  readonly #syncer: SyncEngine;
  readonly #status: SyncStatus;
  readonly #metrics: AgentMetrics;
  readonly #problems: ProblemReporter;
  readonly #log: Logger;
  readonly #runner: BoundedFrequencyRunner;
  readonly #now: () => number;
  readonly #onServices: LoopOptions['onServices'];
  readonly #retry: RetryState;
  readonly #triggers: TriggerTimes;
  #needFull = true;
  /** When the last full sync succeeded (the runner's clock). */
  #lastFullAt: number;
  readonly #syncPeriodMs: number;
  readonly #defaults: NodeDefaults;
  readonly #zones: ZoneNames | undefined;

  constructor(
    source: ModelSource,
    syncer: SyncEngine,
    status: SyncStatus,
    metrics: AgentMetrics,
    problems: ProblemReporter,
    log: Logger,
    opts: LoopOptions,
  ) {
    this.#source = source;
    this.#syncer = syncer;
    this.#status = status;
    this.#metrics = metrics;
    this.#problems = problems;
    this.#log = log;
    this.#onServices = opts.onServices;
    this.#syncPeriodMs = opts.syncPeriodMs;
    this.#defaults = { algorithm: opts.lbAlgorithm ?? NODE_DEFAULTS.algorithm, lbMode: opts.lbMode ?? NODE_DEFAULTS.lbMode };
    this.#zones = opts.zones;
    this.#retry = new RetryState(opts.escalateAfter);
    this.#triggers = new TriggerTimes(opts.startedAt ?? Date.now());
    const timers = opts.timers;
    this.#now = timers ? () => timers.now() : () => performance.now();
    this.#lastFullAt = this.#now();
    this.#runner = new BoundedFrequencyRunner((why) => this.#run(why), {
      minIntervalMs: opts.minIntervalMs,
      maxIntervalMs: opts.syncPeriodMs,
      ...(opts.backoff ? { backoff: opts.backoff } : {}),
      ...(timers ? { timers } : {}),
    });
  }

  start(): void {
    // kube-proxy's too: a queued change while the source lists, so that
    // last_queued - last_timestamp reads "waiting" until the first sync.
    this.#metrics.kubeProxy.queued();
    this.#runner.start();
  }

  stop(): void {
    this.#runner.stop();
  }

  /**
   * The source changed. As with kube-proxy, only once it has read everything
   * does a change count as waiting (for /healthz and last_queued): until then
   * nothing is synced on purpose.
   */
  poke(): void {
    if (this.#source.isSynced) {
      this.#status.pending();
      this.#metrics.kubeProxy.queued();
    }
    this.#runner.run();
  }

  /** An EndpointSlice of this Service (of this address family) arrived carrying this last-change-trigger-time (ms since the epoch). */
  trigger(serviceId: string, at: number, family: Family = 4): void {
    this.#triggers.arrived(serviceId, at, family);
  }

  #run(why: RunReason): void {
    if (!this.#source.isSynced) return; // the first list is not in yet: prune nothing, change nothing
    const model = this.#source.model;
    // The runner's periodic wake-up comes only after a quiet syncPeriod; under
    // steady churn the age of the last full sync decides, as in kube-proxy.
    const periodic = why === 'periodic' || this.#now() - this.#lastFullAt >= this.#syncPeriodMs;
    if (periodic) model.markAllDirty();
    const full = this.#needFull || periodic || this.#retry.full;
    // A full resync re-reads the maps: periodically, to repair anything changed
    // behind our back, and after failures, to start over from what is there.
    const reload = periodic || (full && this.#retry.failures > 0);
    const changes = model.takeChanges();
    for (const [key, list] of changes.problems) this.#problems.reportObject(key, list);
    this.#triggers.taken((svc) => changes.services.has(svc));
    if (!full && changes.services.size === 0 && this.#retry.owners.size === 0) {
      this.#status.upToDate();
      // Debug: under Kubernetes churn most such changes are status-only.
      if (why === 'change') this.#log.debug(NOTHING_TO_SYNC);
      return;
    }
    const work = full ? changes.services : this.#partialWork(changes.services);
    let report: SyncReport;
    const failures = this.#retry.failures;
    try {
      if (reload) this.#syncer.reload();
      const zones = this.#zones;
      const zoneId = zones ? (z: string | undefined) => zones.id(z) : undefined;
      if (full) {
        const targets: FrontendTarget[] = [];
        for (const list of model.allFrontends().values()) for (const f of list) targets.push(toTarget(f, this.#defaults, zoneId));
        zones?.publish(); // a zone's name before the backends that name it
        report = this.#syncer.sync(targets);
        // After: names no backend holds any more (what the maps hold, deferred frontends' old entries included).
        zones?.prune(this.#syncer.zonesInUse());
      } else {
        const byOwner = new Map<string, FrontendTarget[]>();
        for (const [svc, list] of work)
          byOwner.set(
            svc,
            list.map((f: Frontend) => toTarget(f, this.#defaults, zoneId)),
          );
        zones?.publish();
        report = this.#syncer.syncOwners(byOwner);
      }
    } catch (err) {
      this.#failed(err, full ? 'full' : 'partial', work.keys());
      return;
    }
    this.#retry.succeeded();
    if (failures > 0)
      this.#log.info(
        { failures, full: report.full, services: report.full ? model.serviceCount : work.size },
        'sync succeeded after failed attempts',
      );
    this.#needFull = report.deferred.length > 0;
    if (report.full) this.#lastFullAt = this.#now();
    this.#status.succeeded(report, this.#syncer.capacity(), this.#syncer.state.frontends.size, {
      services: report.full ? model.serviceCount : work.size,
      reason: why,
    });
    const deferred = new Set(report.deferred.map((d) => d.owner));
    for (const s of this.#triggers.written(Date.now(), deferred)) {
      this.#metrics.programmingLatency.observe(s.seconds);
      this.#metrics.kubeProxy.programmed(s.family === 6 ? 'IPv6' : 'IPv4', s.seconds);
    }
    this.#onServices?.(report.full ? model.allFrontends() : work, report.full);
  }

  /** What a partial sync writes, by Service: the model's changes, and the Services of failed partial syncs, as they are now. */
  #partialWork(changed: ReadonlyMap<string, Frontend[]>): Map<string, Frontend[]> {
    const work = new Map(changed);
    if (this.#retry.owners.size === 0) return work;
    const current = this.#source.model.allFrontends();
    for (const svc of this.#retry.owners) if (!work.has(svc)) work.set(svc, current.get(svc) ?? []);
    return work;
  }

  /** A sync failed: the runner retries it after the backoff, as the same partial sync or, after repeated failures, as a full resync. */
  #failed(err: unknown, kind: SyncKind, services: Iterable<string>): void {
    this.#retry.failed(kind, kind === 'partial' ? services : []);
    const retryInMs = this.#runner.retryAfter();
    this.#status.failed(err, { kind, failures: this.#retry.failures, retryInMs, next: this.#retry.next });
  }
}
