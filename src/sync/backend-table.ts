// The backends the maps hold, as the sync engine tracks them (MapState.backends):
// by id, like a Map<number, BackendValue>, but stored as columns (address,
// port, protocol, state, flags, zone) in rows reused as backends come and
// go. A Map of 100k BackendValue objects took 10.4 MiB of the agent's heap at
// 10k Services x 10; the columns and the id -> row index take under half.
// get() builds the value it returns (a plan reads each backend once or twice).
import type { BackendValue } from '../maps/codecs.ts';

const INITIAL_ROWS = 64;

function grown<T extends Uint8Array | Uint16Array>(a: T, rows: number): T {
  const next = new (a.constructor as new (n: number) => T)(rows);
  next.set(a);
  return next;
}

export class BackendTable {
  readonly #row = new Map<number, number>();
  readonly #free: number[] = [];
  #rows = 0;
  #addr: string[] = [];
  #port = new Uint16Array(INITIAL_ROWS);
  #proto = new Uint8Array(INITIAL_ROWS);
  #state = new Uint8Array(INITIAL_ROWS);
  #flags = new Uint8Array(INITIAL_ROWS);
  #zone = new Uint16Array(INITIAL_ROWS);

  get size(): number {
    return this.#row.size;
  }

  has(id: number): boolean {
    return this.#row.has(id);
  }

  get(id: number): BackendValue | undefined {
    const r = this.#row.get(id);
    if (r === undefined) return undefined;
    return { addr: this.#addr[r]!, port: this.#port[r]!, proto: this.#proto[r]!, state: this.#state[r]!, flags: this.#flags[r]!, zone: this.#zone[r]! };
  }

  set(id: number, v: BackendValue): this {
    // The map's own field widths (bpf/include/svcmap_maps.h); a value that does not fit would not have been written.
    if (v.port >>> 16 || v.proto >>> 8 || v.state >>> 8 || v.flags >>> 8 || v.zone >>> 16) {
      throw new Error(`backend ${id}: a field does not fit the backends map (${JSON.stringify(v)})`);
    }
    let r = this.#row.get(id);
    if (r === undefined) {
      r = this.#free.pop() ?? this.#newRow();
      this.#row.set(id, r);
    }
    this.#addr[r] = v.addr;
    this.#port[r] = v.port;
    this.#proto[r] = v.proto;
    this.#state[r] = v.state;
    this.#flags[r] = v.flags;
    this.#zone[r] = v.zone;
    return this;
  }

  delete(id: number): boolean {
    const r = this.#row.get(id);
    if (r === undefined) return false;
    this.#row.delete(id);
    this.#addr[r] = '';
    this.#free.push(r);
    return true;
  }

  /** The distinct zone ids (svcmap_zones) the backends hold, 0 left out; without building the values. */
  zoneIds(): Set<number> {
    const out = new Set<number>();
    for (const r of this.#row.values()) if (this.#zone[r]) out.add(this.#zone[r]!);
    return out;
  }

  keys(): IterableIterator<number> {
    return this.#row.keys();
  }

  *entries(): IterableIterator<[number, BackendValue]> {
    for (const id of this.#row.keys()) yield [id, this.get(id)!];
  }

  [Symbol.iterator](): IterableIterator<[number, BackendValue]> {
    return this.entries();
  }

  #newRow(): number {
    const r = this.#rows++;
    if (r === this.#port.length) {
      const n = this.#port.length * 2;
      this.#port = grown(this.#port, n);
      this.#proto = grown(this.#proto, n);
      this.#state = grown(this.#state, n);
      this.#flags = grown(this.#flags, n);
      this.#zone = grown(this.#zone, n);
    }
    return r;
  }
}
