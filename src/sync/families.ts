// One Syncer per address family, behind the surface of one: IPv4 frontends
// go to the IPv4 maps, IPv6 ones to the IPv6 maps (svcmap_svc6, ...), each
// family with its own state, ids and the same ordering rules (it is the same
// engine). Callers keep handing over one list of targets.
import type { Capacity } from './plan.ts';
import type { Syncer, SyncReport } from './syncer.ts';
import type { FrontendTarget } from './targets.ts';
import { type Family, familyOf } from '../util/family.ts';

/** What the agent's loops need of a sync engine: a Syncer, or one per family. */
export interface SyncEngine {
  sync(targets: readonly FrontendTarget[]): SyncReport;
  syncOwners(changes: ReadonlyMap<string, readonly FrontendTarget[]>): SyncReport;
  reload(): void;
  capacity(): Capacity;
  /** The zone ids the backend maps hold (both families'): which zone names are in use. */
  zonesInUse(): Set<number>;
  readonly state: { frontends: { size: number }; backends: { size: number } };
}

/** The family of a target, by its frontend address. */
export function targetFamily(t: FrontendTarget): Family {
  return familyOf(t.key.addr);
}

/** Told how long each family's part of a sync attempt took, failed attempts too (an attempt stops at the first family that fails). */
export type FamilyTimer = (family: Family, full: boolean, ms: number) => void;

export class FamilySyncers implements SyncEngine {
  readonly v4: Syncer;
  /** Undefined when the datapath has no IPv6 maps (pins older than them): IPv6 targets are then left out. */
  readonly v6: Syncer | undefined;
  readonly #timed: FamilyTimer | undefined;

  constructor(v4: Syncer, v6: Syncer | undefined, timed?: FamilyTimer) {
    this.v4 = v4;
    this.v6 = v6;
    this.#timed = timed;
  }

  /** fn, its time told to the timer whether it returns or throws. */
  #time<T>(family: Family, full: boolean, fn: () => T): T {
    const started = performance.now();
    try {
      return fn();
    } finally {
      this.#timed?.(family, full, performance.now() - started);
    }
  }

  get state(): SyncEngine['state'] {
    const [a, b] = [this.v4.state, this.v6?.state];
    return {
      frontends: { size: a.frontends.size + (b?.frontends.size ?? 0) },
      backends: { size: a.backends.size + (b?.backends.size ?? 0) },
    };
  }

  /** The IPv4 maps' capacity (each map's metric is its own; the IPv6 maps' is in SyncReport.v6). */
  capacity(): Capacity {
    return this.v4.capacity();
  }

  zonesInUse(): Set<number> {
    const out = this.v4.zonesInUse();
    for (const z of this.v6?.zonesInUse() ?? []) out.add(z);
    return out;
  }

  reload(): void {
    this.v4.reload();
    this.v6?.reload();
  }

  sync(targets: readonly FrontendTarget[]): SyncReport {
    const [t4, t6] = this.#split(targets);
    const r4 = this.#time(4, true, () => this.v4.sync(t4));
    const v6 = this.v6;
    return v6
      ? merge(
          r4,
          this.#time(6, true, () => v6.sync(t6)),
          v6.capacity(),
        )
      : r4;
  }

  syncOwners(changes: ReadonlyMap<string, readonly FrontendTarget[]>): SyncReport {
    // Every owner goes to both families: an empty list removes what it had there.
    const c4 = new Map<string, FrontendTarget[]>();
    const c6 = new Map<string, FrontendTarget[]>();
    for (const [owner, list] of changes) {
      const [t4, t6] = this.#split(list);
      c4.set(owner, t4);
      c6.set(owner, t6);
    }
    const r4 = this.#time(4, false, () => this.v4.syncOwners(c4));
    const v6 = this.v6;
    return v6
      ? merge(
          r4,
          this.#time(6, false, () => v6.syncOwners(c6)),
          v6.capacity(),
        )
      : r4;
  }

  #split(targets: readonly FrontendTarget[]): [FrontendTarget[], FrontendTarget[]] {
    const t4: FrontendTarget[] = [];
    const t6: FrontendTarget[] = [];
    for (const t of targets) (targetFamily(t) === 4 ? t4 : t6).push(t);
    return [t4, t6];
  }
}

/** Two families' reports as one: changes and operations add up; entries stay per family. */
function merge(a: SyncReport, b: SyncReport, capacity6: Capacity): SyncReport {
  const ops = { ...a.ops };
  for (const k of Object.keys(ops) as Array<keyof SyncReport['ops']>) ops[k] += b.ops[k];
  return {
    full: a.full,
    changed: a.changed + b.changed,
    deferred: [...a.deferred, ...b.deferred],
    ops,
    durationMs: a.durationMs + b.durationMs,
    entries: a.entries,
    v6: { entries: b.entries, capacity: capacity6 },
  };
}
