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
//  - IPv6 backends (svcmap_conns6, ids of svcmap_be6), with their own
//    SocketCounter and conntrack map (svcmap_ct6): the same decrements and
//    recounts of both fields, and the entries of gone backends removed.
//
// Every change is an atomic add in the kernel (the tc object's
// svcmap_conns_adjust, a BPF_PROG_TYPE_SYSCALL program run with
// BPF_PROG_RUN), never a map write, which would overwrite the datapath's
// concurrent adds.
import { progRunSyscall } from '../../bpf/test-run.ts';
import {
  type BackendConns,
  type BackendValue,
  type Codec,
  type CtKey,
  type CtValue,
  connsAdjust,
  ct6Key,
  ct6Value,
  ctKey,
  ctValue,
} from '../../maps/codecs.ts';
import { CONNS_FIELD_SOCK, CONNS_FIELD_TC, CT_DIR_FWD, CT_F_CLOSING, CT_F_COUNTED } from '../../maps/constants.ts';
import { ipv4ToU32 } from '../../util/ipv4.ts';
import { ipv6ToBytes } from '../../util/ipv6.ts';
import type { TypedMap } from '../../maps/typed-map.ts';
import type { PackedCt } from './ct-packed.ts';
import type { SocketCounter } from './socket-recount.ts';
import type { Family } from '../../util/family.ts';
import type { FamilyMaps } from '../../maps/datapath-maps.ts';
import type { Component } from '../components.ts';

export const CONNS_ADJUST_PROGRAM = 'svcmap_conns_adjust';

/** One family's counts (svcmap_be_conns, svcmap_conns6) and the backends their ids name; a family without counts is left out. */
export type ConnCountMaps = Pick<FamilyMaps, 'family' | 'conns' | 'backends'>;

/** Loads a family's socket recount; undefined where the kernel cannot (said in the log). */
export type SocketCounterLoader = (family: Family) => SocketCounter | undefined;

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
  /** IPv6 backends: the same, tc's part when the pass read svcmap_ct6. */
  v6?: { collected?: number; tc?: FieldRecount; sock?: FieldRecount; removed: number };
}

/** One conntrack map as a GC pass read it (`ct`) and the indices into it that the pass removed. */
export interface CtPassRead {
  ct: PackedCt;
  deleted: Uint32Array;
}

/** What a pass saw before it read the conntrack maps: each family's counts. */
export type ConnsSnapshot = ReadonlyMap<Family, ReadonlyMap<number, BackendConns>>;

/** One family's part of a RecountResult (tc's only when the pass read the family's conntrack map). */
type FamilyRecount = NonNullable<RecountResult['v6']>;

const fieldAt = (layout: typeof ctValue.layout, name: string) => layout.fields.find((f) => f.name === name)!.offset;

/** Where a conntrack layout (svcmap_ct or svcmap_ct6) keeps what a counted flow is known by, in bytes. */
interface CountedLayout {
  ks: number;
  vs: number;
  dir: number;
  newDaddr: number;
  newDport: number;
  backendId: number;
  flags: number;
  /** Whether a backend's address is the entry's new_daddr. */
  sameAddr: (be: BackendValue, values: Buffer, at: number) => boolean;
}

function countedLayout(key: Codec<CtKey>, value: Codec<CtValue>, sameAddr: CountedLayout['sameAddr']): CountedLayout {
  return {
    ks: key.layout.size,
    vs: value.layout.size,
    dir: fieldAt(key.layout, 'dir'),
    newDaddr: fieldAt(value.layout, 'new_daddr'),
    newDport: fieldAt(value.layout, 'new_dport'),
    backendId: fieldAt(value.layout, 'backend_id'),
    flags: fieldAt(value.layout, 'flags'),
    sameAddr,
  };
}

/** An IPv6 backend's address in bytes, parsed once per backend object (backendLookup() hands out one per id per pass). */
const addr6Bytes = new WeakMap<BackendValue, Buffer>();
function bytesOf6(be: BackendValue): Buffer {
  let b = addr6Bytes.get(be);
  if (!b) addr6Bytes.set(be, (b = Buffer.from(ipv6ToBytes(be.addr))));
  return b;
}

