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

/** One family's engine: the Syncer over that family's maps. */
export interface FamilySyncer {
  readonly family: Family;
  readonly syncer: Syncer;
}

export class FamilySyncers implements SyncEngine {
  /** IPv4's first; a family without maps (IPv6 in pins older than them) has none, and its targets are left out. */
  readonly #engines: readonly FamilySyncer[];
  readonly #timed: FamilyTimer | undefined;

  constructor(engines: readonly FamilySyncer[], timed?: FamilyTimer) {
    if (engines[0]?.family !== 4) throw new Error('FamilySyncers: the IPv4 engine comes first');
    this.#engines = engines;
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
    let [frontends, backends] = [0, 0];
    for (const { syncer } of this.#engines) {
      frontends += syncer.state.frontends.size;
      backends += syncer.state.backends.size;
    }
    return { frontends: { size: frontends }, backends: { size: backends } };
  }

  /** The IPv4 maps' capacity (each map's metric is its own; the IPv6 maps' is in SyncReport.v6). */
  capacity(): Capacity {
    return this.#engines[0]!.syncer.capacity();
  }

  zonesInUse(): Set<number> {
    const out = new Set<number>();
    for (const { syncer } of this.#engines) for (const z of syncer.zonesInUse()) out.add(z);
    return out;
  }

  reload(): void {
    for (const { syncer } of this.#engines) syncer.reload();
  }

  sync(targets: readonly FrontendTarget[]): SyncReport {
    const byFamily = this.#split(targets);
    return this.#each(true, (f) => f.syncer.sync(byFamily[f.family]));
  }

  syncOwners(changes: ReadonlyMap<string, readonly FrontendTarget[]>): SyncReport {
    // Every owner goes to every family: an empty list removes what it had there.
    const byFamily: Record<Family, Map<string, FrontendTarget[]>> = { 4: new Map(), 6: new Map() };
    for (const [owner, list] of changes) {
      const split = this.#split(list);
      for (const f of [4, 6] as const) byFamily[f].set(owner, split[f]);
    }
    return this.#each(false, (f) => f.syncer.syncOwners(byFamily[f.family]));
  }

  /** Runs each family's part in order (the first to fail stops the attempt), timed, and merges the reports. */
  #each(full: boolean, run: (f: FamilySyncer) => SyncReport): SyncReport {
    let out: SyncReport | undefined;
    for (const f of this.#engines) {
      const r = this.#time(f.family, full, () => run(f));
      out = out ? merge(out, r, f.syncer.capacity()) : r;
    }
    return out!;
  }

  #split(targets: readonly FrontendTarget[]): Record<Family, FrontendTarget[]> {
    const out: Record<Family, FrontendTarget[]> = { 4: [], 6: [] };
    for (const t of targets) out[targetFamily(t)].push(t);
    return out;
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
