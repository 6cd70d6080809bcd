// The backends the maps hold, as the sync engine tracks them (MapState.backends):
// by id, like a Map<number, BackendValue>, but stored as columns (address,
// port, protocol, state, flags, zone) in rows reused as backends come and
// go, with the two indexes a plan needs on the same rows:
// - backend id by address (idOf): the first id that held an (address, port,
//   protocol); IPv4 addresses by value, others by their text;
// - how many slots refer to each id (refs).
// Both used to be Maps of 100k entries at 10k Services x 10 (the address key
// a double, a heap number each: 5.0 and 3.5 MiB), and the id -> row index a
// third (~3 MiB). Here the address index is an open-addressing table of row
// numbers (linear probing, deletion by backward shift) compared against the
// columns, 4 bytes a slot, at most half full, and rows by id an IdIndex.
// get() builds the value it returns; same() compares without building one.
import type { BackendValue } from '../../maps/codecs.ts';
import { parseIpv4 } from '../../util/ipv4.ts';
import { IdIndex } from './id-index.ts';
import { grown, homeSlot, movesBack } from './open-addressing.ts';

// Small enough for on-heap typed arrays (V8 keeps those of up to 64 bytes in its heap; larger ones cost a
// separate allocation each): most tables a partial plan makes hold one or two backends.
const INITIAL_ROWS = 8;
// Columns and index start empty, shared (never written: the first row grows
// them): a partial plan's table of its own upserts is made per plan, and most
// hold a backend or two.
const EMPTY = { u8: new Uint8Array(0), u16: new Uint16Array(0), u32: new Uint32Array(0), i32: new Int32Array(0), f64: new Float64Array(0) };

/** An (address, port, protocol) hash: IPv4 by value (ip >= 0), any other address by its text. */
function addrHash(ip: number, addr: string, port: number, proto: number): number {
  let h = ip;
  if (ip < 0) {
    h = 0x811c9dc5;
    for (let i = 0; i < addr.length; i++) h = Math.imul(h ^ addr.charCodeAt(i), 0x01000193);
  }
  return (h ^ Math.imul(port | (proto << 16), 0x85ebca6b)) | 0;
}

export class BackendTable {
  /** Rows in use or freed; the columns hold at least this many. */
  #rows = 0;
  readonly #free: number[] = [];
  #id = EMPTY.u32;
  /** 1: the row holds a backend; 0: free. */
  #live = EMPTY.u8;
  #addr: string[] = [];
  /** The address as a number when it is IPv4; -1 otherwise (compared by text). */
  #ip = EMPTY.f64;
  #port = EMPTY.u16;
  #proto = EMPTY.u8;
  #state = EMPTY.u8;
  #flags = EMPTY.u8;
  #zone = EMPTY.u16;
  #refs = EMPTY.u32;
  readonly #rowById = new IdIndex();
  /** Row + 1 by address hash (0: empty): the rows idOf() names. */
  #byAddr = EMPTY.i32;
  #addrBits = 0;
  #indexed = 0;
  /** References to ids that have no backend (a slot naming a missing entry, read from the maps). */
  readonly #orphanRefs = new Map<number, number>();

  get size(): number {
    return this.#rowById.size;
  }

  /** No backend and no reference to a missing one. */
  get empty(): boolean {
    return this.#rowById.size === 0 && this.#orphanRefs.size === 0;
  }

  has(id: number): boolean {
    return this.#rowOf(id) >= 0;
  }

  get(id: number): BackendValue | undefined {
    const r = this.#rowOf(id);
    if (r < 0) return undefined;
    return {
      addr: this.#addr[r]!,
      port: this.#port[r]!,
      proto: this.#proto[r]!,
      state: this.#state[r]!,
      flags: this.#flags[r]!,
      zone: this.#zone[r]!,
    };
  }

  /** Whether id holds exactly v (false when it holds nothing). */
  same(id: number, v: BackendValue): boolean {
    const r = this.#rowOf(id);
    return (
      r >= 0 &&
      this.#addr[r] === v.addr &&
      this.#port[r] === v.port &&
      this.#proto[r] === v.proto &&
      this.#state[r] === v.state &&
      this.#flags[r] === v.flags &&
      this.#zone[r] === v.zone
    );
  }

