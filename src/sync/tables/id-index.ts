// A non-negative integer (a row, an entry number) by backend id, for the
// sync engine's packed tables. Ids are handed out in sequence, so most are
// small and close together: those are an array indexed by id (a full sync's
// 100k lookups walk it in order; a hash table missed the cache on each),
// grown up to twice the entries held (+ 1024), never past that however high
// the ids climb. Higher ids go to an open-addressing hash table (linear
// probing, Fibonacci hashing, deletion by backward shift).
import { grown, homeSlot, movesBack } from './open-addressing.ts';

const DENSE_SLACK = 1024;
const DENSE_MIN = 16;
// Both parts start empty, shared (never written: the first add grows them):
// a partial plan makes a few of these per plan and adds a handful of ids.
const NONE_I32 = new Int32Array(0);
const NONE_F64 = new Float64Array(0);

export class IdIndex {
  /** Value + 1 by id (0: none), for ids below its length. */
  #dense = NONE_I32;
  #n = 0;
  /** Ids at or past the dense array: keys and value + 1 (0: empty slot), at most half full. */
  #keys = NONE_F64;
  #vals = NONE_I32;
  #bits = 2;
  #hashed = 0;

  get size(): number {
    return this.#n;
  }

  /** The value for id, -1 when none. */
  get(id: number): number {
    if (id < this.#dense.length) return this.#dense[id]! - 1;
    if (this.#hashed === 0) return -1;
    const s = this.#slot(id);
    return s < 0 ? -1 : this.#vals[s]! - 1;
  }

  /** Sets the value of an id that has none. */
  add(id: number, v: number): void {
    this.#n++;
    if (id >= this.#dense.length && id < 2 * this.#n + DENSE_SLACK) this.#growDense(id);
    if (id < this.#dense.length) {
      this.#dense[id] = v + 1;
      return;
    }
    if (2 * (this.#hashed + 1) > this.#keys.length) this.#rehash(this.#bits + 1);
    this.#hashed++;
    this.#put(id, v + 1);
  }

  /** Changes the value of an id that has one. */
  replace(id: number, v: number): void {
    if (id < this.#dense.length) this.#dense[id] = v + 1;
    else this.#vals[this.#slot(id)] = v + 1;
  }

  delete(id: number): void {
    if (id < this.#dense.length) {
      if (this.#dense[id]) this.#n--;
      this.#dense[id] = 0;
      return;
    }
    if (this.#hashed === 0) return;
    let s = this.#slot(id);
    if (s < 0) return;
    this.#n--;
    this.#hashed--;
    const mask = this.#keys.length - 1;
    for (let j = (s + 1) & mask; this.#vals[j]; j = (j + 1) & mask) {
      const h = this.#home(this.#keys[j]!);
      if (movesBack(s, j, h)) {
        this.#keys[s] = this.#keys[j]!;
        this.#vals[s] = this.#vals[j]!;
        s = j;
      }
    }
    this.#vals[s] = 0;
  }

  #home(id: number): number {
    return homeSlot(id, this.#bits);
  }

  #slot(id: number): number {
    const mask = this.#keys.length - 1;
    for (let s = this.#home(id); this.#vals[s]; s = (s + 1) & mask) if (this.#keys[s] === id) return s;
    return -1;
  }

  #put(id: number, stored: number): void {
    const mask = this.#keys.length - 1;
    let s = this.#home(id);
    while (this.#vals[s]) s = (s + 1) & mask;
    this.#keys[s] = id;
    this.#vals[s] = stored;
  }

  #rehash(bits: number): void {
    const [keys, vals] = [this.#keys, this.#vals];
    this.#bits = bits;
    this.#keys = new Float64Array(1 << bits);
    this.#vals = new Int32Array(1 << bits);
    this.#hashed = 0;
    for (let s = 0; s < vals.length; s++) {
      if (!vals[s]) continue;
      // Hashed ids the grown dense array now covers move there.
      if (keys[s]! < this.#dense.length) this.#dense[keys[s]!] = vals[s]!;
      else {
        this.#hashed++;
        this.#put(keys[s]!, vals[s]!);
      }
    }
  }

  #growDense(id: number): void {
    let n = Math.max(DENSE_MIN, this.#dense.length);
    while (n <= id) n *= 2;
    this.#dense = grown(this.#dense, n);
    if (this.#hashed) this.#rehash(this.#bits);
  }
}
