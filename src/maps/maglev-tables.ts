// The Maglev tables (svcmap_maglev, a hash of maps: rev_nat_id -> inner
// array of struct maglev_entry, four slots each, see
// bpf/include/svcmap_maps.h). The agent's form of a table is flat (index 0:
// M, index 1 + p: position p's slot); it is packed here. A table is published
// by filling a new inner map whole and then putting it in the outer map with
// one update: a reader sees the old table or the new one. The outer map holds
// the only lasting reference to an inner map, so the one it replaces is freed
// by the kernel once no program uses it.
import { BpfMap } from '../bpf/map.ts';
import { MAGLEV_SLOTS_PER_ENTRY } from './constants.ts';

const BPF_MAP_TYPE_ARRAY = 2;
const BPF_F_INNER_MAP = 1 << 12; // an array of any size may be an inner map
const ENTRY = MAGLEV_SLOTS_PER_ENTRY * 2; // bytes of struct maglev_entry

export class MaglevTables {
  readonly outer: BpfMap;
  constructor(outer: BpfMap) {
    this.outer = outer;
  }

  static #key(revNatId: number): Buffer {
    const k = Buffer.alloc(4);
    k.writeUInt32LE(revNatId);
    return k;
  }

  /** Publishes `table` (index 0: M, then M slots) as the frontend's. */
  publish(revNatId: number, table: Uint16Array): void {
    const m = table.length - 1;
    const n = 1 + Math.ceil(m / MAGLEV_SLOTS_PER_ENTRY);
    const values = Buffer.alloc(n * ENTRY);
    values.writeUInt16LE(table[0]!, 0);
    for (let p = 0; p < m; p++) values.writeUInt16LE(table[p + 1]!, ENTRY + 2 * p);
    const inner = BpfMap.create(BPF_MAP_TYPE_ARRAY, 'svcmap_mgl_tbl', 4, ENTRY, n, BPF_F_INNER_MAP);
    try {
      const keys = Buffer.alloc(n * 4);
      for (let i = 0; i < n; i++) keys.writeUInt32LE(i, i * 4);
      inner.updateBatch(keys, values, n);
      const fd = Buffer.alloc(4);
      fd.writeUInt32LE(inner.fd);
      this.outer.update(MaglevTables.#key(revNatId), fd);
    } finally {
      inner.close();
    }
  }

  /** False when the frontend had no table. */
  delete(revNatId: number): boolean {
    return this.outer.delete(MaglevTables.#key(revNatId));
  }

  /** The frontend's table as the datapath sees it, or undefined. */
  read(revNatId: number): Uint16Array | undefined {
    const v = this.outer.lookup(MaglevTables.#key(revNatId));
    if (!v) return undefined;
    const inner = BpfMap.fromId(v.readUInt32LE(), `${this.outer.label}[${revNatId}]`);
    try {
      const m = inner.lookup(Buffer.alloc(4))!.readUInt16LE();
      const out = new Uint16Array(m + 1);
      out[0] = m;
      for (const [k, val] of inner.entries()) {
        const i = k.readUInt32LE();
        if (i === 0) continue;
        for (let j = 0; j < MAGLEV_SLOTS_PER_ENTRY; j++) {
          const p = (i - 1) * MAGLEV_SLOTS_PER_ENTRY + j;
          if (p < m) out[p + 1] = val.readUInt16LE(2 * j);
        }
      }
      return out;
    } finally {
      inner.close();
    }
  }

  /** rev_nat_id -> M of every table (entry 0 of each inner map). */
  sizes(): Map<number, number> {
    const out = new Map<number, number>();
    const zero = Buffer.alloc(4);
    for (const [k, v] of this.outer.entries()) {
      let inner: BpfMap;
      try {
        inner = BpfMap.fromId(v.readUInt32LE());
      } catch {
        continue; // replaced or deleted since the listing
      }
      try {
        out.set(k.readUInt32LE(), inner.lookup(zero)?.readUInt16LE() ?? 0);
      } finally {
        inner.close();
      }
    }
    return out;
  }
}
