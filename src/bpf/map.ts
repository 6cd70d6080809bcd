// One BPF map by file descriptor: element and batch operations with every
// buffer length checked against the map's key and value sizes (the FFI
// cannot check them), and every failure turned into a BpfError.
import { closeSync, readFileSync } from 'node:fs';
import { BpfError, errnoNumber } from './errors.ts';
import { cString, native } from './native.ts';

export const BPF_ANY = 0n;
export const BPF_NOEXIST = 1n;

export const MAP_TYPE_NAMES: Record<number, string> = {
  1: 'hash',
  2: 'array',
  9: 'lru_hash',
  13: 'hash_of_maps',
  11: 'lpm_trie',
  10: 'lru_percpu_hash',
  5: 'percpu_hash',
  6: 'percpu_array',
  24: 'sk_storage',
};

/** Map types whose value is one per possible CPU (BPF_MAP_TYPE_PERCPU_HASH, _ARRAY, LRU_PERCPU_HASH). */
const PERCPU_TYPES = new Set([5, 6, 10]);
const ARRAY_TYPES = new Set([2, 6]);
const BPF_MAP_TYPE_PERCPU_ARRAY = 6;

/** A CPU list as the kernel prints it ("0-3", "0,2-5"): the CPUs it names. */
export function parseCpuList(text: string): number[] {
  const out: number[] = [];
  for (const part of text.trim().split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) throw new Error(`not a CPU list: ${JSON.stringify(text)}`);
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (hi < lo) throw new Error(`not a CPU list: ${JSON.stringify(text)}`);
    for (let c = lo; c <= hi; c++) out.push(c);
  }
  return out;
}

let possibleCpus: number | undefined;
/** How many values a per-CPU map holds per key: one per possible CPU, as the kernel copies them. */
export function numPossibleCpus(): number {
  possibleCpus ??= parseCpuList(readFileSync('/sys/devices/system/cpu/possible', 'utf8')).length;
  return possibleCpus;
}

export interface MapInfo {
  type: number;
  id: number;
  keySize: number;
  valueSize: number;
  maxEntries: number;
  flags: number;
  name: string;
}

const ENOENT = errnoNumber('ENOENT');
const ENOSPC = errnoNumber('ENOSPC');
const EINVAL = errnoNumber('EINVAL');
const ENOTSUPP = 524; // kernel-internal "not supported" that batch ops return for some map types

export function mapInfoByFd(fd: number): MapInfo {
  const u32 = () => Buffer.alloc(4);
  const [type, id, keySize, valueSize, maxEntries, flags] = [u32(), u32(), u32(), u32(), u32(), u32()];
  const name = Buffer.alloc(32);
  const rc = native().mapInfo(fd, type, id, keySize, valueSize, maxEntries, flags, name, name.length) as number;
  if (rc < 0) throw new BpfError(`map info of fd ${fd}`, rc, libbpfText(rc));
  return {
    type: type.readUInt32LE(),
    id: id.readUInt32LE(),
    keySize: keySize.readUInt32LE(),
    valueSize: valueSize.readUInt32LE(),
    maxEntries: maxEntries.readUInt32LE(),
    flags: flags.readUInt32LE(),
    name: cString(name),
  };
}

export function libbpfText(rc: number): string {
  const buf = Buffer.alloc(256);
  native().strerror(rc, buf, buf.length);
  return cString(buf);
}

export class BpfMap {
  readonly fd: number;
  readonly info: MapInfo;
  /** What errors call this map: the pin path or the map name. */
  readonly label: string;
  #closed = false;
  #batchOk = true;
  #owned: boolean;

  /** owned: close() closes the fd (false for an fd a loaded BpfObject owns). */
  constructor(fd: number, label?: string, owned = true) {
    this.fd = fd;
    this.info = mapInfoByFd(fd);
    this.label = label ?? this.info.name;
    this.#owned = owned;
  }

  /** Opens a pinned map; the fd is owned by the returned object. */
  static openPinned(path: string): BpfMap {
    const fd = native().objGet(path) as number;
    if (fd < 0) throw new BpfError(`open pinned map ${path}`, fd, libbpfText(fd));
    return new BpfMap(fd, path);
  }

