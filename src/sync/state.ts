// What the maps hold, as the sync engine tracks it: frontends with their
// master entry and backend slots, the backends, the reverse NAT entries, and
// the indexes an incremental update needs (backend id by address, slot
// references per backend, entry counts). Read back from the pinned maps at
// start, so a restarted agent keeps every id.
import { flat } from '../maps/flat-string.ts';
import { ipv4ToU32 } from '../maps/ipv4.ts';
import type { BackendValue, RevNatValue, SrcRangeKey, SvcKey, SvcValue } from '../maps/codecs.ts';
import { BackendTable } from './backend-table.ts';

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
  /** By id (a Map's interface, stored as columns: backend-table.ts). */
  backends: BackendTable;
  revNat: Map<number, RevNatValue>;
  /** loadBalancerSourceRanges by reverse NAT id (the frontend's), as CIDR strings. */
  srcRanges: Map<number, Set<string>>;
  /** Services-map entries no frontend accounts for: slots past a master's count, slots without a master. */
  straySlots: SvcKey[];
  /** First backend id per address (backendAddrKey). */
  idByAddr: Map<BackendAddrKey, number>;
  /** How many slots refer to each backend id. */
  refs: Map<number, number>;
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

/** A backend address (ip, port, protocol) as a Map key: a number for TCP and UDP, a string otherwise. */
export type BackendAddrKey = number | string;

/**
 * proto * 2^48 + ip * 2^16 + port: exact below 2^53 for protocol numbers
 * under 32 (TCP 6, UDP 17), and no string built or hashed per backend (a
 * full sync at 10k x 10 looks up and stores 100k of them).
 */
export function backendAddrKey(b: { addr: string; port: number; proto: number }): BackendAddrKey {
  // IPv6 addresses (their own maps and states) take the string form.
  if (b.proto < 32 && !b.addr.includes(':')) return (b.proto * 2 ** 32 + ipv4ToU32(b.addr)) * 65536 + b.port;
  return flat(b.addr, ':', b.port, '/', b.proto);
}

export function emptyState(): MapState {
  return {
    frontends: new Map(), backends: new BackendTable(), revNat: new Map(), srcRanges: new Map(), straySlots: [],
    idByAddr: new Map(), refs: new Map(), counts: { services: 0, backends: 0, revNat: 0, srcRanges: 0 },
    nextBackendId: 1, nextRevNatId: 1,
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
    for (const s of fe.slots) if (s !== undefined) state.refs.set(s, (state.refs.get(s) ?? 0) + 1);
  }
  for (const [id, v] of backends) {
    state.backends.set(id, { ...v });
    const k = backendAddrKey(v);
    if (!state.idByAddr.has(k)) state.idByAddr.set(k, id);
  }
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
