// The sync engine's state holder: knows what the maps hold, turns each new
// desired state into a plan, applies it, and re-reads the maps after any
// failure so that its picture never drifts from the kernel's.
import { type Capacity, type Plan, planIsEmpty, planSync } from './plan.ts';
import { type MapWriter, applyPlan } from './apply.ts';
import { type MapState, entryCounts } from './state.ts';
import type { FrontendTarget } from './targets.ts';

export interface MapSource {
  /** Reads what the maps hold now. */
  readState(): MapState;
  capacity(): Capacity;
}

export interface SyncReport {
  /** Frontends added, changed or removed. */
  changed: number;
  /** Frontends left as they were because a map is full. */
  deferred: Plan['deferred'];
  ops: Record<'backendUpserts' | 'revNatUpserts' | 'slotUpserts' | 'masterUpserts' | 'masterDeletes' | 'slotDeletes' | 'revNatDeletes' | 'backendDeletes', number>;
  durationMs: number;
  entries: { services: number; backends: number; revNat: number };
}

export class Syncer {
  readonly #maps: MapSource & MapWriter;
  #state: MapState;

  constructor(maps: MapSource & MapWriter) {
    this.#maps = maps;
    this.#state = maps.readState();
  }

  get state(): MapState {
    return this.#state;
  }

  /** Re-reads the maps (after a failure, or for a periodic full resync). */
  reload(): void {
    this.#state = this.#maps.readState();
  }

  sync(targets: readonly FrontendTarget[]): SyncReport {
    const started = performance.now();
    let plan = planSync(this.#state, targets, this.#maps.capacity());
    if (plan.deferred.length > 0 && plan.masterDeletes.length > 0) {
      // Full maps: remove what is gone first, then retry the additions.
      const removalsOnly = planSync(this.#state, targets.filter((t) => this.#state.frontends.has(t.id)), this.#maps.capacity());
      this.#apply(removalsOnly);
      plan = planSync(this.#state, targets, this.#maps.capacity());
    }
    if (!planIsEmpty(plan)) this.#apply(plan);
    return {
      changed: plan.changed.length,
      deferred: plan.deferred,
      ops: {
        backendUpserts: plan.backendUpserts.length, revNatUpserts: plan.revNatUpserts.length,
        slotUpserts: plan.slotUpserts.length, masterUpserts: plan.masterUpserts.length,
        masterDeletes: plan.masterDeletes.length, slotDeletes: plan.slotDeletes.length,
        revNatDeletes: plan.revNatDeletes.length, backendDeletes: plan.backendDeletes.length,
      },
      durationMs: performance.now() - started,
      entries: entryCounts(this.#state),
    };
  }

  #apply(plan: Plan): void {
    try {
      applyPlan(plan, this.#maps);
      this.#state = plan.next;
    } catch (err) {
      this.reload();
      throw err;
    }
  }
}
