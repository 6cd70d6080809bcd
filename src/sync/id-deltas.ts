// Numbers by backend id, added to (a plan's change to each id's slot
// references: +1 per slot gained, -1 per slot lost), iterated in the order
// the ids came. A plan of a first full sync at 10k x 10 adds 100k of them: as
// a Map that was a third of the plan's time (its growth and hashing), here an
// open-addressing table of entry numbers over two typed arrays.
import { home } from './backend-table.ts';

export class IdDeltas {
  #n = 0;
  #ids = new Float64Array(16);
  #vals = new Float64Array(16);
  /** Entry + 1 by id hash (0: empty), at most half full. */
  #slots = new Int32Array(32);
  #bits = 5;

  get size(): number {
    return this.#n;
  }

  /** The sum for id, undefined when nothing was added for it. */
  get(id: number): number | undefined {
    const e = this.#find(id);
    return e < 0 ? undefined : this.#vals[e];
  }

  add(id: number, d: number): void {
    const e = this.#find(id);
    if (e >= 0) {
      this.#vals[e]! += d;
      return;
    }
    if (this.#n === this.#ids.length) this.#grow();
    const n = this.#n++;
    this.#ids[n] = id;
    this.#vals[n] = d;
    this.#place(n);
  }

  *keys(): IterableIterator<number> {
    for (let e = 0; e < this.#n; e++) yield this.#ids[e]!;
  }

  *entries(): IterableIterator<[number, number]> {
    for (let e = 0; e < this.#n; e++) yield [this.#ids[e]!, this.#vals[e]!];
  }

  [Symbol.iterator](): IterableIterator<[number, number]> {
    return this.entries();
  }

  #find(id: number): number {
    const mask = this.#slots.length - 1;
    for (let s = home(id, this.#bits); ; s = (s + 1) & mask) {
      const x = this.#slots[s]!;
      if (x === 0) return -1;
      if (this.#ids[x - 1] === id) return x - 1;
    }
  }

  #place(e: number): void {
    const mask = this.#slots.length - 1;
    let s = home(this.#ids[e]!, this.#bits);
    while (this.#slots[s]) s = (s + 1) & mask;
    this.#slots[s] = e + 1;
  }

  #grow(): void {
    const n = this.#ids.length * 2;
    const ids = new Float64Array(n);
    ids.set(this.#ids);
    const vals = new Float64Array(n);
    vals.set(this.#vals);
    this.#ids = ids;
    this.#vals = vals;
    this.#bits++;
    this.#slots = new Int32Array(1 << this.#bits);
    for (let e = 0; e < this.#n; e++) this.#place(e);
  }
}