  /** A new unpinned map (tests of the codecs and writers; the inner maps of a map of maps). */
  static create(type: number, name: string, keySize: number, valueSize: number, maxEntries: number, mapFlags = 0): BpfMap {
    if (name.length > 15) throw new Error(`map name ${name} is longer than 15 characters`);
    let opts: Buffer | null = null;
    if (mapFlags) {
      // struct bpf_map_create_opts up to map_ifindex (48 bytes): sz at 0, map_flags at 28.
      opts = Buffer.alloc(48);
      opts.writeBigUInt64LE(48n, 0);
      opts.writeUInt32LE(mapFlags, 28);
    }
    const fd = native().mapCreate(type, name, keySize, valueSize, maxEntries, opts) as number;
    if (fd < 0) throw new BpfError(`create map ${name}`, fd, libbpfText(fd));
    return new BpfMap(fd, name);
  }

  /** The map with kernel id `id` (e.g. an inner map, from its outer map's value); the fd is owned. */
  static fromId(id: number, label?: string): BpfMap {
    const fd = native().mapGetFdById(id) as number;
    if (fd < 0) throw new BpfError(`open map id ${id}`, fd, libbpfText(fd));
    return new BpfMap(fd, label);
  }

  get keySize(): number {
    return this.info.keySize;
  }
  get valueSize(): number {
    return this.info.valueSize;
  }
  get maxEntries(): number {
    return this.info.maxEntries;
  }
  /** One value per possible CPU: read with lookupPerCpu(). */
  get isPerCpu(): boolean {
    return PERCPU_TYPES.has(this.info.type);
  }

