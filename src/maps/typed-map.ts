// A BPF map seen through its codecs: typed reads and writes, and batches that
// pack many entries into one syscall.
import type { BpfMap } from '../bpf/map.ts';
import type { MapSpec } from './registry.ts';

export class TypedMap<K, V> {
  readonly spec: MapSpec<K, V>;
  readonly raw: BpfMap;
  readonly #keySize: number;
  readonly #valueSize: number;

  constructor(spec: MapSpec<K, V>, raw: BpfMap) {
    this.spec = spec;
    this.raw = raw;
    this.#keySize = spec.key.layout.size;
    this.#valueSize = spec.value.layout.size;
    if (raw.keySize !== this.#keySize || raw.valueSize !== this.#valueSize) {
      throw new Error(`map ${raw.label}: key/value sizes ${raw.keySize}/${raw.valueSize} do not match the codecs ${this.#keySize}/${this.#valueSize}`);
    }
  }

  encodeKey(k: K): Buffer {
    const b = Buffer.alloc(this.#keySize);
    this.spec.key.encode(k, b, 0);
    return b;
  }

  get(k: K): V | undefined {
    const v = this.raw.lookup(this.encodeKey(k));
    return v ? this.spec.value.decode(v, 0) : undefined;
  }

  put(k: K, v: V): void {
    const vb = Buffer.alloc(this.#valueSize);
    this.spec.value.encode(v, vb, 0);
    this.raw.update(this.encodeKey(k), vb);
  }

  delete(k: K): boolean {
    return this.raw.delete(this.encodeKey(k));
  }

  entries(): Array<[K, V]> {
    return this.raw.entries().map(([kb, vb]) => [this.spec.key.decode(kb, 0), this.spec.value.decode(vb, 0)]);
  }

  putMany(entries: ReadonlyArray<readonly [K, V]>): void {
    this.putEach(entries.length, (i) => entries[i]!);
  }

  /**
   * Writes n entries produced one at a time by at(i), which may return the
   * same (mutated) objects each time: no per-entry allocation for big batches.
   */
  putEach(n: number, at: (i: number) => readonly [K, V]): void {
    if (n === 0) return;
    const keys = Buffer.alloc(n * this.#keySize);
    const values = Buffer.alloc(n * this.#valueSize);
    for (let i = 0; i < n; i++) {
      const [k, v] = at(i);
      this.spec.key.encode(k, keys, i * this.#keySize);
      this.spec.value.encode(v, values, i * this.#valueSize);
    }
    this.raw.updateBatch(keys, values, n);
  }

  deleteMany(keys: readonly K[]): void {
    const n = keys.length;
    if (n === 0) return;
    const buf = Buffer.alloc(n * this.#keySize);
    for (let i = 0; i < n; i++) this.spec.key.encode(keys[i]!, buf, i * this.#keySize);
    this.raw.deleteBatch(buf, n);
  }
}
