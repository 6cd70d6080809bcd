// Numbers by backend id, added to (a plan's change to each id's slot
// references: +1 per slot gained, -1 per slot lost), iterated in the order
// the ids came. A plan of a first full sync at 10k x 10 adds 100k of them: as
// a Map that was a third of the plan's time (its growth and hashing), here
// two typed arrays of entries and an IdIndex to them.
import { IdIndex } from './id-index.ts';
import { grown } from './open-addressing.ts';

/** Shared while empty (the first add grows both): a plan makes one of these. */
const NONE = new Float64Array(0);

export class IdDeltas {
  #n = 0;
  #ids = NONE;
  #vals = NONE;
  readonly #entryById = new IdIndex();

  get size(): number {
    return this.#n;
  }

  /** The sum for id, undefined when nothing was added for it. */
  get(id: number): number | undefined {
    const e = this.#entryById.get(id);
    return e < 0 ? undefined : this.#vals[e];
  }

  add(id: number, d: number): void {
    const e = this.#entryById.get(id);
    if (e >= 0) {
      this.#vals[e]! += d;
      return;
    }
    if (this.#n === this.#ids.length) this.#grow();
    const n = this.#n++;
    this.#ids[n] = id;
    this.#vals[n] = d;
    this.#entryById.add(id, n);
  }

  /** Every id and its sum, in order, without building an entry each (a full sync's commit reads 100k). */
  forEach(fn: (id: number, sum: number) => void): void {
    for (let e = 0; e < this.#n; e++) fn(this.#ids[e]!, this.#vals[e]!);
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

  #grow(): void {
    const n = Math.max(8, this.#ids.length * 2);
    this.#ids = grown(this.#ids, n);
    this.#vals = grown(this.#vals, n);
  }
}
