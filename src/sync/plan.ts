// The sync plan: desired frontends against what the maps hold, as ordered
// map operations. Pure. The order is what keeps live connections safe:
//
//   1 backends  2 reverse NAT  3 backend slots  4 masters (the new count)
//   5 removed masters  6 stale slots  7 stale reverse NAT  8 unreferenced backends
//
// A reader that finds a master always finds slots 1..count, and every slot
// names a backend that exists. Ids freed by this plan are not reused by it.
import type { BackendValue, RevNatValue, SvcKey, SvcValue } from '../maps/codecs.ts';
import { type FrontendState, type MapState, backendAddrKey, entryCounts } from './state.ts';
import type { FrontendTarget } from './targets.ts';

export interface Plan {
  backendUpserts: Array<[number, BackendValue]>;
  revNatUpserts: Array<[number, RevNatValue]>;
  slotUpserts: Array<[SvcKey, SvcValue]>;
  masterUpserts: Array<[SvcKey, SvcValue]>;
  masterDeletes: SvcKey[];
  slotDeletes: SvcKey[];
  revNatDeletes: number[];
  backendDeletes: number[];
  /** The state once the plan is applied. */
  next: MapState;
  /** Frontends written (added, changed or removed). */
  changed: string[];
  /** Frontends left as they were because a map is full, with the reason. */
  deferred: Array<{ id: string; label: string; reason: string }>;
}

export interface Capacity {
  services: number;
  backends: number;
  revNat: number;
}

export function planIsEmpty(p: Plan): boolean {
  return p.backendUpserts.length + p.revNatUpserts.length + p.slotUpserts.length + p.masterUpserts.length +
    p.masterDeletes.length + p.slotDeletes.length + p.revNatDeletes.length + p.backendDeletes.length === 0;
}