const COUNTED: Readonly<Record<Family, CountedLayout>> = {
  4: countedLayout(ctKey, ctValue, (be, values, at) => ipv4ToU32(be.addr) === values.readUInt32BE(at)),
  6: countedLayout(ct6Key, ct6Value, (be, values, at) => bytesOf6(be).equals(values.subarray(at, at + 16))),
};

/** One family's tc part of a pass: the flows the GC collected taken off, and the counts the surviving entries say. */
interface TcPass {
  expected: Map<number, number>;
  /** The decrements this pass made, by backend. */
  applied: Map<number, number>;
  r: FieldRecount;
  collected: number;
}

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

/** The counts of each family that has them: a component whose start loads the socket recounts. */
export class ConnCounts implements Component {
  readonly name = 'connection counts';
  readonly #families: ReadonlyArray<ConnCountMaps & { conns: TypedMap<number, BackendConns> }>;
  readonly #adjustFd: number;
  readonly #loadSockets: SocketCounterLoader | undefined;
  readonly #sockets = new Map<Family, SocketCounter>();

  /** adjustFd: the loaded svcmap_conns_adjust program of the tc object; loadSockets: the socket recount, loaded by start(). */
  constructor(families: readonly ConnCountMaps[], adjustFd: number, loadSockets?: SocketCounterLoader) {
    this.#families = families.flatMap((f) => (f.conns ? [{ ...f, conns: f.conns }] : []));
    this.#adjustFd = adjustFd;
    this.#loadSockets = loadSockets;
  }

  /** Whether any family has counts. */
  get any(): boolean {
    return this.#families.length > 0;
  }

