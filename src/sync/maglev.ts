// Maglev's lookup table (Eisenbud et al., NSDI 2016, section 3.4): each
// backend has a permutation of the M positions, given by an offset and a
// skip derived from its name; the backends take turns claiming their next
// preferred free position until the table is full. M prime makes every
// permutation visit every position. Pure: the same names and M give the
// same table on every node, whatever the order the names come in.
import { createHash } from 'node:crypto';

/** offset in 0..M-1 and skip in 1..M-1 from two independent halves of one digest. */
function permutation(name: string, m: number): { offset: number; skip: number } {
  const d = createHash('sha256').update(name).digest();
  return { offset: d.readUInt32LE(0) % m, skip: (d.readUInt32LE(4) % (m - 1)) + 1 };
}

/**
 * The table over `names` (each once), size m (a prime): entry j is the index
 * into `names` of the backend that hash position j goes to. Every entry is
 * filled when names is not empty (each backend gets floor or ceil of M/N
 * entries, the algorithm's turn-taking); all -1 when it is.
 */
export function maglevTable(names: readonly string[], m: number): Int32Array {
  const table = new Int32Array(m).fill(-1);
  const n = names.length;
  if (n === 0) return table;
  // Turns go in the sorted order of the names, so two agents agree.
  const order = names.map((_, i) => i).sort((a, b) => (names[a]! < names[b]! ? -1 : names[a]! > names[b]! ? 1 : 0));
  const pos = new Float64Array(n);
  const skip = new Float64Array(n);
  order.forEach((idx, k) => {
    const p = permutation(names[idx]!, m);
    pos[k] = p.offset;
    skip[k] = p.skip;
  });
  let filled = 0;
  for (;;) {
    for (let k = 0; k < n; k++) {
      let c = pos[k]!;
      while (table[c]! >= 0) c = (c + skip[k]!) % m;
      table[c] = order[k]!;
      pos[k] = (c + skip[k]!) % m;
      if (++filled === m) return table;
    }
  }
}

/** The share of the entries of two equally sized tables whose backend name differs. */
export function maglevDisruption(
  before: Int32Array,
  beforeNames: readonly string[],
  after: Int32Array,
  afterNames: readonly string[],
): number {
  let moved = 0;
  for (let j = 0; j < before.length; j++) if (beforeNames[before[j]!] !== afterNames[after[j]!]) moved++;
  return moved / before.length;
}

/** A backend's name in the table: what every node knows it by (not its id, which is per node). */
export function maglevName(be: { addr: string; port: number; proto: number }): string {
  return `${be.addr}:${be.port}/${be.proto}`;
}

/**
 * The frontend's table as the datapath reads it (struct of svcmap_maglev's
 * inner map): index 0 holds M, index 1 + j the slot (1-based) of the backend
 * entry j names. slotNames[i] is the name of slot i + 1's backend.
 */
export function maglevSlotTable(slotNames: readonly string[], m: number): Uint16Array {
  const t = maglevTable(slotNames, m);
  const out = new Uint16Array(m + 1);
  out[0] = m;
  for (let j = 0; j < m; j++) out[j + 1] = t[j]! + 1;
  return out;
}