/** Allocates ids not used by the current state nor by this plan, starting after the highest seen. */
class IdAllocator {
  #used: Set<number>;
  #next: number;
  readonly #max: number;
  constructor(used: Iterable<number>, max: number) {
    this.#used = new Set(used);
    this.#max = max;
    let hi = 0;
    for (const id of this.#used) if (id > hi) hi = id;
    this.#next = hi + 1;
  }
  take(): number {
    for (let tries = 0; tries <= this.#max; tries++) {
      if (this.#next > this.#max) this.#next = 1;
      const id = this.#next++;
      if (!this.#used.has(id)) {
        this.#used.add(id);
        return id;
      }
    }
    throw new Error('no free id left');
  }
  release(id: number): void {
    this.#used.delete(id);
  }
}

const U32_MAX = 0xffffffff;

function sameBackend(a: BackendValue | undefined, b: BackendValue): boolean {
  return !!a && a.addr === b.addr && a.port === b.port && a.proto === b.proto && a.state === b.state && a.flags === b.flags && a.zone === b.zone;
}

function sameMaster(a: SvcValue, b: SvcValue): boolean {
  return a.rev_nat_id === b.rev_nat_id && a.count === b.count && a.flags === b.flags && a.algorithm === b.algorithm && a.affinity_timeout === b.affinity_timeout;
}

/**
 * New slot order from the old one: backends that stay keep their slot, a
 * removed backend's slot takes the last one (swap-remove), new backends are
 * appended. One backend out of ten costs one slot write, not ten.
 */
export function reconcileSlots(old: ReadonlyArray<number | undefined>, wanted: readonly number[]): number[] {
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

function svcKey(fe: { key: FrontendState['key'] }, slot: number): SvcKey {
  return { addr: fe.key.addr, port: fe.key.port, proto: fe.key.proto, scope: fe.key.scope, slot };
}

export function planSync(current: MapState, targets: readonly FrontendTarget[], capacity: Capacity): Plan {
  const plan: Plan = {
    backendUpserts: [], revNatUpserts: [], slotUpserts: [], masterUpserts: [],
    masterDeletes: [], slotDeletes: [], revNatDeletes: [], backendDeletes: [],
    next: { frontends: new Map(), backends: new Map(current.backends), revNat: new Map(current.revNat), straySlots: [] },
    changed: [], deferred: [],
  };
  const backendIds = new IdAllocator(current.backends.keys(), U32_MAX);
  const revNatIds = new IdAllocator(current.revNat.keys(), U32_MAX);
  const idByAddr = new Map<string, number>();
  for (const [id, be] of current.backends) {
    const k = backendAddrKey(be);
    if (!idByAddr.has(k)) idByAddr.set(k, id);
  }

  // Peak fill during the plan: new entries are written before any is deleted.
  const used = entryCounts(current);
  const budget = { services: capacity.services - used.services, backends: capacity.backends - used.backends, revNat: capacity.revNat - used.revNat };
  const upsertedBackend = new Map<number, BackendValue>();

  for (const t of targets) {
    const cur = current.frontends.get(t.id);
    const oldSlots = cur?.slots ?? [];

    // Backend ids, allocated tentatively until the frontend fits.
    const fresh: number[] = [];
    const pendingBackends: Array<[number, BackendValue]> = [];
    const ids: number[] = [];
    for (const be of t.backends) {
      const ak = backendAddrKey(be);
      let id = idByAddr.get(ak);
      if (id === undefined) {
        id = backendIds.take();
        fresh.push(id);
        idByAddr.set(ak, id);
      }
      ids.push(id);
      const have = upsertedBackend.get(id) ?? plan.next.backends.get(id);
      if (!sameBackend(have, be)) pendingBackends.push([id, be]);
    }
    const newSlots = reconcileSlots(oldSlots, ids);
    const definedOld = oldSlots.filter((s) => s !== undefined).length;
    const needServices = (cur ? 0 : 1) + Math.max(0, newSlots.length - definedOld);
    const needRevNat = cur && current.revNat.has(cur.master.rev_nat_id) ? 0 : 1;
    const lacking = needServices > budget.services ? 'services' : fresh.length > budget.backends ? 'backends' : needRevNat > budget.revNat ? 'reverse NAT' : '';
    if (lacking) {
      for (const id of fresh) {
        backendIds.release(id);
        const be = t.backends[ids.indexOf(id)]!;
        idByAddr.delete(backendAddrKey(be));
      }
      const cap = lacking === 'services' ? capacity.services : lacking === 'backends' ? capacity.backends : capacity.revNat;
      plan.deferred.push({ id: t.id, label: t.label, reason: `the ${lacking} map is full (${cap} entries)` });
      if (cur) plan.next.frontends.set(t.id, cur); // keeps serving what it had
      continue;
    }
    budget.services -= needServices;
    budget.backends -= fresh.length;
    budget.revNat -= needRevNat;
    for (const [id, be] of pendingBackends) {
      if (!upsertedBackend.has(id)) plan.backendUpserts.push([id, be]);
      else plan.backendUpserts[plan.backendUpserts.findIndex(([x]) => x === id)] = [id, be];
      upsertedBackend.set(id, be);
      plan.next.backends.set(id, be);
    }

    let changed = false;
    for (let i = 0; i < newSlots.length; i++) {
      if (oldSlots[i] !== newSlots[i]) {
        plan.slotUpserts.push([svcKey(t, i + 1), { backend_id: newSlots[i]!, rev_nat_id: 0, count: 0, flags: 0, algorithm: 0, affinity_timeout: 0 }]);
        changed = true;
      }
    }
    const revNatId = cur?.master.rev_nat_id || revNatIds.take();
    const rn: RevNatValue = { addr: t.key.addr, port: t.key.port };
    const haveRn = current.revNat.get(revNatId);
    if (!haveRn || haveRn.addr !== rn.addr || haveRn.port !== rn.port) {
      plan.revNatUpserts.push([revNatId, rn]);
      plan.next.revNat.set(revNatId, rn);
      changed = true;
    }
    const master: SvcValue = { backend_id: 0, rev_nat_id: revNatId, count: newSlots.length, flags: t.flags, algorithm: t.algorithm, affinity_timeout: t.affinityTimeout };
    if (!cur || !sameMaster(cur.master, master)) {
      plan.masterUpserts.push([svcKey(t, 0), master]);
      changed = true;
    }
    for (let i = newSlots.length; i < oldSlots.length; i++) {
      if (oldSlots[i] !== undefined) plan.slotDeletes.push(svcKey(t, i + 1));
      changed = true;
    }
    plan.next.frontends.set(t.id, { key: t.key, master, slots: newSlots });
    if (changed) plan.changed.push(t.id);
  }

  // Frontends no longer wanted: master first, then its slots.
  const wanted = new Set(targets.map((t) => t.id));
  for (const [id, fe] of current.frontends) {
    if (wanted.has(id)) continue;
    plan.masterDeletes.push(svcKey(fe, 0));
    fe.slots.forEach((s, i) => {
      if (s !== undefined) plan.slotDeletes.push(svcKey(fe, i + 1));
    });
    plan.changed.push(id);
  }
  plan.slotDeletes.push(...current.straySlots);

  // Reverse NAT and backends nothing refers to any more.
  const liveRevNat = new Set<number>();
  const liveBackends = new Set<number>();
  for (const fe of plan.next.frontends.values()) {
    liveRevNat.add(fe.master.rev_nat_id);
    for (const s of fe.slots) if (s !== undefined) liveBackends.add(s);
  }
  for (const id of plan.next.revNat.keys()) {
    if (!liveRevNat.has(id)) {
      plan.next.revNat.delete(id);
      if (current.revNat.has(id)) plan.revNatDeletes.push(id);
    }
  }
  for (const id of plan.next.backends.keys()) {
    if (!liveBackends.has(id)) {
      plan.next.backends.delete(id);
      if (current.backends.has(id)) plan.backendDeletes.push(id);
    }
  }
  return plan;
}
