// The sync plan: desired frontends against what the maps hold, as ordered
// map operations plus the change to the tracked state. Pure: it reads the
// current state and never modifies it; commitPlan() does, after the writes
// succeeded. The order is what keeps live connections safe:
//
//   1 backends  2 reverse NAT and source ranges  3 backend slots
//   3b Maglev tables  4 masters (the new count)  5 removed masters
//   5b tables no frontend uses  6 stale slots
//   7 stale reverse NAT and source ranges  8 unreferenced backends
//
// A reader that finds a master always finds slots 1..count, and every slot
// names a backend that exists. A Maglev table names only slots 1..count of
// its frontend's new count: written after them, and before a shrinking
// frontend's old slots go. Ids freed by a plan are not reused by it.
//
// A plan covers either every frontend (a full sync: also removes strays and
// orphans an interrupted run left) or only the frontends of changed services
// (a partial sync: cost proportional to the change, not to the cluster; it
// also removes what a failed plan left unused, the `suspects`).
//
// A stray slot (past its master's count, or without a master: what an
// interrupted or failed run leaves) is no stray any more once its frontend's
// count covers it: a frontend's plan writes over its strays within the new
// count (in the slots phase, before the master) and deletes the others (after
// it); deleting a stray after a master had grown over it would take a live
// slot away.
import type { BackendValue, RevNatValue, SrcRangeKey, SvcKey, SvcValue } from '../maps/codecs.ts';
import { type FrontendState, type MapState, frontendId, srcRangeKey } from './state.ts';
import { BackendTable } from './tables/backend-table.ts';
import { IdDeltas } from './tables/id-deltas.ts';
import type { FrontendTarget } from './targets.ts';
import { maglevName, maglevSlotTable } from './maglev.ts';

export interface Plan {
  backendUpserts: Array<[number, BackendValue]>;
  revNatUpserts: Array<[number, RevNatValue]>;
  srcRangeUpserts: SrcRangeKey[];
  /** Backend slots to write: compact, as there is one per backend of every frontend. */
  slotUpserts: SlotWrite[];
  masterUpserts: Array<[SvcKey, SvcValue]>;
  masterDeletes: SvcKey[];
  slotDeletes: SvcKey[];
  revNatDeletes: number[];
  srcRangeDeletes: SrcRangeKey[];
  backendDeletes: number[];
  /** Maglev tables to publish whole, by the frontend's rev_nat_id (index 0: M, then slots). */
  maglevUpserts: Array<[number, Uint16Array]>;
  maglevDeletes: number[];
  /** The change to the tracked state, committed once the writes succeeded. */
  delta: {
    /** The backends backendUpserts writes, indexed as the plan found them (the tracked table a first sync starts from). */
    backendTable: BackendTable;
    frontendSets: Map<string, FrontendState>;
    frontendDeletes: string[];
    /** Slot references gained (+) and lost (-) by backend id. */
    refDelta: IdDeltas;
    /** New source range sets by reverse NAT id (empty: none left). */
    srcRangeSets: Map<number, Set<string>>;
    /** Stray slots (svcSlotId) this plan writes over or deletes: no longer strays once it is committed. */
    resolvedStrays: Set<string>;
    addedServiceEntries: number;
    nextBackendId: number;
    nextRevNatId: number;
    /** Maglev table sizes by rev_nat_id; 0: the table is deleted. */
    maglevSets: Map<number, number>;
  };
  /** Frontends written (added, changed or removed). */
  changed: string[];
  /** Frontends left as they were because a map is full, with their owner and the reason. */
  deferred: Array<{ id: string; label: string; owner: string; reason: string }>;
}

export interface SlotWrite {
  key: FrontendState['key'];
  slot: number;
  backendId: number;
}

export interface Capacity {
  services: number;
  backends: number;
  revNat: number;
  srcRanges: number;
}

/**
 * Ids a failed plan wrote or meant to delete. After the failure the maps may
 * hold them unused (a new frontend's backends and reverse NAT written, its
 * master not): a partial plan removes those that nothing uses, as a full one
 * removes every orphan.
 */
