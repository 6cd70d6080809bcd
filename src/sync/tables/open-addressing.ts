// What the sync engine's packed tables (backend-table.ts, id-index.ts,
// id-deltas.ts) share: typed arrays grown by copy, and the two rules of their
// open-addressing indexes (linear probing, deletion by backward shift).

type Typed = Uint8Array | Uint16Array | Uint32Array | Int32Array | Float64Array;

/** A typed array of the same kind with n elements, a's first. */
export function grown<T extends Typed>(a: T, n: number): T {
  const next = new (a.constructor as new (n: number) => T)(n);
  next.set(a);
  return next;
}

/** The home slot of a 32-bit hash in a table of 2^bits slots (Fibonacci hashing). */
export function homeSlot(hash: number, bits: number): number {
  return Math.imul(hash, 0x9e3779b1) >>> (32 - bits);
}

/**
 * Backward-shift deletion: whether the entry at slot j, whose home slot is h,
 * may move back into the emptied slot s, that is when h is not in (s, j]
 * (cyclically); else it stays, or probing would no longer reach it.
 */
export function movesBack(s: number, j: number, h: number): boolean {
  return s <= j ? h <= s || h > j : h <= s && h > j;
}
