// Refuse to run when the codecs and the compiled datapath disagree: every
// struct layout is compared with the BTF of the object the agent loads, size
// and every field's offset and size, and the map's key/value sizes with the
// codec sizes.
import type { BtfStruct } from '../bpf/btf.ts';
import type { StructLayout } from './layout.ts';
import type { MapSpec } from './registry.ts';

export type StructLookup = (cName: string) => BtfStruct | undefined;

export function structDrift(layout: StructLayout, lookup: StructLookup): string[] {
  if (!layout.isStruct) return [];
  const btf = lookup(layout.cName);
  if (!btf) return [`struct ${layout.cName}: not found in the BPF object's BTF`];
  const out: string[] = [];
  if (btf.size !== layout.size) {
    out.push(`struct ${layout.cName}: size is ${btf.size} bytes in BTF, the codec says ${layout.size}`);
  }
  const byName = new Map(btf.members.map((m) => [m.name, m]));
  for (const f of layout.fields) {
    const m = byName.get(f.name);
    if (!m) {
      out.push(`struct ${layout.cName}: field ${f.name} is in the codec but not in BTF`);
      continue;
    }
    if (m.bitfieldSize) out.push(`struct ${layout.cName}: field ${f.name} is a bitfield, which codecs do not support`);
    if (m.offset !== f.offset) {
      out.push(`struct ${layout.cName}: field ${f.name} is at offset ${m.offset} in BTF, the codec says ${f.offset}`);
    }
    if (m.size !== f.size) {
      out.push(`struct ${layout.cName}: field ${f.name} is ${m.size} bytes in BTF, the codec says ${f.size}`);
    }
  }
  const known = new Set(layout.fields.map((f) => f.name));
  for (const m of btf.members) {
    if (!known.has(m.name)) out.push(`struct ${layout.cName}: field ${m.name} (offset ${m.offset}) is in BTF but not in the codec`);
  }
  return out;
}

/** Every drift between the codecs of these maps and the BTF. */
export function codecDrift(maps: readonly MapSpec[], lookup: StructLookup): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const spec of maps) {
    for (const layout of [spec.key.layout, spec.value.layout]) {
      if (seen.has(layout.cName)) continue;
      seen.add(layout.cName);
      out.push(...structDrift(layout, lookup));
    }
  }
  return out;
}

/** Key and value sizes of an opened map against its codecs. */
export function mapSizeDrift(spec: MapSpec, keySize: number, valueSize: number): string[] {
  const out: string[] = [];
  if (keySize !== spec.key.layout.size)
    out.push(`map ${spec.name}: key_size is ${keySize}, the codec ${spec.key.layout.cName} is ${spec.key.layout.size}`);
  if (valueSize !== spec.value.layout.size)
    out.push(`map ${spec.name}: value_size is ${valueSize}, the codec ${spec.value.layout.cName} is ${spec.value.layout.size}`);
  return out;
}

export class LayoutDriftError extends Error {
  readonly drift: string[];
  constructor(objectPath: string, drift: string[]) {
    super(`the map codecs do not match the BPF object ${objectPath}; refusing to start:\n  ${drift.join('\n  ')}`);
    this.name = 'LayoutDriftError';
    this.drift = drift;
  }
}