  /** Loads each family's socket recount; a kernel that cannot load the first is not asked for the others. */
  start(): void {
    if (!this.#loadSockets) return;
    try {
      for (const { family } of this.#families) {
        const sockets = this.#loadSockets(family);
        if (!sockets) break;
        this.#sockets.set(family, sockets);
      }
    } catch (err) {
      this.stop();
      throw err;
    }
  }

  /** Adds delta to a backend's count (field 'sock' or 'tc'; family 6: an IPv6 backend id), atomically in the kernel. */
  adjust(backendId: number, field: 'sock' | 'tc', delta: number, family: Family = 4): void {
    const ctx = Buffer.alloc(connsAdjust.layout.size);
    connsAdjust.encode(
      { backend_id: backendId, field: field === 'sock' ? CONNS_FIELD_SOCK : CONNS_FIELD_TC, family, delta: BigInt(delta) },
      ctx,
      0,
    );
    const rc = progRunSyscall(this.#adjustFd, ctx);
    if (rc !== 0) throw new Error(`${CONNS_ADJUST_PROGRAM} refused IPv${family} backend ${backendId} field ${field}: ${rc}`);
  }

  snapshot(): ConnsSnapshot {
    return new Map(this.#families.map((f) => [f.family, new Map(f.conns.entries())]));
  }

  /**
   * After a GC pass: `reads`, what the pass read of each family's conntrack
   * map (after `before` was taken) and the indices it removed.
   */
  afterGc(before: ConnsSnapshot, reads: ReadonlyMap<Family, CtPassRead>): RecountResult {
    const byFamily = new Map<Family, FamilyRecount>();
    for (const f of this.#families) {
      const backend = backendLookup(f.backends);
      const read = reads.get(f.family);
      const tc = read ? this.#tcPass(f.family, COUNTED[f.family], read, backend) : undefined;
      const r = this.#recount(f.family, f.conns, backend, before.get(f.family) ?? new Map(), this.#sockets.get(f.family), tc);
      byFamily.set(f.family, tc ? { collected: tc.collected, tc: tc.r, ...r } : r);
    }
    // IPv4's at the top, IPv6's under v6 (the shape the log and its readers know).
    const { collected = 0, tc = { corrected: 0, drift: 0, busy: 0 }, ...r4 } = byFamily.get(4) ?? { removed: 0 };
    const v6 = byFamily.get(6);
    return { collected, tc, ...r4, ...(v6 ? { v6 } : {}) };
  }

  /** Takes the open counted flows the pass removed off their backends, and counts those left. */
  #tcPass(family: Family, L: CountedLayout, read: CtPassRead, backend: (id: number) => BackendValue | undefined): TcPass {
    const { ct, deleted } = read;
    const keys = Buffer.from(ct.keys.buffer, ct.keys.byteOffset, ct.keys.byteLength);
    const values = Buffer.from(ct.values.buffer, ct.values.byteOffset, ct.values.byteLength);
    /** The backend id an open forward entry counts for, or 0 (not forward, not counted, closing, or its backend is not the one it went to). */
    const countedFor = (i: number): number => {
      if (keys[i * L.ks + L.dir] !== CT_DIR_FWD) return 0;
      const v = i * L.vs;
      if ((values[v + L.flags]! & (CT_F_CLOSING | CT_F_COUNTED)) !== CT_F_COUNTED) return 0;
      const id = values.readUInt32LE(v + L.backendId);
      const be = backend(id);
      if (!be || !L.sameAddr(be, values, v + L.newDaddr) || be.port !== values.readUInt16BE(v + L.newDport)) return 0;
      return id;
    };
    const out: TcPass = { expected: new Map(), applied: new Map(), r: { corrected: 0, drift: 0, busy: 0 }, collected: 0 };
    const gone = new Uint8Array(ct.count);
    for (const i of deleted) {
      gone[i] = 1;
      const id = countedFor(i);
      if (!id) continue;
      this.adjust(id, 'tc', -1, family);
      out.applied.set(id, (out.applied.get(id) ?? 0) - 1);
      out.collected++;
    }
    for (let i = 0; i < ct.count; i++) {
      if (gone[i]) continue;
      const id = countedFor(i);
      if (id) out.expected.set(id, (out.expected.get(id) ?? 0) + 1);
    }
    return out;
  }

  /**
   * One family's counts after a pass: entries of gone backends removed, the
   * socket counts (with a counter) and, given `tc`, the tc counts set to what
   * was found, each unless it moved during the pass.
   */
  #recount(
    family: Family,
    conns: TypedMap<number, BackendConns>,
    backend: (id: number) => BackendValue | undefined,
    before: ReadonlyMap<number, BackendConns>,
    sockets: SocketCounter | undefined,
    tc?: TcPass,
  ): { sock?: FieldRecount; removed: number } {
    const out: { sock?: FieldRecount; removed: number } = { removed: 0 };
    let expectedSock: Map<number, number> | undefined;
    if (sockets) {
      expectedSock = new Map();
      for (const s of sockets.count()) {
        const be = backend(s.backend_id);
        if (be && be.addr === s.addr && be.port === s.port)
          expectedSock.set(s.backend_id, (expectedSock.get(s.backend_id) ?? 0) + s.sockets);
      }
      out.sock = { corrected: 0, drift: 0, busy: 0 };
    }
    const after = new Map(conns.entries());
    for (const [id, c] of after) {
      if (backend(id) === undefined) {
        if (conns.delete(id)) out.removed++;
        continue;
      }
      const was = before.get(id);
      if (tc)
        this.#settle(family, id, 'tc', tc.r, c.tc - (was?.tc ?? 0n) - BigInt(tc.applied.get(id) ?? 0), c.tc, tc.expected.get(id) ?? 0);
      if (expectedSock) this.#settle(family, id, 'sock', out.sock!, c.sock - (was?.sock ?? 0n), c.sock, expectedSock.get(id) ?? 0);
    }
    // Connections whose backend has no entry at all: their increments were lost.
    for (const [field, expected, r] of [
      ['tc', tc?.expected, tc?.r],
      ['sock', expectedSock, out.sock],
    ] as const) {
      for (const [id, want] of expected ?? []) {
        if (after.has(id) || before.has(id)) continue;
        this.adjust(id, field, want, family);
        r!.corrected++;
        r!.drift += want;
      }
    }
    return out;
  }

  /** Sets one field of one backend to `want` unless the datapath moved it during the pass (`moved` not 0). */
  #settle(family: Family, id: number, field: 'sock' | 'tc', r: FieldRecount, moved: bigint, now: bigint, want: number): void {
    if (moved !== 0n) {
      r.busy++;
      return;
    }
    const d = BigInt(want) - now;
    if (d === 0n) return;
    this.adjust(id, field, Number(d), family);
    r.corrected++;
    r.drift += Math.abs(Number(d));
  }

  /** Closes the socket recounts (the counts stay with the datapath). */
  stop(): void {
    for (const s of this.#sockets.values()) s.close();
    this.#sockets.clear();
  }
}
