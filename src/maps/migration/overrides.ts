// Conversions that copying fields by name (convert.ts) would get wrong, per
// map and version step: a field whose size or meaning changed under the same
// name. test/maps/layout-versions.test.ts asks for one wherever a recorded
// step changes a field's size. None is needed yet.

/** One entry in the old layout -> in the new one (undefined: drop the entry). */
export type EntryOverride = (key: Buffer, value: Buffer) => { key: Buffer; value: Buffer } | undefined;

/** Map name -> "FROM->TO" (layout versions) -> conversion. */
export const OVERRIDES: Readonly<Record<string, Readonly<Record<string, EntryOverride>>>> = {};

export function overrideFor(map: string, from: number, to: number): EntryOverride | undefined {
  return OVERRIDES[map]?.[`${from}->${to}`];
}

export function hasOverride(map: string, from: number, to: number): boolean {
  return overrideFor(map, from, to) !== undefined;
}
