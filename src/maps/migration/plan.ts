// Which pinned maps a new datapath cannot take over as they are: a map
// pinned with another layout (type, flags, key or value size than this
// build's objects give it) or, when a --max-* option asks for it, another
// capacity. Each is found in the recorded layouts (layouts.gen.ts) by its
// shape, so that its entries can be converted by field name (convert.ts).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BpfMap, MAP_TYPE_NAMES } from '../../bpf/map.ts';
import type { BpfObject } from '../../bpf/object.ts';
import { testLayout } from '../../bpf/test-layout.ts';
import { LAYOUTS, TEST_LAYOUTS } from '../generated/layouts.gen.ts';
import type { MapLayout } from '../layout-versions.ts';
import { ALL_MAPS, type MapSpec } from '../registry.ts';

/** Where the new maps are pinned until they take the old ones' place. */
export function migratingDir(pinDir: string): string {
  return join(pinDir, 'migrating');
}

/** A layout this build knows: a recorded version, or the test layout. */
export interface KnownLayout {
  version: number | 'test';
  layout: MapLayout;
}

export interface MapMove {
  spec: MapSpec;
  /** The pin of the map in use. */
  pinPath: string;
  /** Where the new map is pinned until it replaces the old one. */
  newPinPath: string;
  from: KnownLayout;
  to: KnownLayout;
  fromMaxEntries: number;
  toMaxEntries: number;
  /** Why it moves, in words (for the log). */
  why: string;
}

const typeName = (t: number) => MAP_TYPE_NAMES[t] ?? `type ${t}`;
const shapeOf = (l: { type: number; flags: number; keySize: number; valueSize: number }) =>
  `${typeName(l.type)}, flags ${l.flags}, key ${l.keySize} bytes, value ${l.valueSize} bytes`;

/** Every layout of the map this build can convert from. */
export function knownLayouts(name: string): KnownLayout[] {
  const out: KnownLayout[] = Object.entries(LAYOUTS[name] ?? {}).map(([v, layout]) => ({ version: Number(v), layout }));
  const test = TEST_LAYOUTS[name];
  if (test) out.push({ version: 'test', layout: test });
  return out;
}

/** The layout this process runs the map with. */
export function currentLayout(spec: MapSpec): KnownLayout {
  const test = testLayout() ? TEST_LAYOUTS[spec.name] : undefined;
  if (test) return { version: 'test', layout: test };
  const layout = spec.layoutVersion === undefined ? undefined : LAYOUTS[spec.name]?.[spec.layoutVersion];
  if (!layout) throw new Error(`map ${spec.name}: layout version ${spec.layoutVersion} is not recorded (make layouts)`);
  return { version: spec.layoutVersion!, layout };
}

export class UnknownLayoutError extends Error {
  constructor(pinPath: string, pinned: string, known: KnownLayout[], pinDir: string) {
    super(
      `the map pinned at ${pinPath} has a layout this build does not know (${pinned}; it converts from ${
        known.map((k) => `${k.version === 'test' ? 'the test layout' : `version ${k.version}`}: ${shapeOf(k.layout)}`).join('; ') || 'none'
      }): it was made by a newer release. The old datapath keeps serving; start the release that made it, or remove the datapath with svcmap cleanup --pin-dir ${pinDir} (Services on this node are unreachable until the agent has synced) and start this agent again`,
    );
    this.name = 'UnknownLayoutError';
  }
}

/**
 * The pinned maps of these objects (opened, not loaded) that must move to a
 * new map: another layout, or another capacity than maxEntries asks for.
 */
export function planMigration(objects: readonly BpfObject[], pinDir: string, maxEntries: (map: string) => number | undefined): MapMove[] {
  const moves = new Map<string, MapMove>();
  for (const object of objects) {
    for (const { name, pinPath } of object.maps()) {
      const spec = ALL_MAPS.find((m) => m.name === name);
      if (!spec || pinPath === undefined || moves.has(name) || !existsSync(pinPath)) continue;
      const pinned = BpfMap.openPinned(pinPath);
      let info: BpfMap['info'];
      try {
        info = pinned.info;
      } finally {
        pinned.close();
      }
      const to = currentLayout(spec);
      const sameShape =
        info.type === to.layout.type &&
        info.flags === to.layout.flags &&
        info.keySize === to.layout.keySize &&
        info.valueSize === to.layout.valueSize;
      // A map of no capacity (socket storage: one value per socket) cannot be sized.
      const sizeable = object.mapMaxEntries(name) !== 0;
      const want = sizeable ? (maxEntries(name) ?? info.maxEntries) : info.maxEntries;
      if (sameShape && want === info.maxEntries) continue;
      const known = knownLayouts(name);
      const from = sameShape
        ? to
        : known.find(
            (k) =>
              k.layout.type === info.type &&
              k.layout.flags === info.flags &&
              k.layout.keySize === info.keySize &&
              k.layout.valueSize === info.valueSize,
          );
      if (!from) throw new UnknownLayoutError(pinPath, shapeOf(info), known, pinDir);
      const name2 = (k: KnownLayout) => (k.version === 'test' ? 'the test layout' : `layout version ${k.version}`);
      moves.set(name, {
        spec,
        pinPath,
        newPinPath: join(migratingDir(pinDir), name),
        from,
        to,
        fromMaxEntries: info.maxEntries,
        toMaxEntries: want,
        why: sameShape ? `capacity ${info.maxEntries} -> ${want}` : `${name2(from)} -> ${name2(to)}`,
      });
    }
  }
  return [...moves.values()];
}
