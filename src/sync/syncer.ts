// The sync engine's state holder: knows what the maps hold, turns desired
// frontends into a plan, applies it, and commits it to its picture of the
// maps; after any failure it re-reads the maps, so that picture never drifts
// from the kernel's.
import { type Capacity, type Plan, type PlanScope, commitPlan, planIsEmpty, planSync } from './plan.ts';
import { type MapWriter, applyPlan } from './apply.ts';
import type { EntryCounts, MapState } from './state.ts';
import type { FrontendTarget } from './targets.ts';

export interface MapSource {
  /** Reads what the maps hold now. */
  readState(): MapState;
  capacity(): Capacity;
}

export interface SyncReport {
  full: boolean;
  /** Frontends added, changed or removed. */
  changed: number;
  /** Frontends left as they were because a map is full. */
  deferred: Plan['deferred'];
  ops: Record<'backendUpserts' | 'revNatUpserts' | 'srcRangeUpserts' | 'slotUpserts' | 'masterUpserts' | 'masterDeletes' | 'slotDeletes' | 'revNatDeletes' | 'srcRangeDeletes' | 'backendDeletes', number>;
  durationMs: number;
  entries: EntryCounts;
}

export class Syncer {
  readonly #maps: MapSource & MapWriter;
  #state: MapState;
  /** Frontend ids of each owner (a Service), as of the last sync that covered it. */
  #owned = new Map<string, Set<string>>();

  constructor(maps: MapSource & MapWriter) {
    this.#maps = maps;
    this.#state = maps.readState();
  }

  get state(): MapState {
    return this.#state;
  }

  capacity(): Capacity {
    return this.#maps.capacity();
  }

  /** Re-reads the maps (after a failure, or for a periodic full resync). */
  reload(): void {
    this.#state = this.#maps.readState();
  }

  /** Full sync: the targets are every frontend there should be; everything else is removed. */
  sync(targets: readonly FrontendTarget[]): SyncReport {
    const report = this.#run(targets, { full: true });
    this.#owned = new Map();
    for (const t of targets) this.#own(t);
    return report;
  }

  /**
   * Partial sync: the frontends of these owners (Services) are replaced by the
   * given ones (an empty list removes the owner's frontends); every other
   * frontend is left alone. Costs what changed, not what exists.
   */
  syncOwners(changes: ReadonlyMap<string, readonly FrontendTarget[]>): SyncReport {
    const targets: FrontendTarget[] = [];
    const removable = new Set<string>();
    for (const [owner, list] of changes) {
      for (const id of this.#owned.get(owner) ?? []) removable.add(id);
      targets.push(...list);
    }
    // A frontend moving from one owner to another is written by its new owner, not removed.
    const report = this.#run(targets, { full: false, removable });
    for (const [owner, list] of changes) {
      this.#owned.delete(owner);
      for (const t of list) this.#own(t);
    }
    return report;
  }

  #own(t: FrontendTarget): void {
    let set = this.#owned.get(t.owner);
    if (!set) this.#owned.set(t.owner, (set = new Set()));
    set.add(t.id);
  }

  #run(targets: readonly FrontendTarget[], scope: PlanScope): SyncReport {
    const started = performance.now();
    let plan = planSync(this.#state, targets, this.#maps.capacity(), scope);
    if (plan.deferred.length > 0 && plan.masterDeletes.length > 0) {
      // Full maps: remove what is gone first, then retry the additions.
      const keep = targets.filter((t) => this.#state.frontends.has(t.id));
      this.#apply(planSync(this.#state, keep, this.#maps.capacity(), scope));
      plan = planSync(this.#state, targets, this.#maps.capacity(), scope);
    }
    if (!planIsEmpty(plan)) this.#apply(plan);
    return {
      full: scope.full,
      changed: plan.changed.length,
      deferred: plan.deferred,
      ops: {
        backendUpserts: plan.backendUpserts.length, revNatUpserts: plan.revNatUpserts.length, srcRangeUpserts: plan.srcRangeUpserts.length,
        slotUpserts: plan.slotUpserts.length, masterUpserts: plan.masterUpserts.length,
        masterDeletes: plan.masterDeletes.length, slotDeletes: plan.slotDeletes.length,
        revNatDeletes: plan.revNatDeletes.length, srcRangeDeletes: plan.srcRangeDeletes.length, backendDeletes: plan.backendDeletes.length,
      },
      durationMs: performance.now() - started,
      entries: { ...this.#state.counts },
    };
  }

  #apply(plan: Plan): void {
    try {
      applyPlan(plan, this.#maps);
      commitPlan(this.#state, plan);
    } catch (err) {
      this.reload();
      throw err;
    }
  }
}