export interface Suspects {
  backends: ReadonlySet<number>;
  revNat: ReadonlySet<number>;
}

/** full: the targets are everything; partial: only frontends in `removable` may be removed. */
export type PlanScope = { full: true } | { full: false; removable: Iterable<string>; suspects?: Suspects };

/** A services-map key as a string (stray bookkeeping). */
export function svcSlotId(k: SvcKey): string {
  return `${k.addr}:${k.port}/${k.proto}/${k.scope}#${k.slot}`;
}

function straysByFrontend(strays: readonly SvcKey[]): Map<string, SvcKey[]> {
  const out = new Map<string, SvcKey[]>();
  for (const k of strays) {
    const id = frontendId(k);
    const list = out.get(id);
    if (list) list.push(k);
    else out.set(id, [k]);
  }
  return out;
}

export function planIsEmpty(p: Plan): boolean {
  return (
    p.backendUpserts.length +
      p.revNatUpserts.length +
      p.srcRangeUpserts.length +
      p.slotUpserts.length +
      p.masterUpserts.length +
      p.masterDeletes.length +
      p.slotDeletes.length +
      p.revNatDeletes.length +
      p.srcRangeDeletes.length +
      p.backendDeletes.length +
      p.maglevUpserts.length +
      p.maglevDeletes.length ===
    0
  );
}

const U32_MAX = 0xffffffff;

/** The next id at or after `from` that neither the maps nor this plan use (ids wrap, 0 is never used). */
function freeId(from: number, used: (id: number) => boolean): number {
  let id = from;
  for (let tries = 0; tries < U32_MAX; tries++) {
    if (id > U32_MAX || id < 1) id = 1;
    if (!used(id)) return id;
    id++;
  }
  throw new Error('no free id left');
}

function sameMaster(a: SvcValue, b: SvcValue): boolean {
  return (
    a.rev_nat_id === b.rev_nat_id &&
    a.count === b.count &&
    a.flags === b.flags &&
    a.algorithm === b.algorithm &&
    a.affinity_timeout === b.affinity_timeout
  );
}

/**
 * New slot order from the old one: backends that stay keep their slot, a
 * removed backend's slot takes the last one (swap-remove), new backends are
 * appended. One backend out of ten costs one slot write, not ten.
 */
export function reconcileSlots(old: ReadonlyArray<number | undefined>, wanted: readonly number[]): number[] {
  // Nothing changed (what a periodic full plan finds for nearly every frontend): the same slots, without two Sets each.
  if (sameDistinct(old, wanted)) return wanted.slice();
  const want = new Set(wanted);
  const arr = old.slice();
  const seen = new Set<number>();
  let i = 0;
  while (i < arr.length) {
    const id = arr[i];
    if (id === undefined || !want.has(id) || seen.has(id)) {
      const last = arr.pop();
      if (i < arr.length) arr[i] = last;
    } else {
      seen.add(id);
      i++;
    }
  }
  for (const id of wanted) {
    if (!seen.has(id)) {
      arr.push(id);
      seen.add(id);
    }
  }
  return arr as number[];
}

/** old and wanted hold the same ids in the same order, each once (checked pairwise for short lists only). */
function sameDistinct(old: ReadonlyArray<number | undefined>, wanted: readonly number[]): boolean {
  const n = wanted.length;
  if (old.length !== n || n > 32) return false;
  for (let i = 0; i < n; i++) {
    if (old[i] !== wanted[i]) return false;
    for (let j = 0; j < i; j++) if (wanted[j] === wanted[i]) return false;
  }
  return true;
}

function svcKey(fe: { key: FrontendState['key'] }, slot: number): SvcKey {
  return { addr: fe.key.addr, port: fe.key.port, proto: fe.key.proto, scope: fe.key.scope, slot };
}

const NO_RANGES: ReadonlySet<string> = new Set();

