// A BPF map seen through its codecs: typed reads and writes, and batches that
// pack many entries into one syscall.
import { BatchError, type BpfMap } from '../bpf/map.ts';
import type { MapSpec } from './registry.ts';

/**
 * Batches are encoded into one buffer shared by every map (the agent is one
 * thread and a batch is written before the next is encoded) and written in
 * chunks of what fits: a full sync at 10k x 10 writes 100k slots and 100k
 * backends, which as whole batches allocated 3.2 + 2.4 MiB per sync. A
 * batch was never atomic (the kernel writes it entry by entry and says how
 * far it got); a failed chunk reports its place in the whole batch.
 */
const SCRATCH_BYTES = 256 * 1024;
let scratch: Buffer | undefined;

/** Entries of this many bytes per chunk: at least one. */
function chunkOf(entryBytes: number): { buf: Buffer; entries: number } {
  scratch ??= Buffer.allocUnsafe(SCRATCH_BYTES);
  if (entryBytes > scratch.length) scratch = Buffer.allocUnsafe(entryBytes);
  return { buf: scratch, entries: Math.floor(scratch.length / entryBytes) };
}

/** Runs a chunk's write; a BatchError is told where in the whole batch it stopped. */
function inBatch<T>(from: number, total: number, write: () => T): T {
  try {
    return write();
  } catch (err) {
    if (!(err instanceof BatchError) || (from === 0 && err.requested === total)) throw err;
    throw new BatchError(err.op, -err.errno, from + err.processed, total);
  }
}

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
      throw new Error(
        `map ${raw.label}: key/value sizes ${raw.keySize}/${raw.valueSize} do not match the codecs ${this.#keySize}/${this.#valueSize}`,
      );
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

  /** Every entry, decoded straight from the batches the kernel fills (no Buffer per key and value). */
  entries(): Array<[K, V]> {
    const out: Array<[K, V]> = [];
    const ks = this.#keySize;
    const vs = this.#valueSize;
    const decKey = this.spec.key.decode;
    const decValue = this.spec.value.decode;
    this.raw.eachEntryChunk((keys, values, n) => {
      for (let i = 0; i < n; i++) out.push([decKey(keys, i * ks), decValue(values, i * vs)]);
    });
    return out;
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
    const ks = this.#keySize;
    const vs = this.#valueSize;
    const { buf, entries } = chunkOf(ks + vs);
    const encKey = this.spec.key.encode;
    const encValue = this.spec.value.encode;
    for (let from = 0; from < n; from += entries) {
      const c = Math.min(entries, n - from);
      const keys = buf.subarray(0, c * ks);
      const values = buf.subarray(c * ks, c * (ks + vs));
      for (let i = 0; i < c; i++) {
        const e = at(from + i);
        encKey(e[0], keys, i * ks);
        encValue(e[1], values, i * vs);
      }
      inBatch(from, n, () => this.raw.updateBatch(keys, values, c));
    }
  }

  deleteMany(keys: readonly K[]): void {
    const n = keys.length;
    if (n === 0) return;
    const ks = this.#keySize;
    const { buf, entries } = chunkOf(ks);
    const encKey = this.spec.key.encode;
    for (let from = 0; from < n; from += entries) {
      const c = Math.min(entries, n - from);
      const chunk = buf.subarray(0, c * ks);
      for (let i = 0; i < c; i++) encKey(keys[from + i]!, chunk, i * ks);
      inBatch(from, n, () => this.raw.deleteBatch(chunk, c));
    }
  }
}
