// What the maps hold, as the sync engine tracks it: frontends with their
// master entry and backend slots, the backends, the reverse NAT entries, and
// the indexes an incremental update needs (backend id by address and slot
// references per backend, both in the backend table; entry counts). Read
// back from the pinned maps at start, so a restarted agent keeps every id.
import { flat } from '../util/flat-string.ts';
import type { BackendValue, RevNatValue, SrcRangeKey, SvcKey, SvcValue } from '../maps/codecs.ts';
import { BackendTable } from './tables/backend-table.ts';

export interface FrontendKey {
  addr: string;
  port: number;
  proto: number;
  scope: number;
}

export interface FrontendState {
  key: FrontendKey;
  master: SvcValue;
  /** Backend id at slots 1..n; undefined marks a slot the map lacks (rewritten on the next sync). */
  slots: Array<number | undefined>;
}

export interface EntryCounts {
  services: number;
  backends: number;
  revNat: number;
  srcRanges: number;
}

export interface MapState {
  frontends: Map<string, FrontendState>;
  /** By id (a Map's interface, stored as columns: tables/backend-table.ts), with the backend id by address and the slot references per id. */
  backends: BackendTable;
  revNat: Map<number, RevNatValue>;
  /** loadBalancerSourceRanges by reverse NAT id (the frontend's), as CIDR strings. */
  srcRanges: Map<number, Set<string>>;
  /** Services-map entries no frontend accounts for: slots past a master's count, slots without a master. */
  straySlots: SvcKey[];
  /** Entries in each map, kept up to date as plans are committed. */
  counts: EntryCounts;
  /** Where the next id search starts (ids are not reused soon after they are freed). */
  nextBackendId: number;
  nextRevNatId: number;
  /** Maglev tables in svcmap_maglev: the frontend's rev_nat_id -> its size M. Absent: none. */
  maglevSizes?: Map<number, number>;
}

export function frontendId(k: FrontendKey): string {
  return flat(k.addr, ':', k.port, '/', k.proto, '/', k.scope);
}

export function emptyState(): MapState {
  return {
    frontends: new Map(),
    backends: new BackendTable(),
    revNat: new Map(),
    srcRanges: new Map(),
    straySlots: [],
    counts: { services: 0, backends: 0, revNat: 0, srcRanges: 0 },
    nextBackendId: 1,
    nextRevNatId: 1,
  };
}

/** Rebuilds the tracked state from map contents (as read with lookup batch). */
export function stateFromEntries(
  services: ReadonlyArray<readonly [SvcKey, SvcValue]>,
  backends: ReadonlyArray<readonly [number, BackendValue]>,
  revNat: ReadonlyArray<readonly [number, RevNatValue]>,
  srcRanges: ReadonlyArray<readonly [SrcRangeKey, number]> = [],
): MapState {
  const state = emptyState();
  const slotsById = new Map<string, Array<[SvcKey, SvcValue]>>();
  for (const [k, v] of services) {
    const key: FrontendKey = { addr: k.addr, port: k.port, proto: k.proto, scope: k.scope };
    const id = frontendId(key);
    if (k.slot === 0) {
      state.frontends.set(id, { key, master: { ...v }, slots: [] });
    } else {
      let list = slotsById.get(id);
      if (!list) slotsById.set(id, (list = []));
      list.push([k, v]);
    }
  }
  for (const [id, list] of slotsById) {
    const fe = state.frontends.get(id);
    const bySlot = new Map<number, number>();
    for (const [k, v] of list) {
      if (fe && k.slot <= fe.master.count) bySlot.set(k.slot, v.backend_id);
      else state.straySlots.push(k);
    }
    if (fe) fe.slots = Array.from({ length: fe.master.count }, (_, i) => bySlot.get(i + 1));
  }
  for (const fe of state.frontends.values()) {
    // A master whose slots are all missing still needs `count` (undefined) slots, rewritten next sync.
    if (fe.slots.length !== fe.master.count) fe.slots = Array.from({ length: fe.master.count }, (_, i) => fe.slots[i]);
  }
  for (const [id, v] of backends) state.backends.set(id, v); // the table copies the fields
  for (const fe of state.frontends.values()) for (const s of fe.slots) if (s !== undefined) state.backends.addRefs(s, 1);
  for (const [id, v] of revNat) state.revNat.set(id, { ...v });
  for (const [k] of srcRanges) {
    let set = state.srcRanges.get(k.rev_nat_id);
    if (!set) state.srcRanges.set(k.rev_nat_id, (set = new Set()));
    set.add(`${k.addr}/${k.prefixlen - 32}`);
  }
  state.counts = { services: services.length, backends: backends.length, revNat: revNat.length, srcRanges: srcRanges.length };
  let maxB = 0;
  for (const id of state.backends.keys()) if (id > maxB) maxB = id;
  let maxR = 0;
  for (const id of state.revNat.keys()) if (id > maxR) maxR = id;
  state.nextBackendId = maxB + 1;
  state.nextRevNatId = maxR + 1;
  return state;
}

/** Counts recomputed from scratch (tests compare them with the tracked ones). */
export function countEntries(state: MapState): EntryCounts {
  let services = state.straySlots.length;
  for (const fe of state.frontends.values()) services += 1 + fe.slots.filter((s) => s !== undefined).length;
  let srcRanges = 0;
  for (const set of state.srcRanges.values()) srcRanges += set.size;
  return { services, backends: state.backends.size, revNat: state.revNat.size, srcRanges };
}

/** The LPM trie key of one source range of a frontend. */
export function srcRangeKey(revNatId: number, cidr: string): SrcRangeKey {
  const [addr, len] = cidr.split('/');
  return { prefixlen: 32 + Number(len), rev_nat_id: revNatId, addr: addr! };
}
