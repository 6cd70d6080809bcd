// An in-memory stand-in for the maps, applying writes one element at a time
// so that tests can look at every intermediate state a reader could see, and
// answering single-entry reads as the read-back after a failure makes them.
import type { BackendValue, RevNatValue, SrcRangeKey, SvcKey, SvcValue } from '../../src/maps/codecs.ts';
import type { FamilyMaps } from '../../src/maps/datapath-maps.ts';
import type { MapWriter } from '../../src/sync/apply.ts';
import type { Capacity, SlotWrite } from '../../src/sync/plan.ts';
import type { MapSource } from '../../src/sync/syncer.ts';
import { svcSlotId } from '../../src/sync/plan.ts';
import { type MapState, stateFromEntries } from '../../src/sync/state.ts';
import type { FrontendTarget } from '../../src/sync/targets.ts';

const rk = (k: SrcRangeKey) => `${k.rev_nat_id}:${k.addr}/${k.prefixlen - 32}`;
const sk = (k: SvcKey) => `${k.addr}:${k.port}/${k.proto}/${k.scope}#${k.slot}`;

export class MemoryMaps implements MapSource, MapWriter {
  services = new Map<string, [SvcKey, SvcValue]>();
  backends = new Map<number, BackendValue>();
  revNat = new Map<number, RevNatValue>();
  srcRanges = new Map<string, SrcRangeKey>();
  /** Maglev tables by rev_nat_id (index 0: M). */
  maglev = new Map<number, Uint16Array>();
  cap: Capacity = { services: 1 << 20, backends: 1 << 20, revNat: 1 << 20, srcRanges: 1 << 20 };
  /** Called after every single element written or deleted. */
  onWrite: (what: string) => void = () => {};
  writes: string[] = [];

  readState(): MapState {
    const state = stateFromEntries(
      [...this.services.values()],
      [...this.backends],
      [...this.revNat],
      [...this.srcRanges.values()].map((k) => [k, 1] as const),
    );
    if (this.maglev.size) state.maglevSizes = new Map([...this.maglev].map(([id, tb]) => [id, tb[0]!]));
    return state;
  }
  capacity(): Capacity {
    return this.cap;
  }
  lookupServices(keys: readonly SvcKey[]): Array<SvcValue | undefined> {
    return keys.map((k) => {
      const e = this.services.get(sk(k));
      return e && { ...e[1] };
    });
  }
  lookupBackends(ids: readonly number[]): Array<BackendValue | undefined> {
    return ids.map((id) => {
      const v = this.backends.get(id);
      return v && { ...v };
    });
  }
  lookupRevNat(ids: readonly number[]): Array<RevNatValue | undefined> {
    return ids.map((id) => {
      const v = this.revNat.get(id);
      return v && { ...v };
    });
  }
  readSrcRanges(): SrcRangeKey[] {
    return [...this.srcRanges.values()].map((k) => ({ ...k }));
  }
  #check(size: number, max: number, name: string) {
    if (size > max) throw new Error(`${name} map full`);
  }
  putBackends(e: ReadonlyArray<readonly [number, BackendValue]>) {
    for (const [id, v] of e) {
      this.backends.set(id, { ...v });
      this.#check(this.backends.size, this.cap.backends, 'backends');
      this.#w(`backend+${id}`);
    }
  }
  putRevNat(e: ReadonlyArray<readonly [number, RevNatValue]>) {
    for (const [id, v] of e) {
      this.revNat.set(id, { ...v });
      this.#w(`revnat+${id}`);
    }
  }
  putServices(e: ReadonlyArray<readonly [SvcKey, SvcValue]>) {
    for (const [k, v] of e) {
      this.services.set(sk(k), [{ ...k }, { ...v }]);
      this.#check(this.services.size, this.cap.services, 'services');
      this.#w(`svc+${sk(k)}`);
    }
  }
  putSlots(slots: readonly SlotWrite[]) {
    this.putServices(
      slots.map(
        (s) =>
          [
            { ...s.key, slot: s.slot },
            { backend_id: s.backendId, rev_nat_id: 0, count: 0, flags: 0, algorithm: 0, affinity_timeout: 0 },
          ] as const,
      ),
    );
  }
  putSrcRanges(keys: readonly SrcRangeKey[]) {
    for (const k of keys) {
      this.srcRanges.set(rk(k), { ...k });
      this.#w(`range+${rk(k)}`);
    }
  }
  deleteSrcRanges(keys: readonly SrcRangeKey[]) {
    for (const k of keys) {
      if (!this.srcRanges.delete(rk(k))) throw new Error(`delete of missing range ${rk(k)}`);
      this.#w(`range-${rk(k)}`);
    }
  }
  deleteServices(keys: readonly SvcKey[]) {
    for (const k of keys) {
      if (!this.services.delete(sk(k))) throw new Error(`delete of missing ${sk(k)}`);
      this.#w(`svc-${sk(k)}`);
    }
  }
  deleteRevNat(ids: readonly number[]) {
    for (const id of ids) {
      if (!this.revNat.delete(id)) throw new Error(`delete of missing revnat ${id}`);
      this.#w(`revnat-${id}`);
    }
  }
  deleteBackends(ids: readonly number[]) {
    for (const id of ids) {
      if (!this.backends.delete(id)) throw new Error(`delete of missing backend ${id}`);
      this.#w(`backend-${id}`);
    }
  }
  putMaglev(tables: ReadonlyArray<readonly [number, Uint16Array]>) {
    for (const [id, tb] of tables) {
      this.maglev.set(id, tb.slice());
      this.#w(`maglev+${id}`);
    }
  }
  deleteMaglev(ids: readonly number[]) {
    // As MaglevTables.delete: a table already gone is no error (a retry after a failure deletes again).
    for (const id of ids) {
      this.maglev.delete(id);
      this.#w(`maglev-${id}`);
    }
  }
  #w(what: string) {
    this.writes.push(what);
    this.onWrite(what);
  }

  /** What a datapath reader resolves each frontend to: the backend addresses it can pick, or an error. */
  resolve(): Map<string, string[] | string> {
    const out = new Map<string, string[] | string>();
    for (const [k, v] of this.services.values()) {
      if (k.slot !== 0) continue;
      const fid = `${k.addr}:${k.port}/${k.proto}/${k.scope}`;
      const addrs: string[] = [];
      let err = '';
      for (let s = 1; s <= v.count; s++) {
        const slot = this.services.get(sk({ ...k, slot: s }));
        if (!slot) {
          err = `slot ${s} of ${fid} missing`;
          break;
        }
        const be = this.backends.get(slot[1].backend_id);
        if (!be) {
          err = `backend ${slot[1].backend_id} of ${fid} missing`;
          break;
        }
        addrs.push(`${be.addr}:${be.port}`);
      }
      if (!err && !this.revNat.has(v.rev_nat_id)) err = `revnat ${v.rev_nat_id} of ${fid} missing`;
      out.set(fid, err || addrs);
    }
    return out;
  }
}

