// The layouts of the pinned maps as a build has them (type, flags, key and
// value sizes, and the structs' fields as BTF sees them), and how they
// compare with the layouts recorded per map and version in
// src/maps/generated/layouts.gen.ts (written by mk/gen-layouts.ts, held to
// the objects by test/maps/layout-versions.test.ts). A map's layout may
// change only together with its layoutVersion (src/maps/registry.ts): the
// migration on start (src/maps/migration/) tells the layouts apart and
// converts entries between them by field name.
import { BtfFile } from '../bpf/btf.ts';
import { BpfObject } from '../bpf/object.ts';
import type { StructLayout } from './layout.ts';
import type { MapSpec } from './registry.ts';

/** One field: name, byte offset, byte size. */
export type LayoutField = readonly [name: string, offset: number, size: number];

export interface StructShape {
  /** The C type: a struct's name, or a scalar's (__u32). */
  type: string;
  size: number;
  fields: readonly LayoutField[];
}

export interface MapLayout {
  /** BPF_MAP_TYPE_*. */
  type: number;
  flags: number;
  keySize: number;
  valueSize: number;
  key: StructShape;
  value: StructShape;
}

/** Map name -> version -> layout. */
export type RecordedLayouts = Readonly<Record<string, Readonly<Record<number, MapLayout>>>>;

/** A C type's shape from BTF: a struct field by field; a scalar (no struct of that name) as one field `value`. */
function shapeOf(layout: StructLayout, btf: readonly BtfFile[], size: number): StructShape {
  if (!layout.isStruct) return { type: layout.cName, size, fields: [['value', 0, size]] };
  for (const b of btf) {
    const s = b.struct(layout.cName);
    if (s) return { type: layout.cName, size: s.size, fields: s.members.map((m) => [m.name, m.offset, m.size] as const) };
  }
  throw new Error(`struct ${layout.cName}: not in the BTF of ${btf.map((b) => b.path).join(', ')}`);
}

/**
 * The layouts of `specs` in these compiled objects: the map definitions of
 * whichever object has the map, the structs from the objects' BTF.
 */
export function describeLayouts(objectPaths: readonly string[], specs: readonly MapSpec[]): Record<string, MapLayout> {
  const btf = objectPaths.map((p) => new BtfFile(p));
  const objects = objectPaths.map((p) => BpfObject.open(p));
  try {
    const out: Record<string, MapLayout> = {};
    for (const spec of specs) {
      const o = objects.find((x) => x.maps().some((m) => m.name === spec.name));
      if (!o) throw new Error(`map ${spec.name}: in none of ${objectPaths.join(', ')}`);
      const keySize = o.mapKeySize(spec.name);
      const valueSize = o.mapValueSize(spec.name);
      out[spec.name] = {
        type: o.mapType(spec.name),
        flags: o.mapFlags(spec.name),
        keySize,
        valueSize,
        key: shapeOf(spec.key.layout, btf, keySize),
        value: shapeOf(spec.value.layout, btf, valueSize),
      };
    }
    return out;
  } finally {
    for (const o of objects) o.close();
    for (const b of btf) b.close();
  }
}

export function sameLayout(a: MapLayout, b: MapLayout): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** What differs between two layouts of one map, in words. */
export function layoutDiff(was: MapLayout, now: MapLayout): string[] {
  const out: string[] = [];
  for (const k of ['type', 'flags', 'keySize', 'valueSize'] as const) if (was[k] !== now[k]) out.push(`${k} ${was[k]} -> ${now[k]}`);
  for (const part of ['key', 'value'] as const) {
    const [a, b] = [was[part], now[part]];
    if (a.type !== b.type) out.push(`${part} type ${a.type} -> ${b.type}`);
    const before = new Map(a.fields.map((f) => [f[0], f]));
    const after = new Map(b.fields.map((f) => [f[0], f]));
    for (const [name, f] of after) {
      const o = before.get(name);
      if (!o) out.push(`${part}: new field ${name} (offset ${f[1]}, ${f[2]} bytes)`);
      else if (o[1] !== f[1] || o[2] !== f[2]) out.push(`${part}: field ${name} offset/size ${o[1]}/${o[2]} -> ${f[1]}/${f[2]}`);
    }
    for (const name of before.keys()) if (!after.has(name)) out.push(`${part}: field ${name} removed`);
  }
  return out;
}

/**
 * Fields whose name stays but whose size changes cannot be converted by
 * name (src/maps/migration/convert.ts): such a change needs an override.
 */
export function unconvertibleFields(was: MapLayout, now: MapLayout): string[] {
  const out: string[] = [];
  for (const part of ['key', 'value'] as const) {
    const before = new Map(was[part].fields.map((f) => [f[0], f]));
    for (const f of now[part].fields) {
      const o = before.get(f[0]);
      if (o && o[2] !== f[2]) out.push(`${part}.${f[0]}: ${o[2]} -> ${f[2]} bytes`);
    }
  }
  return out;
}

export interface LayoutProblem {
  map: string;
  problem: string;
}

const HOW =
  'raise layoutVersion of the map in src/maps/registry.ts by one and run `make layouts` (it records the new layout beside the old ones; never edit a recorded one)';

/**
 * Where the current layouts disagree with the recorded ones: a map whose
 * version is not recorded, a recorded version that no longer matches, a
 * gap in the versions, or a step between versions that field-by-name
 * conversion cannot take and no override covers.
 */
export function layoutProblems(
  specs: readonly MapSpec[],
  current: Record<string, MapLayout>,
  recorded: RecordedLayouts,
  hasOverride: (map: string, from: number, to: number) => boolean,
): LayoutProblem[] {
  const out: LayoutProblem[] = [];
  for (const spec of specs) {
    const now = current[spec.name];
    if (!now) {
      out.push({ map: spec.name, problem: 'not in the compiled objects' });
      continue;
    }
    if (spec.layoutVersion === undefined) {
      out.push({
        map: spec.name,
        problem: 'has no layoutVersion: give it `layoutVersion: 1` in src/maps/registry.ts and run `make layouts`',
      });
      continue;
    }
    const version = spec.layoutVersion;
    const versions = recorded[spec.name];
    const at = versions?.[version];
    if (!versions || !at) {
      out.push({
        map: spec.name,
        problem: `layout version ${version} is not recorded: run \`make layouts\` (src/maps/generated/layouts.gen.ts) and commit the result`,
      });
    } else if (!sameLayout(at, now)) {
      out.push({
        map: spec.name,
        problem: `the layout differs from recorded version ${version} (${layoutDiff(at, now).join('; ')}): ${HOW}`,
      });
    }
    if (!versions) continue;
    const numbers = Object.keys(versions)
      .map(Number)
      .sort((a, b) => a - b);
    if (numbers.some((v) => v > version))
      out.push({ map: spec.name, problem: `versions past ${version} are recorded: layoutVersion went down` });
    numbers.forEach((v, i) => {
      if (i > 0 && v !== numbers[i - 1]! + 1)
        out.push({ map: spec.name, problem: `recorded versions skip from ${numbers[i - 1]} to ${v}` });
    });
    for (let v = 2; v <= version; v++) {
      const [was, now2] = [versions[v - 1], versions[v]];
      if (!was || !now2) continue;
      const bad = unconvertibleFields(was, now2);
      if (bad.length && !hasOverride(spec.name, v - 1, v))
        out.push({
          map: spec.name,
          problem: `version ${v - 1} -> ${v} changes the size of ${bad.join(', ')}, which conversion by field name cannot do: add a conversion for it in src/maps/migration/overrides.ts`,
        });
    }
  }
  return out;
}