/** The ids in order, each once (a new frontend's slots). */
function unique(ids: readonly number[]): number[] {
  // Nearly always distinct already (fresh ids, one per endpoint): a Set only for long lists.
  if (ids.length <= 32) {
    const out: number[] = [];
    for (const id of ids) if (!out.includes(id)) out.push(id);
    return out;
  }
  return [...new Set(ids)];
}

export function planSync(
  current: MapState,
  targets: readonly FrontendTarget[],
  capacity: Capacity,
  scope: PlanScope = { full: true },
): Plan {
  // This plan's backend upserts by id, and their ids by address (a backend
  // new to the maps that two frontends share gets one id).
  const planned = new BackendTable();
  const delta: Plan['delta'] = {
    backendTable: planned,
    frontendSets: new Map(),
    frontendDeletes: [],
    refDelta: new IdDeltas(),
    srcRangeSets: new Map(),
    resolvedStrays: new Set(),
    addedServiceEntries: 0,
    nextBackendId: current.nextBackendId,
    nextRevNatId: current.nextRevNatId,
    maglevSets: new Map(),
  };
  const plan: Plan = {
    backendUpserts: [],
    revNatUpserts: [],
    srcRangeUpserts: [],
    slotUpserts: [],
    masterUpserts: [],
    masterDeletes: [],
    slotDeletes: [],
    revNatDeletes: [],
    srcRangeDeletes: [],
    backendDeletes: [],
    maglevUpserts: [],
    maglevDeletes: [],
    delta,
    changed: [],
    deferred: [],
  };
  const plannedRevNat = new Set<number>();
  const refDelta = delta.refDelta;
  const ref = (id: number, d: number) => refDelta.add(id, d);
  const usedBackendId = (x: number) => current.backends.has(x) || planned.has(x) || fresh.includes(x);
  /** Ids allocated for the frontend being planned, until it fits. */
  let fresh: number[] = [];
  const budget = {
    services: capacity.services - current.counts.services,
    backends: capacity.backends - current.counts.backends,
    revNat: capacity.revNat - current.counts.revNat,
    srcRanges: capacity.srcRanges - current.counts.srcRanges,
  };
  /** rev_nat ids whose Maglev table stays (a full plan deletes the others). */
  const maglevKept = new Set<number>();
  const dropMaglev = (revNatId: number) => {
    if (!current.maglevSizes?.has(revNatId) || delta.maglevSets.get(revNatId) === 0) return;
    plan.maglevDeletes.push(revNatId);
    delta.maglevSets.set(revNatId, 0);
  };
  const strays = current.straySlots.length ? straysByFrontend(current.straySlots) : undefined;
  /** Deletes a frontend's strays past `count` (after its master: no reader counts on them). */
  const dropStrays = (id: string, count: number) => {
    for (const k of strays?.get(id) ?? []) {
      if (k.slot <= count) continue;
      plan.slotDeletes.push(k);
      delta.resolvedStrays.add(svcSlotId(k));
    }
  };

  for (const t of targets) {
    const cur = current.frontends.get(t.id);
    const oldSlots = cur?.slots ?? [];

    // Backend ids, allocated tentatively until the frontend fits; pending: indexes into t.backends to write.
    fresh = [];
    const pending: number[] = [];
    const ids: number[] = [];
    for (let i = 0; i < t.backends.length; i++) {
      const be = t.backends[i]!;
      // Written unless the id holds it already (this plan's value first); a fresh id always is.
      let id = planned.idOf(be);
      if (id !== undefined) {
        if (!planned.same(id, be)) pending.push(i);
      } else if ((id = current.backends.idOf(be)) !== undefined) {
        if (!(planned.has(id) ? planned.same(id, be) : current.backends.same(id, be))) pending.push(i);
      } else {
        id = freeId(delta.nextBackendId, usedBackendId);
        delta.nextBackendId = id + 1;
        fresh.push(id);
        pending.push(i);
      }
      ids.push(id);
    }
    const newSlots = cur ? reconcileSlots(oldSlots, ids) : unique(ids);
    // New entries: the master of a new frontend, and every slot position the
    // map lacks, except strays there (written over, they exist already).
    let needServices = cur ? 0 : 1;
    for (let i = 0; i < newSlots.length; i++) if (oldSlots[i] === undefined) needServices++;
    const overwritten = (strays?.get(t.id) ?? []).filter((k) => k.slot <= newSlots.length);
    needServices -= overwritten.length;
    const hasRevNat = !!cur && cur.master.rev_nat_id !== 0 && current.revNat.has(cur.master.rev_nat_id);
    const needRevNat = hasRevNat ? 0 : 1;
    const haveRanges = (hasRevNat ? current.srcRanges.get(cur!.master.rev_nat_id) : undefined) ?? NO_RANGES;
    let needRanges = 0;
    for (const r of t.sourceRanges) if (!haveRanges.has(r)) needRanges++;
    const lacking =
      needServices > budget.services
        ? 'services'
        : fresh.length > budget.backends
          ? 'backends'
          : needRevNat > budget.revNat
            ? 'reverse NAT'
            : needRanges > budget.srcRanges
              ? 'source ranges'
              : '';
    if (lacking) {
      const cap = {
        services: capacity.services,
        backends: capacity.backends,
        'reverse NAT': capacity.revNat,
        'source ranges': capacity.srcRanges,
      }[lacking];
      plan.deferred.push({ id: t.id, label: t.label, owner: t.owner, reason: `the ${lacking} map is full (${cap} entries)` });
      if (cur) maglevKept.add(cur.master.rev_nat_id);
      continue; // keeps serving what it had, if anything
    }
    budget.services -= needServices;
    budget.backends -= fresh.length;
    budget.revNat -= needRevNat;
    budget.srcRanges -= needRanges;
    delta.addedServiceEntries += needServices;
    for (const i of pending) {
      const id = ids[i]!;
      const be = t.backends[i]!;
      if (planned.upsert(id, be)) plan.backendUpserts.push([id, be]);
      else plan.backendUpserts[plan.backendUpserts.findIndex(([x]) => x === id)] = [id, be];
    }

    let changed = false;
    for (let i = 0; i < newSlots.length; i++) {
      if (oldSlots[i] !== newSlots[i]) {
        plan.slotUpserts.push({ key: t.key, slot: i + 1, backendId: newSlots[i]! });
        changed = true;
      }
    }
    let revNatId = hasRevNat ? cur!.master.rev_nat_id : 0;
    if (!revNatId) {
      revNatId = freeId(delta.nextRevNatId, (x) => current.revNat.has(x) || plannedRevNat.has(x));
      delta.nextRevNatId = revNatId + 1;
      plannedRevNat.add(revNatId);
    }
    const rn: RevNatValue = { addr: t.key.addr, port: t.key.port };
    const haveRn = current.revNat.get(revNatId);
    if (!haveRn || haveRn.addr !== rn.addr || haveRn.port !== rn.port) {
      plan.revNatUpserts.push([revNatId, rn]);
      changed = true;
    }
    const wantRanges = t.sourceRanges.length || haveRanges.size ? new Set(t.sourceRanges) : NO_RANGES;
    const adds = needRanges ? t.sourceRanges.filter((r) => !haveRanges.has(r)) : [];
    const dels = haveRanges.size ? [...haveRanges].filter((r) => !wantRanges.has(r)) : [];
    if (adds.length || dels.length) {
      for (const r of adds) plan.srcRangeUpserts.push(srcRangeKey(revNatId, r));
      for (const r of dels) plan.srcRangeDeletes.push(srcRangeKey(revNatId, r));
      delta.srcRangeSets.set(revNatId, new Set(wantRanges));
      changed = true;
    }
    const master: SvcValue = {
      backend_id: 0,
      rev_nat_id: revNatId,
      count: newSlots.length,
      flags: t.flags,
      algorithm: t.algorithm,
      affinity_timeout: t.affinityTimeout,
    };
    if (!cur || !sameMaster(cur.master, master)) {
      plan.masterUpserts.push([svcKey(t, 0), master]);
      changed = true;
    }
    // Maglev: a new table whenever the slots or the size change (built whole:
    // it is published in one update).
    const wantM = t.maglevSize && newSlots.length ? t.maglevSize : 0;
    if (wantM) {
      maglevKept.add(revNatId);
      const slotsMoved = newSlots.length !== oldSlots.length || newSlots.some((id, i) => oldSlots[i] !== id);
      if (slotsMoved || current.maglevSizes?.get(revNatId) !== wantM) {
        const nameById = new Map(ids.map((id, i) => [id, maglevName(t.backends[i]!)]));
        plan.maglevUpserts.push([
          revNatId,
          maglevSlotTable(
            newSlots.map((id) => nameById.get(id)!),
            wantM,
          ),
        ]);
        delta.maglevSets.set(revNatId, wantM);
        changed = true;
      }
    } else if (current.maglevSizes?.has(revNatId)) {
      dropMaglev(revNatId);
      changed = true;
    }
    for (let i = newSlots.length; i < oldSlots.length; i++) {
      if (oldSlots[i] !== undefined) plan.slotDeletes.push(svcKey(t, i + 1));
      changed = true;
    }
    for (const k of overwritten) delta.resolvedStrays.add(svcSlotId(k));
    dropStrays(t.id, newSlots.length);
    if (changed) {
      for (const s of oldSlots) if (s !== undefined) ref(s, -1);
      for (const s of newSlots) ref(s, +1);
      delta.frontendSets.set(t.id, { key: t.key, master, slots: newSlots });
      plan.changed.push(t.id);
    }
  }

  // Frontends no longer wanted: master first, then its slots, then its reverse NAT.
  const wanted = new Set(targets.map((t) => t.id));
  const removable = scope.full ? current.frontends.keys() : scope.removable;
  for (const id of removable) {
    if (wanted.has(id)) continue;
    const fe = current.frontends.get(id);
    dropStrays(id, 0); // also those of a frontend whose master never made it into the map
    if (!fe) continue;
    plan.masterDeletes.push(svcKey(fe, 0));
    fe.slots.forEach((s, i) => {
      if (s === undefined) return;
      plan.slotDeletes.push(svcKey(fe, i + 1));
      ref(s, -1);
    });
    if (current.revNat.has(fe.master.rev_nat_id)) plan.revNatDeletes.push(fe.master.rev_nat_id);
    dropMaglev(fe.master.rev_nat_id);
    const ranges = current.srcRanges.get(fe.master.rev_nat_id);
    if (ranges?.size) {
      for (const r of ranges) plan.srcRangeDeletes.push(srcRangeKey(fe.master.rev_nat_id, r));
      delta.srcRangeSets.set(fe.master.rev_nat_id, new Set());
    }
    delta.frontendDeletes.push(id);
    plan.changed.push(id);
  }

  // Backends no slot refers to any more.
  const unreferenced = (id: number) => current.backends.refs(id) + (refDelta.get(id) ?? 0) <= 0;
  const suspects = scope.full ? undefined : scope.suspects;
  const candidates = scope.full ? current.backends.keys() : new Set([...delta.refDelta.keys(), ...(suspects?.backends ?? [])]);
  for (const id of candidates) {
    if (current.backends.has(id) && unreferenced(id)) plan.backendDeletes.push(id);
  }

  if (scope.full) {
    // What an interrupted run may have left: stray slots, reverse NAT entries no master uses.
    for (const k of current.straySlots) {
      if (delta.resolvedStrays.has(svcSlotId(k))) continue;
      plan.slotDeletes.push(k);
      delta.resolvedStrays.add(svcSlotId(k));
    }
    dropUnusedRevNat(current, plan, current.revNat.keys(), () => true);
    for (const id of current.maglevSizes?.keys() ?? []) if (!maglevKept.has(id)) dropMaglev(id);
  } else if (suspects?.revNat.size) {
    dropUnusedRevNat(current, plan, suspects.revNat, (id) => suspects.revNat.has(id));
  }
  return plan;
}

