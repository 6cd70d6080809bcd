// The sync loop for the Kubernetes source: the informers feed an incremental
// model; a bounded-frequency runner turns its changes into partial syncs
// (one Service's frontends each), with a full sync first (only once every
// informer has listed, so nothing is pruned early), after a failure, while
// some frontend is deferred for lack of map space, and periodically.
import type { Frontend } from '../model/types.ts';
import type { KubernetesSource } from '../sources/kubernetes/source.ts';
import { BoundedFrequencyRunner, type RunReason } from '../sync/runner.ts';
import type { Syncer } from '../sync/syncer.ts';
import type { FrontendTarget } from '../sync/targets.ts';
import { toTarget } from './targets.ts';
import type { Logger } from './log.ts';
import type { AgentMetrics } from './metrics.ts';
import type { ProblemReporter } from './problems-log.ts';
import type { SyncStatus } from './sync-status.ts';

export interface LoopOptions {
  minIntervalMs: number;
  syncPeriodMs: number;
  retryMs?: number;
  /** After a successful sync: the Services whose frontends changed, with their frontends now; after a full sync (full = true), every Service. */
  onServices?: (changed: ReadonlyMap<string, Frontend[]>, full: boolean) => void;
}

export class KubernetesSyncLoop {
  readonly #source: KubernetesSource;
  readonly #syncer: Syncer;
  readonly #status: SyncStatus;
  readonly #metrics: AgentMetrics;
  readonly #problems: ProblemReporter;
  readonly #log: Logger;
  readonly #runner: BoundedFrequencyRunner;
  readonly #retryMs: number;
  readonly #onServices: LoopOptions['onServices'];
  #needFull = true;
  /** When the last full sync succeeded (ms, performance.now()). */
  #lastFullAt = performance.now();
  readonly #syncPeriodMs: number;
  #retryTimer: NodeJS.Timeout | undefined;
  /** Earliest unprogrammed last-change-trigger-time per Service. */
  readonly #triggers = new Map<string, number>();

  constructor(source: KubernetesSource, syncer: Syncer, status: SyncStatus, metrics: AgentMetrics, problems: ProblemReporter, log: Logger, opts: LoopOptions) {
    this.#source = source;
    this.#syncer = syncer;
    this.#status = status;
    this.#metrics = metrics;
    this.#problems = problems;
    this.#log = log;
    this.#retryMs = opts.retryMs ?? 1000;
    this.#onServices = opts.onServices;
    this.#syncPeriodMs = opts.syncPeriodMs;
    this.#runner = new BoundedFrequencyRunner((why) => this.#run(why), { minIntervalMs: opts.minIntervalMs, maxIntervalMs: opts.syncPeriodMs });
  }

  start(): void {
    this.#runner.start();
  }

  stop(): void {
    this.#runner.stop();
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
  }

  /** The source changed. */
  poke(): void {
    this.#status.pending();
    this.#runner.run();
  }

  trigger(serviceId: string, at: number): void {
    const have = this.#triggers.get(serviceId);
    if (have === undefined || at < have) this.#triggers.set(serviceId, at);
  }

  #run(why: RunReason): void {
    if (!this.#source.isSynced) return; // the first list is not in yet: prune nothing, change nothing
    const model = this.#source.model;
    // The runner's periodic wake-up comes only after a quiet syncPeriod; under
    // steady churn the age of the last full sync decides, as in kube-proxy.
    if (why === 'periodic' || performance.now() - this.#lastFullAt >= this.#syncPeriodMs) {
      this.#needFull = true;
      this.#syncer.reload(); // repair anything changed behind our back
      model.markAllDirty();
    }
    const changes = model.takeChanges();
    for (const [key, list] of changes.problems) this.#problems.reportObject(key, list);
    if (!this.#needFull && changes.services.size === 0) {
      this.#status.health.pendingSince = 0;
      this.#observeTriggers();
      return;
    }
    try {
      let report;
      if (this.#needFull) {
        const targets: FrontendTarget[] = [];
        for (const list of model.allFrontends().values()) for (const f of list) targets.push(toTarget(f));
        report = this.#syncer.sync(targets);
      } else {
        const byOwner = new Map<string, FrontendTarget[]>();
        for (const [svc, list] of changes.services) byOwner.set(svc, list.map((f: Frontend) => toTarget(f)));
        report = this.#syncer.syncOwners(byOwner);
      }
      this.#needFull = report.deferred.length > 0;
      if (report.full) this.#lastFullAt = performance.now();
      this.#status.succeeded(report, this.#syncer.capacity(), this.#syncer.state.frontends.size,
        { services: report.full ? model.serviceCount : changes.services.size, reason: why });
      this.#observeTriggers();
      this.#onServices?.(report.full ? model.allFrontends() : changes.services, report.full);
    } catch (err) {
      this.#needFull = true;
      this.#status.failed(err);
      this.#retryTimer = setTimeout(() => this.#runner.run(), this.#retryMs);
    }
  }

  #observeTriggers(): void {
    const now = Date.now();
    for (const at of this.#triggers.values()) {
      if (now >= at) this.#metrics.programmingLatency.observe((now - at) / 1000);
    }
    this.#triggers.clear();
  }
}
