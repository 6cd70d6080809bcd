// After a failed apply the tracked state no longer says what the maps hold:
// the phases before the failing one were written, and the failing batch may
// have stopped part way (the kernel writes a batch in order and reports how
// far it got). Which entries a plan could have changed is known: its keys.
// Reading back those entries alone, one lookup each, puts the tracked state
// in line with the maps at O(plan) cost, where re-reading every map costs
// O(maps): a failed one-Service update in a 10k-Service cluster then costs a
// few lookups, and its retry can be planned for that Service only.
import type { BackendValue, RevNatValue, SrcRangeKey, SvcKey, SvcValue } from '../maps/codecs.ts';
import type { Plan } from './plan.ts';
import { type FrontendKey, type MapState, frontendId } from './state.ts';

/** Single-entry reads of the maps (a missing entry is undefined). */
export interface EntryReader {
  lookupServices(keys: readonly SvcKey[]): Array<SvcValue | undefined>;
  lookupBackends(ids: readonly number[]): Array<BackendValue | undefined>;
  lookupRevNat(ids: readonly number[]): Array<RevNatValue | undefined>;
  /** Every source range: a lookup in an LPM trie matches prefixes, so one exact key cannot be probed. */
  readSrcRanges(): ReadonlyArray<SrcRangeKey>;
}

interface Touched {
  /** Frontends whose services-map entries the plan wrote or deleted, with the highest slot to read. */
  frontends: Map<string, { key: FrontendKey; lastSlot: number }>;
  backends: Set<number>;
  revNat: Set<number>;
  srcRanges: boolean;
}

function touched(state: MapState, plan: Plan): Touched {
  const frontends: Touched['frontends'] = new Map();
  const add = (key: FrontendKey, lastSlot: number) => {
    const id = frontendId(key);
    const had = frontends.get(id);
    const cur = state.frontends.get(id)?.slots.length ?? 0;
    frontends.set(id, {
      key: { addr: key.addr, port: key.port, proto: key.proto, scope: key.scope },
      lastSlot: Math.max(lastSlot, cur, had?.lastSlot ?? 0),
    });
  };
  for (const fe of plan.delta.frontendSets.values()) add(fe.key, fe.slots.length);
  for (const k of plan.masterDeletes) add(k, 0);
  for (const k of plan.slotDeletes) add(k, k.slot); // stale slots and strays
  // A touched frontend's strays are read with it: its picture is rebuilt whole.
  for (const k of state.straySlots) {
    const f = frontends.get(frontendId(k));
    if (f && k.slot > f.lastSlot) f.lastSlot = k.slot;
  }
  return {
    frontends,
    backends: new Set([...plan.backendUpserts.map(([id]) => id), ...plan.backendDeletes]),
    revNat: new Set([...plan.revNatUpserts.map(([id]) => id), ...plan.revNatDeletes]),
    srcRanges: plan.srcRangeUpserts.length + plan.srcRangeDeletes.length > 0,
  };
}

/** How many lookups readBack() would make for this plan. */
export function readBackCost(state: MapState, plan: Plan): number {
  const t = touched(state, plan);
  let n = t.backends.size + t.revNat.size;
  for (const f of t.frontends.values()) n += 1 + f.lastSlot;
  return n;
}

/** Brings `state` (as it was before `plan`) in line with the maps after the plan failed part way. */
export function readBack(state: MapState, plan: Plan, r: EntryReader): void {
  const t = touched(state, plan);
  readFrontends(state, t.frontends, r);
  readBackends(state, [...t.backends], r);
  readRevNat(state, [...t.revNat], r);
  if (t.srcRanges) readSrcRanges(state, r);
  // A Maglev table the plan meant to publish may or may not be in: unknown,
  // so the next plan publishes it again (whole, one update: idempotent). One
  // it meant to delete stays tracked and is deleted again (a table already
  // gone is no error).
  for (const [id] of plan.maglevUpserts) state.maglevSizes?.delete(id);
  // Ids the plan handed out may be in the maps now: the next plan searches on from there.
  state.nextBackendId = plan.delta.nextBackendId;
  state.nextRevNatId = plan.delta.nextRevNatId;
}

const slotKey = (k: FrontendKey, slot: number): SvcKey => ({ addr: k.addr, port: k.port, proto: k.proto, scope: k.scope, slot });

function readFrontends(state: MapState, frontends: Touched['frontends'], r: EntryReader): void {
  if (frontends.size === 0) return;
  const keys: SvcKey[] = [];
  for (const f of frontends.values()) for (let s = 0; s <= f.lastSlot; s++) keys.push(slotKey(f.key, s));
  const values = r.lookupServices(keys);
  const strays: SvcKey[] = state.straySlots.filter((k) => !frontends.has(frontendId(k)));
  state.counts.services -= state.straySlots.length - strays.length;
  let at = 0;
  for (const [id, f] of frontends) {
    const found = values.slice(at, at + f.lastSlot + 1);
    at += f.lastSlot + 1;
    // Forget the old picture of this frontend...
    const old = state.frontends.get(id);
    if (old) {
      state.counts.services--;
      for (const s of old.slots) {
        if (s === undefined) continue;
        state.backends.addRefs(s, -1);
        state.counts.services--;
      }
      state.frontends.delete(id);
    }
    // ...and take the maps' one, as stateFromEntries() would.
    const master = found[0];
    if (master && master.count > f.lastSlot) {
      // Not a count this plan or the state knew of (the maps were changed behind our back): read on.
      const more = Array.from({ length: master.count - f.lastSlot }, (_, i) => slotKey(f.key, f.lastSlot + 1 + i));
      found.push(...r.lookupServices(more));
    }
    const count = master?.count ?? 0;
    if (master) {
      const slots = Array.from({ length: count }, (_, i) => found[i + 1]?.backend_id);
      state.frontends.set(id, { key: f.key, master: { ...master }, slots });
      state.counts.services++;
      for (const s of slots) {
        if (s === undefined) continue;
        state.backends.addRefs(s, +1);
        state.counts.services++;
      }
    }
    for (let s = count + 1; s < found.length; s++) {
      if (found[s] === undefined) continue;
      strays.push(slotKey(f.key, s));
      state.counts.services++;
    }
  }
  state.straySlots = strays;
}

function readBackends(state: MapState, ids: number[], r: EntryReader): void {
  if (ids.length === 0) return;
  const values = r.lookupBackends(ids);
  ids.forEach((id, i) => {
    // delete() takes it out of the address index if it was the id named there; set() names it if none is.
    if (state.backends.delete(id)) state.counts.backends--;
    const v = values[i];
    if (v) {
      state.backends.set(id, v);
      state.counts.backends++;
    }
  });
}

function readRevNat(state: MapState, ids: number[], r: EntryReader): void {
  if (ids.length === 0) return;
  const values = r.lookupRevNat(ids);
  ids.forEach((id, i) => {
    if (state.revNat.delete(id)) state.counts.revNat--;
    const v = values[i];
    if (v) {
      state.revNat.set(id, { ...v });
      state.counts.revNat++;
    }
  });
}

function readSrcRanges(state: MapState, r: EntryReader): void {
  const all = r.readSrcRanges();
  state.srcRanges = new Map();
  for (const k of all) {
    let set = state.srcRanges.get(k.rev_nat_id);
    if (!set) state.srcRanges.set(k.rev_nat_id, (set = new Set()));
    set.add(`${k.addr}/${k.prefixlen - 32}`);
  }
  state.counts.srcRanges = all.length;
}
