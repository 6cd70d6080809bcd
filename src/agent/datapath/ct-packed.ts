// The conntrack map as one batch read returns it (ct-gc.ts readCtPacked):
// keys and values packed back to back, in the kernel's layout. Its own
// module so that the GC and the connection counts (conn-counts.ts), which
// the GC calls, both read it without importing each other.
export interface PackedCt {
  keys: Uint8Array;
  values: Uint8Array;
  count: number;
}