  /** The first id that held this address (as long as it holds it), if any. */
  idOf(b: { addr: string; port: number; proto: number }): number | undefined {
    if (this.#indexed === 0) return undefined;
    const ip = parseIpv4(b.addr);
    const r = this.#findAddr(addrHash(ip, b.addr, b.port, b.proto), ip, b.addr, b.port, b.proto);
    return r < 0 ? undefined : this.#id[r];
  }

  set(id: number, v: BackendValue): this {
    this.upsert(id, v);
    return this;
  }

  /** set(), saying whether id is new to the table. */
  upsert(id: number, v: BackendValue): boolean {
    // The map's own field widths (bpf/include/svcmap_maps.h); a value that does not fit would not have been written.
    if (v.port >>> 16 || v.proto >>> 8 || v.state >>> 8 || v.flags >>> 8 || v.zone >>> 16) {
      throw new Error(`backend ${id}: a field does not fit the backends map (${JSON.stringify(v)})`);
    }
    let r = this.#rowOf(id);
    const added = r < 0;
    if (r >= 0 && (this.#addr[r] !== v.addr || this.#port[r] !== v.port || this.#proto[r] !== v.proto)) {
      this.#unindexAddr(r); // its address changes: the index must not name it by the old one
    }
    if (r < 0) {
      r = this.#free.pop() ?? this.#newRow();
      this.#id[r] = id;
      this.#live[r] = 1;
      this.#rowById.add(id, r);
      const orphan = this.#orphanRefs.size ? this.#orphanRefs.get(id) : undefined;
      this.#refs[r] = orphan ?? 0;
      if (orphan !== undefined) this.#orphanRefs.delete(id);
    }
    const ip = parseIpv4(v.addr);
    this.#addr[r] = v.addr;
    this.#ip[r] = ip;
    this.#port[r] = v.port;
    this.#proto[r] = v.proto;
    this.#state[r] = v.state;
    this.#flags[r] = v.flags;
    this.#zone[r] = v.zone;
    const h = addrHash(ip, v.addr, v.port, v.proto);
    if (this.#findAddr(h, ip, v.addr, v.port, v.proto) < 0) this.#insertAddr(r, h);
    return added;
  }

  /** Removes the backend; references to its id stay counted (refs()), as they are the slots'. */
  delete(id: number): boolean {
    const r = this.#rowOf(id);
    if (r < 0) return false;
    this.#unindexAddr(r);
    this.#rowById.delete(id);
    if (this.#refs[r]) this.#orphanRefs.set(id, this.#refs[r]!);
    this.#addr[r] = '';
    this.#live[r] = 0;
    this.#refs[r] = 0;
    this.#free.push(r);
    return true;
  }

  /** How many slots refer to id. */
  refs(id: number): number {
    const r = this.#rowOf(id);
    return r >= 0 ? this.#refs[r]! : (this.#orphanRefs.get(id) ?? 0);
  }

  /** Adds d to the references of id if it holds a backend; says whether it does. */
  addRefsIfHeld(id: number, d: number): boolean {
    const r = this.#rowOf(id);
    if (r < 0) return false;
    const n = this.#refs[r]! + d;
    this.#refs[r] = n > 0 ? n : 0;
    return true;
  }

  /** Adds d (negative: takes away) to id's references; none left (<= 0): forgotten. */
  addRefs(id: number, d: number): void {
    const r = this.#rowOf(id);
    const n = (r >= 0 ? this.#refs[r]! : (this.#orphanRefs.get(id) ?? 0)) + d;
    if (r >= 0) this.#refs[r] = n > 0 ? n : 0;
    else if (n > 0) this.#orphanRefs.set(id, n);
    else this.#orphanRefs.delete(id);
  }

  /** Forgets id's references. */
  clearRefs(id: number): void {
    const r = this.#rowOf(id);
    if (r >= 0) this.#refs[r] = 0;
    else this.#orphanRefs.delete(id);
  }

  /** Every id with references, and how many. */
  *refEntries(): IterableIterator<[number, number]> {
    for (let r = 0; r < this.#rows; r++) if (this.#refs[r]) yield [this.#id[r]!, this.#refs[r]!];
    yield* this.#orphanRefs;
  }

  /** The distinct zone ids (svcmap_zones) the backends hold, 0 left out; without building the values. */
  zoneIds(): Set<number> {
    const out = new Set<number>();
    for (let r = 0; r < this.#rows; r++) if (this.#live[r] && this.#zone[r]) out.add(this.#zone[r]!);
    return out;
  }

  *keys(): IterableIterator<number> {
    for (let r = 0; r < this.#rows; r++) if (this.#live[r]) yield this.#id[r]!;
  }

  *entries(): IterableIterator<[number, BackendValue]> {
    for (const id of this.keys()) yield [id, this.get(id)!];
  }

  [Symbol.iterator](): IterableIterator<[number, BackendValue]> {
    return this.entries();
  }

  #rowOf(id: number): number {
    return this.#rowById.get(id);
  }

  /** The row the index names for this address (h: its addrHash), -1 if none. */
  #findAddr(h: number, ip: number, addr: string, port: number, proto: number): number {
    if (this.#indexed === 0) return -1;
    const mask = this.#byAddr.length - 1;
    for (let s = homeSlot(h, this.#addrBits); ; s = (s + 1) & mask) {
      const x = this.#byAddr[s]!;
      if (x === 0) return -1;
      const r = x - 1;
      if (this.#ip[r] === ip && this.#port[r] === port && this.#proto[r] === proto && (ip >= 0 || this.#addr[r] === addr)) return r;
    }
  }

  #addrHome(r: number): number {
    return homeSlot(this.#addrHashOf(r), this.#addrBits);
  }

  #addrHashOf(r: number): number {
    return addrHash(this.#ip[r]!, this.#addr[r]!, this.#port[r]!, this.#proto[r]!);
  }

  #insertAddr(r: number, h: number): void {
    this.#indexed++;
    if (2 * this.#indexed > this.#byAddr.length) {
      const old = this.#byAddr;
      this.#addrBits = Math.max(this.#addrBits + 1, Math.log2(2 * INITIAL_ROWS));
      this.#byAddr = new Int32Array(1 << this.#addrBits);
      for (const x of old) if (x) this.#putAddr(x - 1, this.#addrHashOf(x - 1));
    }
    this.#putAddr(r, h);
  }

  #putAddr(r: number, h: number): void {
    const mask = this.#byAddr.length - 1;
    let s = homeSlot(h, this.#addrBits);
    while (this.#byAddr[s]) s = (s + 1) & mask;
    this.#byAddr[s] = r + 1;
  }

  /**
   * Takes row r out of the address index if it is the row the index names
   * for its address, moving back the entries after it that linear probing
   * would otherwise cut off from their home slot.
   */
  #unindexAddr(r: number): void {
    if (this.#indexed === 0) return;
    const slots = this.#byAddr;
    const mask = slots.length - 1;
    let s = this.#addrHome(r);
    while (slots[s] && slots[s] !== r + 1) s = (s + 1) & mask;
    if (!slots[s]) return;
    this.#indexed--;
    for (let j = (s + 1) & mask; slots[j]; j = (j + 1) & mask) {
      const h = this.#addrHome(slots[j]! - 1);
      if (movesBack(s, j, h)) {
        slots[s] = slots[j]!;
        s = j;
      }
    }
    slots[s] = 0;
  }

  #newRow(): number {
    const r = this.#rows++;
    if (r === this.#port.length) {
      const n = Math.max(INITIAL_ROWS, this.#port.length * 2);
      this.#id = grown(this.#id, n);
      this.#live = grown(this.#live, n);
      this.#ip = grown(this.#ip, n);
      this.#port = grown(this.#port, n);
      this.#proto = grown(this.#proto, n);
      this.#state = grown(this.#state, n);
      this.#flags = grown(this.#flags, n);
      this.#zone = grown(this.#zone, n);
      this.#refs = grown(this.#refs, n);
    }
    return r;
  }
}
