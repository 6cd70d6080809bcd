// Copies the entries of an old map into its new one, converted (convert.ts):
// all of them before the new programs run; then, just before and just after
// the hooks take the new programs, what the old programs changed meanwhile
// (entries added, rewritten or gone, unless the new programs changed the
// same entry; counters by what they grew since the first copy).
import { BpfError } from '../../bpf/errors.ts';
import { BPF_ANY, BPF_NOEXIST, BpfMap } from '../../bpf/map.ts';
import type { Converter } from './convert.ts';

const MAP_OF_MAPS_TYPES = new Set([12, 13]); // BPF_MAP_TYPE_ARRAY_OF_MAPS, HASH_OF_MAPS
const LRU_TYPES = new Set([9, 10]); // BPF_MAP_TYPE_LRU_HASH, LRU_PERCPU_HASH
const EEXIST = 17;

function isMapOfMaps(m: BpfMap): boolean {
  return MAP_OF_MAPS_TYPES.has(m.info.type);
}

export function isLru(m: BpfMap): boolean {
  return LRU_TYPES.has(m.info.type);
}

/** An entry as read: one value, or one per possible CPU. */
export type Values = Buffer | Buffer[];

/** Every entry of a map, per-CPU maps with all their CPUs' values. */
export function readAll(m: BpfMap): Map<string, { key: Buffer; values: Values }> {
  const out = new Map<string, { key: Buffer; values: Values }>();
  if (m.isPerCpu) {
    for (const key of m.keys()) {
      const values = m.lookupPerCpu(key);
      if (values) out.set(key.toString('hex'), { key, values });
    }
  } else for (const [key, value] of m.entries()) out.set(key.toString('hex'), { key, values: value });
  return out;
}

export class CapacityError extends Error {
  readonly map: string;
  readonly entries: number;
  readonly capacity: number;
  constructor(map: string, entries: number, capacity: number) {
    super(`map ${map} holds ${entries} entries, more than the ${capacity} the new map has`);
    this.name = 'CapacityError';
    this.map = map;
    this.entries = entries;
    this.capacity = capacity;
  }
}

/** Writes one converted entry; false when the key was there already (onlyMissing). */
function put(to: BpfMap, key: Buffer, values: Values, conv: Converter, onlyMissing: boolean): boolean {
  const flags = onlyMissing ? BPF_NOEXIST : BPF_ANY;
  try {
    if (Array.isArray(values)) {
      to.updatePerCpu(conv.key(key), values.map(conv.value), flags);
      return true;
    }
    if (isMapOfMaps(to)) {
      // The value read is the inner map's id; a write takes an fd. The inner map is shared, not copied.
      const inner = BpfMap.fromId(values.readUInt32LE(0));
      try {
        const fd = Buffer.alloc(4);
        fd.writeUInt32LE(inner.fd);
        to.update(conv.key(key), fd, flags);
      } finally {
        inner.close();
      }
      return true;
    }
    const entry = conv.convert(key, values);
    if (!entry) return false;
    to.update(entry.key, entry.value, flags);
    return true;
  } catch (err) {
    if (onlyMissing && err instanceof BpfError && err.errno === EEXIST) return false;
    throw err;
  }
}

/**
 * Copies every entry of `from` into `to`. A map that is not LRU must fit
 * (CapacityError, before anything is written); an LRU map keeps what its
 * kernel keeps. Returns the entries read, for the catch-up.
 */
export function copyAll(from: BpfMap, to: BpfMap, conv: Converter): Map<string, { key: Buffer; values: Values }> {
  const entries = readAll(from);
  if (!isLru(to) && entries.size > to.maxEntries) throw new CapacityError(to.label, entries.size, to.maxEntries);
  for (const { key, values } of entries.values()) put(to, key, values, conv, false);
  return entries;
}

/**
 * What the old programs changed since `before` (the entries as last copied),
 * carried into the new map where the new programs have not changed the same
 * entry since: an entry added or rewritten in the old map is written, one
 * the old map lost is deleted. An entry both sides changed keeps the new
 * programs' version. Returns the old map's entries now (the next `before`)
 * and how many entries were written or deleted.
 */
export function mergeChanges(
  from: BpfMap,
  to: BpfMap,
  conv: Converter,
  before: Map<string, { key: Buffer; values: Values }>,
): { now: Map<string, { key: Buffer; values: Values }>; changed: number } {
  const now = readAll(from);
  let changed = 0;
  const same = (a: Values | undefined, b: Values | undefined) =>
    a !== undefined &&
    b !== undefined &&
    (Array.isArray(a) ? Array.isArray(b) && a.every((x, i) => x.equals(b[i]!)) : !Array.isArray(b) && a.equals(b));
  /** The new map's value for an old entry, or undefined when it has none. */
  const current = (key: Buffer): Values | undefined => {
    const k = conv.key(key);
    return to.isPerCpu ? to.lookupPerCpu(k) : to.lookup(k);
  };
  const converted = (v: Values): Values => (Array.isArray(v) ? v.map(conv.value) : conv.value(v));
  // What a map of maps reads back is an inner map's id, not what was written: compare the old side only.
  const untouched = (key: Buffer, was: Values) => isMapOfMaps(to) || same(current(key), converted(was));
  for (const [hex, { key, values }] of now) {
    const was = before.get(hex)?.values;
    if (same(values, was)) continue;
    if (was === undefined ? current(key) !== undefined : !untouched(key, was)) continue; // the new programs own it now
    if (put(to, key, values, conv, false)) changed++;
  }
  for (const [hex, { key, values }] of before) {
    if (now.has(hex) || !untouched(key, values)) continue;
    if (to.delete(conv.key(key))) changed++;
  }
  return { now, changed };
}

/** a + (now - then), each 8-byte word a signed counter. */
function addDelta(a: Buffer, now: Buffer, then: Buffer | undefined): Buffer {
  const out = Buffer.from(a);
  for (let i = 0; i + 8 <= out.length; i += 8)
    out.writeBigInt64LE(BigInt.asIntN(64, a.readBigInt64LE(i) + now.readBigInt64LE(i) - (then ? then.readBigInt64LE(i) : 0n)), i);
  return out;
}

/**
 * Counter maps (every value field an 8-byte count): what the old programs
 * counted since the first copy is added to the new map's counts, which the
 * new programs may have changed meanwhile. Returns the entries changed.
 */
export function addCounted(from: BpfMap, to: BpfMap, conv: Converter, before: Map<string, { key: Buffer; values: Values }>): number {
  let n = 0;
  for (const [hex, { key, values }] of readAll(from)) {
    const then = before.get(hex)?.values;
    const newKey = conv.key(key);
    if (Array.isArray(values)) {
      const cur = to.lookupPerCpu(newKey);
      const now = values.map(conv.value);
      const was = Array.isArray(then) ? then.map(conv.value) : undefined;
      if (!cur) continue;
      if (now.every((v, i) => v.equals(was?.[i] ?? Buffer.alloc(v.length)))) continue;
      to.updatePerCpu(
        newKey,
        cur.map((c, i) => addDelta(c, now[i]!, was?.[i])),
      );
      n++;
      continue;
    }
    const now = conv.value(values);
    const was = then && !Array.isArray(then) ? conv.value(then) : undefined;
    if (was?.equals(now)) continue;
    const cur = to.lookup(newKey);
    to.update(newKey, cur ? addDelta(cur, now, was) : now);
    n++;
  }
  return n;
}
