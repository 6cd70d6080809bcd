// Live connections per backend (svcmap_be_conns, struct backend_conns): the
// counts that lc, sed and nq choose by. The datapath keeps them itself
// (bpf/lib/conns.h): the socket LB per connected socket, tc per open
// conntrack flow. This module is the agent's side:
//  - the conntrack GC's decrements: a flow the GC collects while it is
//    still open (idle past its lifetime, its peer gone) stops counting;
//  - the recount, in the same pass, of the tc counts from the conntrack
//    entries the pass read: what drifted (flows the LRU evicted, a bit lost
//    to two CPUs, counts from before a restart with other programs) is set
//    right, except for a backend whose count changed while the pass ran
//    (its flows opened or closed meanwhile: the pass cannot tell which it
//    saw), which waits for the next pass;
//  - entries of backends that no longer exist are removed.
// The socket counts are not recounted: socket storage cannot be listed
// from user space (that needs a BPF iterator over the storage map, not
// built); what they can lose is a release while no program was attached,
// and pinned links keep the programs attached across agent restarts.
//
// Every change is an atomic add in the kernel (the tc object's
// svcmap_conns_adjust, a BPF_PROG_TYPE_SYSCALL program run with
// BPF_PROG_RUN), never a map write, which would overwrite the datapath's
// concurrent adds.
import { progRunSyscall } from '../bpf/test-run.ts';
import { type BackendConns, type BackendValue, connsAdjust, ctKey, ctValue } from '../maps/codecs.ts';
import { CONNS_FIELD_SOCK, CONNS_FIELD_TC, CT_DIR_FWD, CT_F_CLOSING } from '../maps/constants.ts';
import { ipv4ToU32 } from '../maps/ipv4.ts';
import type { TypedMap } from '../maps/typed-map.ts';
import type { PackedCt } from './ct-gc.ts';

export const CONNS_ADJUST_PROGRAM = 'svcmap_conns_adjust';

export interface ConnCountMaps {
  conns: TypedMap<number, BackendConns>;
  backends: TypedMap<number, BackendValue>;
}

export interface RecountResult {
  /** Open flows the GC removed, each taken off its backend's count. */
  collected: number;
  /** Backends whose tc count was set right, and by how much in all (absolute). */
  corrected: number;
  drift: number;
  /** Backends whose count changed during the pass: left for the next one. */
  busy: number;
  /** Entries of backends that are gone, removed. */
  removed: number;
}

/** What a pass saw before it read the conntrack map. */
export type ConnsSnapshot = ReadonlyMap<number, BackendConns>;

const fieldAt = (layout: typeof ctValue.layout, name: string) => layout.fields.find((f) => f.name === name)!.offset;
const V = {
  newDaddr: fieldAt(ctValue.layout, 'new_daddr'), newDport: fieldAt(ctValue.layout, 'new_dport'),
  backendId: fieldAt(ctValue.layout, 'backend_id'), flags: fieldAt(ctValue.layout, 'flags'),
};
const KDIR = fieldAt(ctKey.layout, 'dir');

export class ConnCounts {
  readonly #maps: ConnCountMaps;
  readonly #adjustFd: number;

  /** adjustFd: the loaded svcmap_conns_adjust program of the tc object. */
  constructor(maps: ConnCountMaps, adjustFd: number) {
    this.#maps = maps;
    this.#adjustFd = adjustFd;
  }

  /** Adds delta to a backend's count (field 'sock' or 'tc'), atomically in the kernel. */
  adjust(backendId: number, field: 'sock' | 'tc', delta: number): void {
    const ctx = Buffer.alloc(connsAdjust.layout.size);
    connsAdjust.encode({ backend_id: backendId, field: field === 'sock' ? CONNS_FIELD_SOCK : CONNS_FIELD_TC, delta: BigInt(delta) }, ctx, 0);
    const rc = progRunSyscall(this.#adjustFd, ctx);
    if (rc !== 0) throw new Error(`${CONNS_ADJUST_PROGRAM} refused backend ${backendId} field ${field}: ${rc}`);
  }

  snapshot(): ConnsSnapshot {
    return new Map(this.#maps.conns.entries());
  }

  /**
   * After a GC pass: `ct` is what the pass read (after `before` was taken),
   * `deleted` the indices into it that the pass removed.
   */
  afterGc(before: ConnsSnapshot, ct: PackedCt, deleted: Uint32Array): RecountResult {
    const backends = new Map(this.#maps.backends.entries());
    const keys = Buffer.from(ct.keys.buffer, ct.keys.byteOffset, ct.keys.byteLength);
    const values = Buffer.from(ct.values.buffer, ct.values.byteOffset, ct.values.byteLength);
    const ks = ctKey.layout.size, vs = ctValue.layout.size;
    /** The backend id an open forward entry counts for, or 0 (not forward, closing, or its backend is not the one it went to). */
    const countedFor = (i: number): number => {
      if (keys[i * ks + KDIR] !== CT_DIR_FWD) return 0;
      const v = i * vs;
      if (values[v + V.flags]! & CT_F_CLOSING) return 0;
      const id = values.readUInt32LE(v + V.backendId);
      const be = backends.get(id);
      if (!be || ipv4ToU32(be.addr) !== values.readUInt32BE(v + V.newDaddr) || be.port !== values.readUInt16BE(v + V.newDport)) return 0;
      return id;
    };
    const res: RecountResult = { collected: 0, corrected: 0, drift: 0, busy: 0, removed: 0 };
    const applied = new Map<number, number>();
    const gone = new Uint8Array(ct.count);
    for (const i of deleted) {
      gone[i] = 1;
      const id = countedFor(i);
      if (!id) continue;
      this.adjust(id, 'tc', -1);
      applied.set(id, (applied.get(id) ?? 0) - 1);
      res.collected++;
    }
    const expected = new Map<number, number>();
    for (let i = 0; i < ct.count; i++) {
      if (gone[i]) continue;
      const id = countedFor(i);
      if (id) expected.set(id, (expected.get(id) ?? 0) + 1);
    }
    const after = this.snapshot();
    for (const [id, c] of after) {
      if (!backends.has(id)) {
        if (this.#maps.conns.delete(id)) res.removed++;
        continue;
      }
      const was = before.get(id)?.tc ?? 0n;
      if (c.tc - was !== BigInt(applied.get(id) ?? 0)) {
        res.busy++;
        continue;
      }
      const want = BigInt(expected.get(id) ?? 0);
      if (want !== c.tc) {
        this.adjust(id, 'tc', Number(want - c.tc));
        res.corrected++;
        res.drift += Math.abs(Number(want - c.tc));
      }
    }
    // An open flow whose backend has no entry at all: its increment was lost.
    for (const [id, want] of expected) {
      if (after.has(id) || before.has(id)) continue;
      this.adjust(id, 'tc', want);
      res.corrected++;
      res.drift += want;
    }
    return res;
  }
}
