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
//  - with a SocketCounter (bpf/sock_count.c, an iterator over the socket
//    storage), the socket counts the same way: each backend's sock field is
//    set to the sockets whose storage still names it (and its endpoint),
//    unless it changed during the pass. That corrects a release missed
//    while no sock_release program was attached, and sockets counted by
//    storage that a reused backend id no longer matches.
//
// Every change is an atomic add in the kernel (the tc object's
// svcmap_conns_adjust, a BPF_PROG_TYPE_SYSCALL program run with
// BPF_PROG_RUN), never a map write, which would overwrite the datapath's
// concurrent adds.
import { progRunSyscall } from '../bpf/test-run.ts';
import { type BackendConns, type BackendValue, connsAdjust, ctKey, ctValue } from '../maps/codecs.ts';
import { CONNS_FIELD_SOCK, CONNS_FIELD_TC, CT_DIR_FWD, CT_F_CLOSING, CT_F_COUNTED } from '../maps/constants.ts';
import { ipv4ToU32 } from '../maps/ipv4.ts';
import type { TypedMap } from '../maps/typed-map.ts';
import type { PackedCt } from './ct-packed.ts';
import type { SocketCounter } from './socket-recount.ts';

export const CONNS_ADJUST_PROGRAM = 'svcmap_conns_adjust';

export interface ConnCountMaps {
  conns: TypedMap<number, BackendConns>;
  backends: TypedMap<number, BackendValue>;
}

export interface FieldRecount {
  /** Backends whose count was set right, and by how much in all (absolute). */
  corrected: number;
  drift: number;
  /** Backends whose count changed during the pass: left for the next one. */
  busy: number;
}

export interface RecountResult {
  /** Open flows the GC removed, each taken off its backend's count. */
  collected: number;
  tc: FieldRecount;
  /** With a SocketCounter. */
  sock?: FieldRecount;
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

/** Distinct backend ids a pass looks up one by one before it reads the whole backends map instead. */
export const BACKENDS_FULL_READ = 4096;

/**
 * The backends map as one pass reads it: each id looked up once, when the
 * pass needs it (the backends its flows, sockets and counts name: an idle
 * node's, none), and past BACKENDS_FULL_READ ids the whole map read at once.
 * Decoding the whole map on every pass (100k backends at 10k Services x 10,
 * every 10 s) grew an idle agent's heap by ~200 MiB between collections. The
 * pass runs on the agent's thread, as the syncs that write the map do, so
 * reading by id sees what one read of the whole map would.
 */
export function backendLookup(map: Pick<TypedMap<number, BackendValue>, 'get' | 'entries'>): (id: number) => BackendValue | undefined {
  const seen = new Map<number, BackendValue | undefined>();
  let all: Map<number, BackendValue> | undefined;
  return (id) => {
    if (all) return all.get(id);
    if (seen.has(id)) return seen.get(id);
    if (seen.size >= BACKENDS_FULL_READ) {
      all = new Map(map.entries());
      seen.clear();
      return all.get(id);
    }
    const be = map.get(id);
    seen.set(id, be);
    return be;
  };
}

export class ConnCounts {
  readonly #maps: ConnCountMaps;
  readonly #adjustFd: number;
  readonly #sockets: SocketCounter | undefined;

  /** adjustFd: the loaded svcmap_conns_adjust program of the tc object; sockets: the socket recount, where the kernel has it. */
  constructor(maps: ConnCountMaps, adjustFd: number, sockets?: SocketCounter) {
    this.#maps = maps;
    this.#adjustFd = adjustFd;
    this.#sockets = sockets;
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
    const backend = backendLookup(this.#maps.backends);
    const keys = Buffer.from(ct.keys.buffer, ct.keys.byteOffset, ct.keys.byteLength);
    const values = Buffer.from(ct.values.buffer, ct.values.byteOffset, ct.values.byteLength);
    const ks = ctKey.layout.size, vs = ctValue.layout.size;
    /** The backend id an open forward entry counts for, or 0 (not forward, not counted, closing, or its backend is not the one it went to). */
    const countedFor = (i: number): number => {
      if (keys[i * ks + KDIR] !== CT_DIR_FWD) return 0;
      const v = i * vs;
      if ((values[v + V.flags]! & (CT_F_CLOSING | CT_F_COUNTED)) !== CT_F_COUNTED) return 0;
      const id = values.readUInt32LE(v + V.backendId);
      const be = backend(id);
      if (!be || ipv4ToU32(be.addr) !== values.readUInt32BE(v + V.newDaddr) || be.port !== values.readUInt16BE(v + V.newDport)) return 0;
      return id;
    };
    const res: RecountResult = { collected: 0, tc: { corrected: 0, drift: 0, busy: 0 }, removed: 0 };
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
    const expectedTc = new Map<number, number>();
    for (let i = 0; i < ct.count; i++) {
      if (gone[i]) continue;
      const id = countedFor(i);
      if (id) expectedTc.set(id, (expectedTc.get(id) ?? 0) + 1);
    }
    let expectedSock: Map<number, number> | undefined;
    if (this.#sockets) {
      expectedSock = new Map();
      for (const s of this.#sockets.count()) {
        const be = backend(s.backend_id);
        if (be && be.addr === s.addr && be.port === s.port) expectedSock.set(s.backend_id, (expectedSock.get(s.backend_id) ?? 0) + s.sockets);
      }
      res.sock = { corrected: 0, drift: 0, busy: 0 };
    }
    const after = this.snapshot();
    for (const [id, c] of after) {
      if (backend(id) === undefined) {
        if (this.#maps.conns.delete(id)) res.removed++;
        continue;
      }
      const was = before.get(id);
      this.#settle(id, 'tc', res.tc, c.tc - (was?.tc ?? 0n) - BigInt(applied.get(id) ?? 0), c.tc, expectedTc.get(id) ?? 0);
      if (expectedSock) this.#settle(id, 'sock', res.sock!, c.sock - (was?.sock ?? 0n), c.sock, expectedSock.get(id) ?? 0);
    }
    // Connections whose backend has no entry at all: their increments were lost.
    for (const [field, expected, r] of [['tc', expectedTc, res.tc], ['sock', expectedSock, res.sock]] as const) {
      for (const [id, want] of expected ?? []) {
        if (after.has(id) || before.has(id)) continue;
        this.adjust(id, field, want);
        r!.corrected++;
        r!.drift += want;
      }
    }
    return res;
  }

  /** Sets one field of one backend to `want` unless the datapath moved it during the pass (`moved` not 0). */
  #settle(id: number, field: 'sock' | 'tc', r: FieldRecount, moved: bigint, now: bigint, want: number): void {
    if (moved !== 0n) {
      r.busy++;
      return;
    }
    const d = BigInt(want) - now;
    if (d === 0n) return;
    this.adjust(id, field, Number(d));
    r.corrected++;
    r.drift += Math.abs(Number(d));
  }

  close(): void {
    this.#sockets?.close();
  }
}
