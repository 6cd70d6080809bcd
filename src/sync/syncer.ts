// The sync engine's state holder: knows what the maps hold, turns desired
// frontends into a plan, applies it, and commits it to its picture of the
// maps. After a failure it reads back what the failed plan touched (or, for
// a big plan, every map), so that picture never drifts from the kernel's and
// the failed sync can be retried on its own, at the cost of what it covers.
import { type Capacity, type Plan, type PlanScope, commitPlan, planIsEmpty, planSync } from './plan.ts';
import { type MapWriter, applyPlan } from './apply.ts';
import { type EntryReader, readBack, readBackCost } from './read-back.ts';
import type { EntryCounts, MapState } from './state.ts';
import type { FrontendTarget } from './targets.ts';
import { type RemovedBackend, removedBackends } from './removed.ts';
import { OneToMany } from '../util/one-to-many.ts';

export interface MapSource extends EntryReader {
  /** Reads what the maps hold now. */
  readState(): MapState;
  capacity(): Capacity;
}

/**
 * Reading back costs a syscall per entry, a re-read a few per thousand
 * entries plus decoding them all: past this share of the maps' entries (and
 * this many lookups) a failed plan is followed by a re-read instead.
 */
const READ_BACK_SHARE = 1 / 8;
const READ_BACK_MIN = 1000;

export interface SyncReport {
  full: boolean;
  /** Frontends added, changed or removed. */
  changed: number;
  /** Frontends left as they were because a map is full. */
  deferred: Plan['deferred'];
  ops: Record<
    | 'backendUpserts'
    | 'revNatUpserts'
    | 'srcRangeUpserts'
    | 'slotUpserts'
    | 'masterUpserts'
    | 'masterDeletes'
    | 'slotDeletes'
    | 'revNatDeletes'
    | 'srcRangeDeletes'
    | 'backendDeletes',
    number
  >;
  durationMs: number;
  entries: EntryCounts;
  /** With one engine per family (families.ts): `entries` are the IPv4 maps', these the IPv6 maps'. */
  v6?: { entries: EntryCounts; capacity: Capacity };
}

export class Syncer {
  readonly #maps: MapSource & MapWriter;
  #state: MapState;
  /** Frontend ids of each owner (a Service), as of the last sync that covered it, and those a failed one may have written. */
  #owned = new OneToMany();
  /** Ids failed plans wrote or meant to delete, which the maps may still hold unused (see Suspects). */
  #suspects = { backends: new Set<number>(), revNat: new Set<number>() };
  /** Reading the maps back after a failure failed too: the next sync starts with a re-read. */
  #stale = false;

  /** Told, after each applied plan, which backends left which frontends (socket termination). */
  readonly #onRemoved: ((removed: RemovedBackend[]) => void) | undefined;

  constructor(maps: MapSource & MapWriter, opts: { onBackendsRemoved?: (removed: RemovedBackend[]) => void } = {}) {
    this.#maps = maps;
    this.#state = maps.readState();
    this.#onRemoved = opts.onBackendsRemoved;
  }

  get state(): MapState {
    return this.#state;
  }

  capacity(): Capacity {
    return this.#maps.capacity();
  }

  /** The zone ids (svcmap_zones) the backends map holds. */
  zonesInUse(): Set<number> {
    return this.#state.backends.zoneIds();
  }

  /** Re-reads the maps (a full resync: periodic, or after repeated failures). */
  reload(): void {
    this.#state = this.#maps.readState();
    this.#stale = false;
  }

  /** Full sync: the targets are every frontend there should be; everything else is removed. */
  sync(targets: readonly FrontendTarget[]): SyncReport {
    let report: SyncReport;
    try {
      report = this.#run(targets, { full: true });
    } catch (err) {
      for (const t of targets) this.#own(t);
      throw err;
    }
    this.#owned = new OneToMany();
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
      for (const id of this.#owned.values(owner)) removable.add(id);
      targets.push(...list);
    }
    // A frontend moving from one owner to another is written by its new owner, not removed.
    let report: SyncReport;
    try {
      report = this.#run(targets, { full: false, removable, suspects: this.#suspects });
    } catch (err) {
      // The failed plan may have written these frontends: whatever the owner
      // wants by its retry, they are its to remove.
      for (const list of changes.values()) for (const t of list) this.#own(t);
      throw err;
    }
    for (const [owner, list] of changes) {
      this.#owned.clear(owner);
      for (const t of list) this.#own(t);
    }
    return report;
  }

  #own(t: FrontendTarget): void {
    this.#owned.add(t.owner, t.id);
  }

  #run(targets: readonly FrontendTarget[], scope: PlanScope): SyncReport {
    const started = performance.now();
    if (this.#stale) this.reload();
    let plan = planSync(this.#state, targets, this.#maps.capacity(), scope);
    if (plan.deferred.length > 0 && plan.masterDeletes.length > 0) {
      // Full maps: remove what is gone first, then retry the additions.
      const keep = targets.filter((t) => this.#state.frontends.has(t.id));
      this.#apply(planSync(this.#state, keep, this.#maps.capacity(), scope));
      plan = planSync(this.#state, targets, this.#maps.capacity(), scope);
    }
    if (!planIsEmpty(plan)) this.#apply(plan);
    // Every suspect was either used or removed by this plan (a full one removes every orphan).
    this.#suspects = { backends: new Set(), revNat: new Set() };
    return {
      full: scope.full,
      changed: plan.changed.length,
      deferred: plan.deferred,
      ops: {
        backendUpserts: plan.backendUpserts.length,
        revNatUpserts: plan.revNatUpserts.length,
        srcRangeUpserts: plan.srcRangeUpserts.length,
        slotUpserts: plan.slotUpserts.length,
        masterUpserts: plan.masterUpserts.length,
        masterDeletes: plan.masterDeletes.length,
        slotDeletes: plan.slotDeletes.length,
        revNatDeletes: plan.revNatDeletes.length,
        srcRangeDeletes: plan.srcRangeDeletes.length,
        backendDeletes: plan.backendDeletes.length,
      },
      durationMs: performance.now() - started,
      entries: { ...this.#state.counts },
    };
  }

  #apply(plan: Plan): void {
    const removed = this.#onRemoved ? removedBackends(this.#state, plan) : [];
    try {
      applyPlan(plan, this.#maps);
      commitPlan(this.#state, plan);
    } catch (err) {
      this.#recover(plan);
      throw err;
    }
    if (removed.length) this.#onRemoved!(removed);
  }

  /** After a plan failed part way: the tracked state is made true again, and what the plan may have left unused is remembered. */
  #recover(plan: Plan): void {
    // Backends whose references the plan moved may be left unreferenced
    // (referenced by slots that stayed strays), as well as those it wrote.
    for (const [id] of plan.backendUpserts) this.#suspects.backends.add(id);
    for (const id of plan.delta.refDelta.keys()) this.#suspects.backends.add(id);
    for (const id of plan.backendDeletes) this.#suspects.backends.add(id);
    for (const [id] of plan.revNatUpserts) this.#suspects.revNat.add(id);
    for (const id of plan.revNatDeletes) this.#suspects.revNat.add(id);
    try {
      const c = this.#state.counts;
      const entries = c.services + c.backends + c.revNat + c.srcRanges;
      if (readBackCost(this.#state, plan) <= Math.max(READ_BACK_MIN, entries * READ_BACK_SHARE)) readBack(this.#state, plan, this.#maps);
      else this.reload();
    } catch {
      // The maps cannot be read either: nothing is known until a re-read succeeds.
      this.#stale = true;
    }
  }
}
