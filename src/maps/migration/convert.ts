// One map entry from one recorded layout to another, by field name: a field
// both layouts have is copied byte for byte (same name, same size: the same
// meaning and byte order), a field only the new layout has is zero, a field
// only the old one had is dropped. A step where that is wrong (a field whose
// size changed) has an override (overrides.ts), which the layout test asks for.
import type { MapLayout, StructShape } from '../layout-versions.ts';
import { type EntryOverride } from './overrides.ts';

/** Copy size bytes from offset `from` of the old struct to offset `to` of the new one. */
export interface FieldCopy {
  field: string;
  from: number;
  to: number;
  size: number;
}

/** The copies that make a `to` struct from a `from` struct; fields whose size differs are left out (zero). */
export function fieldCopies(from: StructShape, to: StructShape): FieldCopy[] {
  const old = new Map(from.fields.map((f) => [f[0], f]));
  const out: FieldCopy[] = [];
  for (const [name, offset, size] of to.fields) {
    const o = old.get(name);
    if (o && o[2] === size) out.push({ field: name, from: o[1], to: offset, size });
  }
  return out;
}

/** What a step gives up and what it starts at zero, for the log. */
export function fieldChanges(from: MapLayout, to: MapLayout): { dropped: string[]; zeroed: string[] } {
  const dropped: string[] = [];
  const zeroed: string[] = [];
  for (const part of ['key', 'value'] as const) {
    const copied = new Set(fieldCopies(from[part], to[part]).map((c) => c.field));
    for (const f of from[part].fields) if (!copied.has(f[0])) dropped.push(`${part}.${f[0]}`);
    for (const f of to[part].fields) if (!copied.has(f[0])) zeroed.push(`${part}.${f[0]}`);
  }
  return { dropped, zeroed };
}

function structConverter(from: StructShape, to: StructShape): (buf: Buffer) => Buffer {
  const copies = fieldCopies(from, to);
  const identity = from.size === to.size && copies.length === to.fields.length && copies.every((c) => c.from === c.to);
  if (identity && to.fields.reduce((n, f) => n + f[2], 0) === to.size) return (buf) => buf;
  return (buf) => {
    const out = Buffer.alloc(to.size);
    for (const c of copies) buf.copy(out, c.to, c.from, c.from + c.size);
    return out;
  };
}

export interface Converter {
  /** The entry in the new layout, or undefined when the override drops it. */
  convert(key: Buffer, value: Buffer): { key: Buffer; value: Buffer } | undefined;
  /** One value of a per-CPU map (its key is converted with convert's). */
  value(value: Buffer): Buffer;
  key(key: Buffer): Buffer;
}

/** Entries of `from` as entries of `to`; an override, when given, converts whole entries instead. */
export function converter(from: MapLayout, to: MapLayout, override?: EntryOverride): Converter {
  const key = structConverter(from.key, to.key);
  const value = structConverter(from.value, to.value);
  return {
    convert: override ? (k, v) => override(k, v) : (k, v) => ({ key: key(k), value: value(v) }),
    value,
    key,
  };
}
