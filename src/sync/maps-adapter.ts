// The sync engine's view of the real maps of one address family: read the
// state back (whole, or the entries a failed plan touched), know their
// capacities, write batches. One Syncer per family, each over its adapter.
import type { BackendValue, RevNatValue, SrcRangeKey, SvcKey, SvcValue } from '../maps/codecs.ts';
import { SVCMAP_MAP_SERVICES6, SVCMAP_MAP_SRC_RANGE, SVCMAP_MAP_SRC_RANGE6 } from '../maps/constants.ts';
import type { FamilyMaps } from '../maps/datapath-maps.ts';
import type { MapWriter } from './apply.ts';
import type { Capacity, SlotWrite } from './plan.ts';
import type { MapSource } from './syncer.ts';
import { type MapState, stateFromEntries } from './state.ts';

export class MapsAdapter implements MapSource, MapWriter {
  readonly maps: FamilyMaps;
  constructor(maps: FamilyMaps) {
    this.maps = maps;
  }
  readState(): MapState {
    const state = stateFromEntries(
      this.maps.services.entries(),
      this.maps.backends.entries(),
      this.maps.revNat.entries(),
      this.maps.srcRange?.entries() ?? [],
    );
    const maglev = this.maps.maglev?.sizes();
    if (maglev?.size) state.maglevSizes = maglev;
    return state;
  }
  lookupServices(keys: readonly SvcKey[]): Array<SvcValue | undefined> {
    return keys.map((k) => this.maps.services.get(k));
  }
  lookupBackends(ids: readonly number[]): Array<BackendValue | undefined> {
    return ids.map((id) => this.maps.backends.get(id));
  }
  lookupRevNat(ids: readonly number[]): Array<RevNatValue | undefined> {
    return ids.map((id) => this.maps.revNat.get(id));
  }
  readSrcRanges(): SrcRangeKey[] {
    return this.maps.srcRange?.entries().map(([k]) => k) ?? [];
  }
  capacity(): Capacity {
    return {
      services: this.maps.services.raw.maxEntries,
      backends: this.maps.backends.raw.maxEntries,
      revNat: this.maps.revNat.raw.maxEntries,
      srcRanges: this.maps.srcRange?.raw.maxEntries ?? 0,
    };
  }
  putBackends(entries: ReadonlyArray<readonly [number, BackendValue]>): void {
    this.maps.backends.putMany(entries);
  }
  putRevNat(entries: ReadonlyArray<readonly [number, RevNatValue]>): void {
    this.maps.revNat.putMany(entries);
  }
  putServices(entries: ReadonlyArray<readonly [SvcKey, SvcValue]>): void {
    this.maps.services.putMany(entries);
  }
  putSlots(slots: readonly SlotWrite[]): void {
    this.maps.services.putEach(slots.length, slotEntries(slots));
  }
  deleteServices(keys: readonly SvcKey[]): void {
    this.maps.services.deleteMany(keys);
  }
  putSrcRanges(keys: readonly SrcRangeKey[]): void {
    if (keys.length && !this.maps.srcRange) {
      const map = this.maps.services.spec.name === SVCMAP_MAP_SERVICES6 ? SVCMAP_MAP_SRC_RANGE6 : SVCMAP_MAP_SRC_RANGE;
      throw new Error(`loadBalancerSourceRanges need the tc datapath's ${map} map, which is not loaded`);
    }
    this.maps.srcRange?.putMany(keys.map((k) => [k, 1] as const));
  }
  deleteSrcRanges(keys: readonly SrcRangeKey[]): void {
    this.maps.srcRange?.deleteMany(keys);
  }
  deleteRevNat(ids: readonly number[]): void {
    this.maps.revNat.deleteMany(ids);
  }
  deleteBackends(ids: readonly number[]): void {
    this.maps.backends.deleteMany(ids);
  }
  putMaglev(tables: ReadonlyArray<readonly [number, Uint16Array]>): void {
    const m = this.#maglev();
    for (const [id, table] of tables) m.publish(id, table);
  }
  deleteMaglev(ids: readonly number[]): void {
    const m = this.#maglev();
    for (const id of ids) m.delete(id);
  }
  #maglev() {
    if (!this.maps.maglev)
      throw new Error(
        `maglev needs the Maglev tables map of this family (svcmap_maglev, svcmap_maglev6), which the pins of ${this.maps.services.spec.name}'s datapath lack`,
      );
    return this.maps.maglev;
  }
}

/**
 * The services-map entry of slots[i], as one key and value object filled
 * anew for each i (the batch encodes it before asking for the next): no
 * allocation per slot, 100k of them in a first full sync at 10k x 10.
 */
export function slotEntries(slots: readonly SlotWrite[]): (i: number) => readonly [SvcKey, SvcValue] {
  const k: SvcKey = { addr: '', port: 0, proto: 0, scope: 0, slot: 0 };
  const v: SvcValue = { backend_id: 0, rev_nat_id: 0, count: 0, flags: 0, algorithm: 0, affinity_timeout: 0 };
  const entry = [k, v] as const;
  return (i) => {
    const s = slots[i]!;
    k.addr = s.key.addr;
    k.port = s.key.port;
    k.proto = s.key.proto;
    k.scope = s.key.scope;
    k.slot = s.slot;
    v.backend_id = s.backendId;
    return entry;
  };
}