/** "10.0.0.1:80", "10.0.0.1", "[fd00::1]:80" or "fd00::1" (port 8080 when none is given). */
function splitAddr(b: string): { addr: string; port: number } {
  const v6 = /^\[(.*)\]:(\d+)$/.exec(b);
  if (v6) return { addr: v6[1]!, port: Number(v6[2]) };
  if (b.split(':').length > 2) return { addr: b, port: 8080 };
  const [addr, p] = b.split(':');
  return { addr: addr!, port: Number(p ?? 8080) };
}

/** Addresses of one family for parameterised tests: host `n` of the VIP or pod range. */
export const FAMILIES = {
  4: { vip: (n: number) => `10.96.0.${n}`, pod: (n: number) => `10.244.0.${n}` },
  6: { vip: (n: number) => `fd00:10:96::${n.toString(16)}`, pod: (n: number) => `fd00:10:244::${n.toString(16)}` },
} as const;

/** What a datapath reader finds in real maps of one family: each frontend's backends, or what is broken. */
export function kernelView(maps: FamilyMaps): Map<string, string[] | string> {
  const m = new MemoryMaps();
  for (const [k, v] of maps.services.entries()) m.services.set(sk(k), [k, v]);
  for (const [id, v] of maps.backends.entries()) m.backends.set(id, v);
  for (const [id, v] of maps.revNat.entries()) m.revNat.set(id, v);
  return m.resolve();
}

let seq = 0;
export function target(vip: string, port: number, backends: string[], opts: Partial<FrontendTarget> = {}): FrontendTarget {
  const key = { addr: vip, port, proto: 6, scope: 0 };
  const label = `ns/svc${seq++}`;
  return {
    id: `${vip}:${port}/6/0`,
    key,
    flags: 1,
    algorithm: 0,
    affinityTimeout: 0,
    label,
    owner: `owner-${vip}`,
    sourceRanges: [],
    backends: backends.map((b) => {
      const { addr, port } = splitAddr(b);
      return { addr, port, proto: 6, state: 0, flags: 0, zone: 0 };
    }),
    ...opts,
  };
}

/** The tracked state in a comparable form (ids and all; not the id search cursors). */
export function normState(s: MapState) {
  const byKey = <K, V>(m: Iterable<[K, V]>) => [...m].sort((x, y) => (String(x[0]) < String(y[0]) ? -1 : 1));
  return {
    frontends: byKey(s.frontends).map(([id, fe]) => [id, fe.master, fe.slots]),
    backends: byKey(s.backends),
    revNat: byKey(s.revNat),
    srcRanges: byKey(s.srcRanges).map(([id, set]) => [id, [...set].sort()]),
    strays: s.straySlots.map(svcSlotId).sort(),
    refs: byKey(s.backends.refEntries()),
    counts: s.counts,
  };
}