  /** Per-CPU maps hold nCPU values per key: a one-value buffer would be overrun. */
  #notPerCpu(op: string): void {
    if (this.isPerCpu) throw new Error(`${op} ${this.label}: a per-CPU map; read it with lookupPerCpu()`);
  }

  #checkKey(key: Buffer, op: string): void {
    if (key.length !== this.keySize) {
      throw new Error(`${op} ${this.label}: key is ${key.length} bytes, the map's key_size is ${this.keySize}`);
    }
  }

  #checkValue(value: Buffer, op: string): void {
    if (value.length !== this.valueSize) {
      throw new Error(`${op} ${this.label}: value is ${value.length} bytes, the map's value_size is ${this.valueSize}`);
    }
  }

  #fail(op: string, rc: number): never {
    throw new BpfError(`${op} ${this.label}`, rc, libbpfText(rc));
  }

  lookup(key: Buffer): Buffer | undefined {
    this.#checkKey(key, 'lookup');
    this.#notPerCpu('lookup');
    const value = Buffer.alloc(this.valueSize);
    const rc = native().mapLookup(this.fd, key, value) as number;
    if (rc === -ENOENT) return undefined;
    if (rc < 0) this.#fail('lookup', rc);
    return value;
  }

  /** A per-CPU map's values for key, one buffer of value_size bytes per possible CPU. */
  lookupPerCpu(key: Buffer): Buffer[] | undefined {
    this.#checkKey(key, 'lookup');
    if (!this.isPerCpu) throw new Error(`lookup ${this.label}: not a per-CPU map`);
    const stride = Math.ceil(this.valueSize / 8) * 8; // the kernel copies each CPU's value 8-byte aligned
    const n = numPossibleCpus();
    const all = Buffer.alloc(stride * n);
    const rc = native().mapLookup(this.fd, key, all) as number;
    if (rc === -ENOENT) return undefined;
    if (rc < 0) this.#fail('lookup', rc);
    return Array.from({ length: n }, (_, i) => Buffer.from(all.subarray(i * stride, i * stride + this.valueSize)));
  }

  /**
   * A per-CPU array's values at indexes first .. first+count-1 in one
   * BPF_MAP_LOOKUP_BATCH (one syscall where lookupPerCpu() takes one per
   * index): for each index, one value_size (8-byte aligned) slot per possible CPU.
   */
  lookupPerCpuRange(first: number, count: number): Buffer {
    if (this.info.type !== BPF_MAP_TYPE_PERCPU_ARRAY) throw new Error(`lookup range ${this.label}: not a per-CPU array`);
    if (!Number.isInteger(first) || !Number.isInteger(count) || first < 0 || count < 1 || first + count > this.maxEntries) {
      throw new RangeError(`lookup range ${this.label}: indexes ${first}+${count} outside 0..${this.maxEntries - 1}`);
    }
    const perIndex = Math.ceil(this.valueSize / 8) * 8 * numPossibleCpus();
    // An array's batch token is the last index read: start after first-1 (no token: at 0).
    let inBatch: Buffer | null = null;
    if (first > 0) {
      inBatch = Buffer.alloc(4);
      inBatch.writeUInt32LE(first - 1);
    }
    const keys = Buffer.alloc(4 * count);
    const values = Buffer.alloc(perIndex * count);
    const n = Buffer.alloc(4);
    n.writeUInt32LE(count);
    const rc = native().mapLookupBatch(this.fd, inBatch, Buffer.alloc(4), keys, values, n) as number;
    if (rc < 0 && rc !== -ENOENT) this.#fail('lookup batch', rc);
    if (n.readUInt32LE() !== count) throw new Error(`lookup range ${this.label}: read ${n.readUInt32LE()} of ${count} indexes`);
    return values;
  }

  update(key: Buffer, value: Buffer, flags: bigint = BPF_ANY): void {
    this.#checkKey(key, 'update');
    this.#notPerCpu('update');
    this.#checkValue(value, 'update');
    const rc = native().mapUpdate(this.fd, key, value, flags) as number;
    if (rc < 0) this.#fail('update', rc);
  }

  /** Writes a per-CPU map's values for key, one buffer of value_size bytes per possible CPU. */
  updatePerCpu(key: Buffer, values: readonly Buffer[], flags: bigint = BPF_ANY): void {
    this.#checkKey(key, 'update');
    if (!this.isPerCpu) throw new Error(`update ${this.label}: not a per-CPU map`);
    const stride = Math.ceil(this.valueSize / 8) * 8;
    const n = numPossibleCpus();
    if (values.length !== n) throw new Error(`update ${this.label}: ${values.length} values for ${n} possible CPUs`);
    const all = Buffer.alloc(stride * n);
    values.forEach((v, i) => {
      this.#checkValue(v, 'update');
      v.copy(all, i * stride);
    });
    const rc = native().mapUpdate(this.fd, key, all, flags) as number;
    if (rc < 0) this.#fail('update', rc);
  }

  /** False when the key was not there. */
  delete(key: Buffer): boolean {
    this.#checkKey(key, 'delete');
    const rc = native().mapDelete(this.fd, key) as number;
    if (rc === -ENOENT) return false;
    if (rc < 0) this.#fail('delete', rc);
    return true;
  }

  /** Every key, one syscall each; use entries() for bulk reads. */
  keys(): Buffer[] {
    const out: Buffer[] = [];
    let prev: Buffer | null = null;
    for (;;) {
      const next = Buffer.alloc(this.keySize);
      const rc = native().mapNextKey(this.fd, prev, next) as number;
      if (rc === -ENOENT) return out;
      if (rc < 0) this.#fail('next key', rc);
      out.push(next);
      prev = next;
    }
  }

  /** Every entry, read with BPF_MAP_LOOKUP_BATCH where the kernel has it; each key and value a Buffer of its own. */
  entries(): Array<[Buffer, Buffer]> {
    const out: Array<[Buffer, Buffer]> = [];
    this.eachEntryChunk((keys, values, n) => {
      for (let i = 0; i < n; i++) {
        out.push([
          Buffer.from(keys.subarray(i * this.keySize, (i + 1) * this.keySize)),
          Buffer.from(values.subarray(i * this.valueSize, (i + 1) * this.valueSize)),
        ]);
      }
    });
    return out;
  }

  /**
   * Every entry, handed to fn in chunks: n packed keys and n packed values,
   * read with BPF_MAP_LOOKUP_BATCH where the kernel has it (else one entry a
   * chunk). For callers that decode each entry there and then: a restarted
   * agent reads ~220k entries at 10k Services x 10, and a Buffer copied out
   * for each key and value was a good part of that read. The chunk's buffers
   * are fn's only until it returns.
   */
  eachEntryChunk(fn: (keys: Buffer, values: Buffer, n: number) => void): void {
    this.#notPerCpu('entries of');
    if (this.#batchOk && this.#lookupAllBatched(fn)) return;
    for (const key of this.keys()) {
      const value = this.lookup(key);
      if (value) fn(key, value, 1); // else deleted since keys() saw it
    }
  }

  /** False when the kernel has no batch lookup for this map (found before anything was read). */
  #lookupAllBatched(fn: (keys: Buffer, values: Buffer, n: number) => void): boolean {
    let chunk = 4096;
    const tokenSize = Math.max(this.keySize, 8);
    let inBatch: Buffer | null = null;
    for (;;) {
      const keys = Buffer.alloc(chunk * this.keySize);
      const values = Buffer.alloc(chunk * this.valueSize);
      const outBatch = Buffer.alloc(tokenSize);
      const count = Buffer.alloc(4);
      count.writeUInt32LE(chunk);
      const rc = native().mapLookupBatch(this.fd, inBatch, outBatch, keys, values, count) as number;
      if (rc === -EINVAL || rc === -ENOTSUPP) {
        if (inBatch === null) {
          this.#batchOk = false;
          return false;
        }
        this.#fail('lookup batch', rc);
      }
      if (rc === -ENOSPC) {
        // one hash bucket holds more than `chunk` entries
        chunk *= 2;
        continue;
      }
      if (rc < 0 && rc !== -ENOENT) this.#fail('lookup batch', rc);
      const n = count.readUInt32LE();
      if (n > 0) fn(keys, values, n);
      if (rc === -ENOENT) return true;
      inBatch = outBatch;
    }
  }

  /**
   * Writes `count` packed keys and values in one BPF_MAP_UPDATE_BATCH (or
   * one update per element where the kernel lacks it). On failure the error
   * says how many elements were written before it: `processed`.
   */
  updateBatch(keys: Buffer, values: Buffer, count: number, flags: bigint = BPF_ANY): void {
    this.#notPerCpu('update batch');
    if (count === 0) return;
    if (keys.length !== count * this.keySize)
      throw new Error(`update batch ${this.label}: ${keys.length} key bytes for ${count} keys of ${this.keySize}`);
    if (values.length !== count * this.valueSize)
      throw new Error(`update batch ${this.label}: ${values.length} value bytes for ${count} values of ${this.valueSize}`);
    if (this.#batchOk) {
      const n = Buffer.alloc(4);
      n.writeUInt32LE(count);
      const rc = native().mapUpdateBatch(this.fd, keys, values, n, flags) as number;
      if (rc === 0) return;
      const processed = n.readUInt32LE();
      if ((rc === -EINVAL || rc === -ENOTSUPP) && processed === 0) {
        this.#batchOk = false;
      } else {
        throw new BatchError(`update batch ${this.label}`, rc, processed, count);
      }
    }
    for (let i = 0; i < count; i++) {
      const rc = native().mapUpdate(
        this.fd,
        keys.subarray(i * this.keySize, (i + 1) * this.keySize),
        values.subarray(i * this.valueSize, (i + 1) * this.valueSize),
        flags,
      ) as number;
      if (rc < 0) throw new BatchError(`update ${this.label}`, rc, i, count);
    }
  }

  /**
   * Deletes `count` packed keys. A key already gone (e.g. an LRU eviction;
   * ENOENT stops a kernel batch) is skipped; the indices of those are
   * returned, in order.
   */
  deleteBatch(keys: Buffer, count: number): number[] {
    if (keys.length !== count * this.keySize)
      throw new Error(`delete batch ${this.label}: ${keys.length} key bytes for ${count} keys of ${this.keySize}`);
    const gone: number[] = [];
    let from = 0;
    while (this.#batchOk && from < count) {
      const n = Buffer.alloc(4);
      n.writeUInt32LE(count - from);
      const rc = native().mapDeleteBatch(this.fd, keys.subarray(from * this.keySize), n) as number;
      if (rc === 0) return gone;
      const processed = n.readUInt32LE();
      if (rc === -ENOENT) {
        gone.push(from + processed);
        from += processed + 1;
        continue;
      }
      if ((rc === -EINVAL || rc === -ENOTSUPP) && processed === 0 && from === 0) {
        this.#batchOk = false;
      } else {
        throw new BatchError(`delete batch ${this.label}`, rc, from + processed, count);
      }
    }
    if (from >= count) return gone;
    for (let i = from; i < count; i++) {
      const rc = native().mapDelete(this.fd, keys.subarray(i * this.keySize, (i + 1) * this.keySize)) as number;
      if (rc === -ENOENT) gone.push(i);
      else if (rc < 0) throw new BatchError(`delete ${this.label}`, rc, i, count);
    }
    return gone;
  }

  /** Number of entries, by walking the keys (maps have no counter before 6.6's map_extra); an array has every index. */
  count(): number {
    if (ARRAY_TYPES.has(this.info.type)) return this.maxEntries;
    return this.entries().length;
  }

  pin(path: string): void {
    const rc = native().objPin(this.fd, path) as number;
    if (rc < 0) this.#fail(`pin at ${path}`, rc);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#owned) closeSync(this.fd);
  }
}

export class BatchError extends BpfError {
  readonly processed: number;
  readonly requested: number;
  constructor(op: string, rc: number, processed: number, requested: number) {
    super(op, rc, `${libbpfText(rc)} after ${processed} of ${requested} elements`);
    this.processed = processed;
    this.requested = requested;
  }
}