/**
 * Deletes the reverse NAT entries among `ids`, and the source ranges of the
 * ids `considered`, that no master uses once the plan is applied. O(frontends):
 * run by full plans, and by partial ones only after a failure.
 */
function dropUnusedRevNat(current: MapState, plan: Plan, ids: Iterable<number>, considered: (id: number) => boolean): void {
  const delta = plan.delta;
  const used = new Set<number>();
  const gone = new Set(delta.frontendDeletes);
  for (const [id, fe] of current.frontends) if (!gone.has(id) && !delta.frontendSets.has(id)) used.add(fe.master.rev_nat_id);
  for (const fe of delta.frontendSets.values()) used.add(fe.master.rev_nat_id);
  const deleting = new Set(plan.revNatDeletes);
  for (const id of ids) {
    if (!current.revNat.has(id) || used.has(id) || deleting.has(id)) continue;
    plan.revNatDeletes.push(id);
    deleting.add(id);
  }
  for (const [id, ranges] of current.srcRanges) {
    if (!considered(id) || used.has(id) || delta.srcRangeSets.has(id)) continue;
    for (const r of ranges) plan.srcRangeDeletes.push(srcRangeKey(id, r));
    delta.srcRangeSets.set(id, new Set());
  }
}

/** Applies a plan's delta to the tracked state, in place, after its writes succeeded. */
export function commitPlan(state: MapState, plan: Plan): void {
  const d = plan.delta;
  for (const id of d.frontendDeletes) state.frontends.delete(id);
  for (const [id, fe] of d.frontendSets) state.frontends.set(id, fe);
  if (d.resolvedStrays.size) state.straySlots = state.straySlots.filter((k) => !d.resolvedStrays.has(svcSlotId(k)));
  let newBackends = 0;
  if (state.backends.empty && plan.backendDeletes.length === 0) {
    // Nothing tracked yet (the first full sync): the plan's own table holds exactly the
    // backends written, indexed; building it again cost ~40 ms at 10k x 10.
    state.backends = d.backendTable;
    newBackends = d.backendTable.size;
  } else {
    for (const [id, be] of plan.backendUpserts) if (state.backends.upsert(id, be)) newBackends++; // indexes its address too, unless another id holds it
  }
  for (const id of plan.backendDeletes) {
    state.backends.delete(id);
    state.backends.clearRefs(id);
  }
  let newRevNat = 0;
  for (const [id, rn] of plan.revNatUpserts) {
    if (!state.revNat.has(id)) newRevNat++;
    state.revNat.set(id, rn);
  }
  for (const id of plan.revNatDeletes) state.revNat.delete(id);
  for (const [id, set] of d.srcRangeSets) {
    if (set.size) state.srcRanges.set(id, set);
    else state.srcRanges.delete(id);
  }
  // Only ids that hold a backend once the plan's writes are in (a slot naming a missing one counts for nothing).
  d.refDelta.forEach((id, dv) => state.backends.addRefsIfHeld(id, dv));
  state.counts = {
    services: state.counts.services + d.addedServiceEntries - plan.masterDeletes.length - plan.slotDeletes.length,
    backends: state.counts.backends + newBackends - plan.backendDeletes.length,
    revNat: state.counts.revNat + newRevNat - plan.revNatDeletes.length,
    srcRanges: state.counts.srcRanges + plan.srcRangeUpserts.length - plan.srcRangeDeletes.length,
  };
  for (const [id, m] of d.maglevSets) {
    if (m) (state.maglevSizes ??= new Map()).set(id, m);
    else state.maglevSizes?.delete(id);
  }
  state.nextBackendId = d.nextBackendId;
  state.nextRevNatId = d.nextRevNatId;
}
