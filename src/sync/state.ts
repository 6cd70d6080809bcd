// What the maps hold, as the sync engine tracks it: frontends with their
// master entry and backend slots, the backends, the reverse NAT entries. Read
// back from the pinned maps at start, so a restarted agent keeps every id.
import type { BackendValue, RevNatValue, SvcKey, SvcValue } from '../maps/codecs.ts';

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

export interface MapState {
  frontends: Map<string, FrontendState>;
  backends: Map<number, BackendValue>;
  revNat: Map<number, RevNatValue>;
  /** Services-map entries no frontend accounts for: slots past a master's count, slots without a master. */
  straySlots: SvcKey[];
}

export function frontendId(k: FrontendKey): string {
  return `${k.addr}:${k.port}/${k.proto}/${k.scope}`;
}

export function backendAddrKey(b: { addr: string; port: number; proto: number }): string {
  return `${b.addr}:${b.port}/${b.proto}`;
}

export function emptyState(): MapState {
  return { frontends: new Map(), backends: new Map(), revNat: new Map(), straySlots: [] };
}

/** Rebuilds the tracked state from map contents (as read with lookup batch). */
export function stateFromEntries(
  services: ReadonlyArray<readonly [SvcKey, SvcValue]>,
  backends: ReadonlyArray<readonly [number, BackendValue]>,
  revNat: ReadonlyArray<readonly [number, RevNatValue]>,
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
  for (const [id, v] of backends) state.backends.set(id, { ...v });
  for (const [id, v] of revNat) state.revNat.set(id, { ...v });
  return state;
}

/** Counts of entries per map that this state accounts for. */
export function entryCounts(state: MapState): { services: number; backends: number; revNat: number } {
  let services = state.straySlots.length;
  for (const fe of state.frontends.values()) services += 1 + fe.slots.filter((s) => s !== undefined).length;
  return { services, backends: state.backends.size, revNat: state.revNat.size };
}
