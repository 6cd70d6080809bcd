// Garbage collection of the tc datapath's connection tracking (svcmap_ct).
//
// The datapath remembers every flow it translates in two entries (forward
// and reply; see bpf/include/svcmap_maps.h) and marks their state as packets
// pass: CT_F_SEEN_REPLY once the backend answered, CT_F_FIN_* and
// CT_F_CLOSING as the connection goes away. The map is an LRU, but LRU
// eviction only starts when it is full: until then the entries of finished
// flows stay, and those that never close (UDP, a peer that went away) keep
// their SNAT ports reserved. (A closed TCP flow's port goes to a new flow in
// the datapath already, see nat4_snat_take_over() in bpf/lib/nat.h.) So the
// agent reads the map every few seconds and removes flows that have been
// idle longer than their state allows (Cilium's lifetimes by default), both
// entries of a flow in the same batch.
//
// Timestamps: the datapath's last_seen is bpf_ktime_get_ns(), which is
// CLOCK_MONOTONIC; process.hrtime.bigint() is libuv's uv_hrtime(), which on
// Linux reads clock_gettime(CLOCK_MONOTONIC) too, so the two compare
// directly (test/bpf/tc-ct-gc.test.ts checks it against the kernel).
//
// Races: an entry read as idle may see a packet before the delete lands; the
// flow then starts afresh on its next packet (a new backend choice for that
// flow). The window is the time between one batch read and one batch delete,
// and the entry was idle for its whole lifetime before it, as with Cilium's
// own GC. One writer must never meet the GC that way: the datapath's take-over
// of a closed flow's SNAT port (nat4_snat_take_over() in bpf/lib/nat.h)
// writes a new flow's reply entry over the old one's key, which the GC would
// then delete under the new flow (its backend's answers then reach the node's
// stack untranslated and are reset). So the GC deletes a flow's forward
// entries first and leaves the reply entry of a flow whose forward entry was
// already gone (a take-over removes it: repliesToDelete); and the datapath
// takes over a reply entry without its forward entry only while it has been
// idle for less than SNAT_TAKE_OVER_MAX_MS, shorter than the closing lifetime,
// with the GC judging idleness at a time taken before the read: a lone reply
// entry the GC deletes was past the take-over limit before the GC looked.
//
// IPv6 flows live in svcmap_ct6 under the same rules (16-byte addresses);
// each pass collects both maps, the same code over either layout (CtFormat).
import { BpfError, errnoNumber } from '../../bpf/errors.ts';
import { type BpfMap, libbpfText } from '../../bpf/map.ts';
import { native } from '../../bpf/native.ts';
import { type Codec, type CtKey, type CtValue, ct6Key, ct6Value, ctKey, ctValue } from '../../maps/codecs.ts';
import {
  CT_DIR_FWD,
  CT_DIR_REPLY_IN,
  CT_DIR_REPLY_OUT,
  CT_F_CLOSING,
  CT_F_SEEN_REPLY,
  CT_F_SNAT,
  IPPROTO_TCP,
  SNAT_TAKE_OVER_MAX_NS,
  SVCMAP_MAP_CT,
  SVCMAP_MAP_CT6,
} from '../../maps/constants.ts';
import type { StructLayout } from '../../maps/layout.ts';
import type { TypedMap } from '../../maps/typed-map.ts';
import type { ConnCounts, RecountResult } from '../datapath/conn-counts.ts';
import type { Logger } from '../log.ts';
import type { AgentMetrics } from '../http/metrics.ts';
import type { PackedCt } from '../datapath/ct-packed.ts';
import type { FamilyMaps } from '../../maps/datapath-maps.ts';
import type { Family } from '../../util/family.ts';
import type { Component } from '../components.ts';

/** How long a flow may stay idle (no packet in either direction), by state. */
export interface CtLifetimes {
  /** TCP once the backend answered, until it closes. */
  tcpEstablishedMs: number;
  /** TCP before the backend answered (SYN sent, nothing back). */
  tcpSynMs: number;
  /** TCP after an RST, or a FIN from each side. */
  tcpClosingMs: number;
  /** UDP (answered or not) and anything else. */
  otherMs: number;
}

/** Cilium's defaults (CT_CONNECTION_LIFETIME_TCP, CT_SYN_TIMEOUT, CT_CLOSE_TIMEOUT, CT_CONNECTION_LIFETIME_NONTCP). */
export const DEFAULT_CT_LIFETIMES: Readonly<CtLifetimes> = {
  tcpEstablishedMs: 6 * 3_600_000,
  tcpSynMs: 60_000,
  tcpClosingMs: 10_000,
  otherMs: 60_000,
};

export const DEFAULT_CT_GC_INTERVAL_MS = 10_000;

/** The datapath's SNAT take-over limit in ms: the closing lifetime must be longer (see Races above). */
export const SNAT_TAKE_OVER_MAX_MS = SNAT_TAKE_OVER_MAX_NS / 1e6;

export type CtFlowState = 'tcp_established' | 'tcp_syn' | 'tcp_closing' | 'other';

/** Every state at 0 flows. */
const noFlows = (): Record<CtFlowState, number> => ({ tcp_established: 0, tcp_syn: 0, tcp_closing: 0, other: 0 });

/** The state a flow's (combined) flags and protocol put it in. */
export function ctFlowState(proto: number, flags: number): CtFlowState {
  if (proto !== IPPROTO_TCP) return 'other';
  if (flags & CT_F_CLOSING) return 'tcp_closing';
  if (flags & CT_F_SEEN_REPLY) return 'tcp_established';
  return 'tcp_syn';
}

/** A conntrack entry's "leave the address" (either family). */
const isZero = (addr: string) => addr === '0.0.0.0' || addr === '::';

/**
 * The key of the other entry of the flow that entry {key, value} belongs
 * to, as the datapath derives it (ct4_peer_key in bpf/lib/ct.h): the
 * reverse of the tuple the entry translates packets into. Forward entry of
 * a SNATed flow -> CT_DIR_REPLY_IN {backend, node ip, backend port, SNAT
 * port}; of a DNAT-only flow -> CT_DIR_REPLY_OUT {backend, client, backend
 * port, client port}; reply entry -> its CT_DIR_FWD entry.
 */
export function ctPeerKey(key: CtKey, value: CtValue): CtKey {
  return {
    saddr: !isZero(value.new_daddr) ? value.new_daddr : key.daddr,
    daddr: !isZero(value.new_saddr) ? value.new_saddr : key.saddr,
    sport: value.new_dport || key.dport,
    dport: value.new_sport || key.sport,
    proto: key.proto,
    dir: key.dir !== CT_DIR_FWD ? CT_DIR_FWD : value.flags & CT_F_SNAT ? CT_DIR_REPLY_IN : CT_DIR_REPLY_OUT,
  };
}

export const ctKeyId = (k: CtKey): string => `${k.saddr}:${k.sport}>${k.daddr}:${k.dport}/${k.proto}/${k.dir}`;

/**
 * Where a field of a conntrack codec lies, in units of its own size: the
 * packed GC reads the entries through typed-array views, and takes every
 * position from the codecs, which are checked against the datapath's BTF
 * at load (a field that moves in C moves here, or the agent does not start).
 * An address is `words` aligned 32-bit words (1 for IPv4, 4 for IPv6).
 */
function slot(layout: StructLayout, name: string, size: 1 | 2 | 4 | 8, words = 1): number {
  const f = layout.fields.find((x) => x.name === name);
  if (!f || f.size !== size * words || f.offset % size !== 0 || layout.size % size !== 0) {
    throw new Error(`conntrack GC: ${layout.cName}.${name} is not an aligned ${size * words}-byte field`);
  }
  return f.offset / size;
}

/** One conntrack layout (svcmap_ct or svcmap_ct6) as the packed GC reads it. */
export interface CtFormat {
  map: string;
  key: Codec<CtKey>;
  value: Codec<CtValue>;
  keySize: number;
  valueSize: number;
  /** 32-bit words per address. */
  addrWords: number;
  K: { saddr: number; daddr: number; sport: number; dport: number; proto: number; dir: number };
  V: { newSaddr: number; newDaddr: number; newSport: number; newDport: number; flags: number; lastSeen: number };
}

function ctFormat(map: string, key: Codec<CtKey>, value: Codec<CtValue>, addrWords: number): CtFormat {
  const keySize = key.layout.size;
  if (keySize % 4 !== 0) throw new Error(`conntrack GC: struct ${key.layout.cName} is ${keySize} bytes, not whole words`);
  return {
    map,
    key,
    value,
    keySize,
    valueSize: value.layout.size,
    addrWords,
    K: {
      saddr: slot(key.layout, 'saddr', 4, addrWords),
      daddr: slot(key.layout, 'daddr', 4, addrWords),
      sport: slot(key.layout, 'sport', 2),
      dport: slot(key.layout, 'dport', 2),
      proto: slot(key.layout, 'proto', 1),
      dir: slot(key.layout, 'dir', 1),
    },
    V: {
      newSaddr: slot(value.layout, 'new_saddr', 4, addrWords),
      newDaddr: slot(value.layout, 'new_daddr', 4, addrWords),
      newSport: slot(value.layout, 'new_sport', 2),
      newDport: slot(value.layout, 'new_dport', 2),
      flags: slot(value.layout, 'flags', 1),
      lastSeen: slot(value.layout, 'last_seen', 8),
    },
  };
}

/** svcmap_ct (IPv4) and svcmap_ct6 (IPv6). */
export const CT4_FORMAT = ctFormat(SVCMAP_MAP_CT, ctKey, ctValue, 1);
export const CT6_FORMAT = ctFormat(SVCMAP_MAP_CT6, ct6Key, ct6Value, 4);
/** Each family's conntrack layout. */
export const CT_FORMATS: Readonly<Record<Family, CtFormat>> = { 4: CT4_FORMAT, 6: CT6_FORMAT };

/** One family's conntrack map (a family without one is left out). */
export type CtGcMaps = Pick<FamilyMaps, 'family' | 'ct'>;

/** A conntrack map's entries as the kernel hands them over: `count` packed keys and values. */
export interface PackedSelection {
  /** Entries to delete, by index: every forward entry first, then the reply entries. */
  indices: Uint32Array;
  /** How many of `indices` are forward entries. */
  forwardCount: number;
  /** For each reply entry in `indices` (in order), the position in `indices` of its flow's forward entry, -1 for a lone one. */
  replyPartner: Int32Array;
  /** Flows removed (a pair or a lone entry counts once), by state. */
  flows: Record<CtFlowState, number>;
}

/** A hash of the key words at k32[o..o+words) (keys are hashed and compared as whole words: pads are zero in the kernel's keys and in ours). */
function hashKey(k32: Uint32Array, o: number, words: number): number {
  let h = 0x9e3779b9;
  for (let i = 0; i < words; i++) {
    h = Math.imul(h ^ (h >>> 13) ^ k32[o + i]!, i & 1 ? 0xc2b2ae35 : 0x85ebca6b);
  }
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * Which entries of a conntrack map to remove at monotonic time nowNs: the
 * GC's decision, a pure function over the packed entries (selectExpiredCt
 * is the same over decoded ones, for tests and tools).
 *
 * A forward entry and the reply entry it names (ctPeerKey) form a flow when
 * that reply entry names the forward entry back; the flow's state is the
 * union of both entries' flags, its age runs from the newer last_seen, and
 * both go together. A forward or reply entry without its partner (the LRU
 * evicted one, or another flow took the reply key over) is judged alone by
 * the same lifetimes. An entry whose last_seen is ahead of nowNs is not idle.
 *
 * Forward entries come first: deleted in that order, no packet can meet a
 * forward entry whose SNAT port was already handed to another flow.
 *
 * Works on the raw bytes (typed-array views, an open-addressing index of
 * the keys): a full map of 262144 entries takes tens of milliseconds and a
 * few MiB, where decoding every entry into objects took seconds and
 * hundreds of MiB.
 */
export function selectExpiredPacked(
  ct: PackedCt,
  nowNs: bigint,
  lifetimes: CtLifetimes = DEFAULT_CT_LIFETIMES,
  fmt: CtFormat = CT4_FORMAT,
): PackedSelection {
  const n = ct.count;
  const { keySize: KEY_SIZE, valueSize: VALUE_SIZE, K, V, addrWords: AW } = fmt;
  const KEY_WORDS = KEY_SIZE / 4;
  // Aligned copies, so that the views below may read words.
  const kbuf = new ArrayBuffer(n * KEY_SIZE);
  const vbuf = new ArrayBuffer(n * VALUE_SIZE);
  new Uint8Array(kbuf).set(ct.keys.subarray(0, n * KEY_SIZE));
  new Uint8Array(vbuf).set(ct.values.subarray(0, n * VALUE_SIZE));
  const k32 = new Uint32Array(kbuf);
  const k16 = new Uint16Array(kbuf);
  const k8 = new Uint8Array(kbuf);
  const v32 = new Uint32Array(vbuf);
  const v16 = new Uint16Array(vbuf);
  const v8 = new Uint8Array(vbuf);
  const v64 = new BigUint64Array(vbuf);
  // Entry i starts at i * (its size in units of the view); K and V give the field within it.
  const K32 = KEY_SIZE / 4,
    K16 = KEY_SIZE / 2,
    V32 = VALUE_SIZE / 4,
    V16 = VALUE_SIZE / 2,
    V64 = VALUE_SIZE / 8;
  const dirOf = (i: number) => k8[i * KEY_SIZE + K.dir]!;
  const protoOf = (i: number) => k8[i * KEY_SIZE + K.proto]!;
  const flagsOf = (i: number) => v8[i * VALUE_SIZE + V.flags]!;
  const lastSeenOf = (i: number) => v64[i * V64 + V.lastSeen]!;

  let cap = 16;
  while (cap < n * 2) cap *= 2;
  const mask = cap - 1;
  const table = new Int32Array(cap).fill(-1);
  for (let i = 0; i < n; i++) {
    let h = hashKey(k32, i * K32, KEY_WORDS) & mask;
    while (table[h] !== -1) h = (h + 1) & mask;
    table[h] = i;
  }
  // The peer key of entry i is built in a scratch key (so the words have the kernel's byte layout).
  const s32 = new Uint32Array(KEY_WORDS);
  const s16 = new Uint16Array(s32.buffer);
  const s8 = new Uint8Array(s32.buffer);
  const sameKey = (j: number): boolean => {
    const o = j * K32;
    for (let w = 0; w < KEY_WORDS; w++) if (k32[o + w] !== s32[w]) return false;
    return true;
  };
  const find = (): number => {
    let h = hashKey(s32, 0, KEY_WORDS) & mask;
    for (;;) {
      const j = table[h]!;
      if (j === -1 || sameKey(j)) return j;
      h = (h + 1) & mask;
    }
  };
  const peerOf = (i: number): number => {
    const ko = i * K32,
      vo = i * V32,
      k2 = i * K16,
      v2 = i * V16;
    s32.fill(0);
    // An address is "leave it" only when all of its words are zero.
    const addr = (to: number, fromValue: number, fromKey: number) => {
      let any = 0;
      for (let w = 0; w < AW; w++) any |= v32[vo + fromValue + w]!;
      for (let w = 0; w < AW; w++) s32[to + w] = any ? v32[vo + fromValue + w]! : k32[ko + fromKey + w]!;
    };
    addr(K.saddr, V.newDaddr, K.daddr);
    addr(K.daddr, V.newSaddr, K.saddr);
    s16[K.sport] = v16[v2 + V.newDport]! || k16[k2 + K.dport]!;
    s16[K.dport] = v16[v2 + V.newSport]! || k16[k2 + K.sport]!;
    s8[K.proto] = protoOf(i);
    s8[K.dir] = dirOf(i) !== CT_DIR_FWD ? CT_DIR_FWD : flagsOf(i) & CT_F_SNAT ? CT_DIR_REPLY_IN : CT_DIR_REPLY_OUT;
    return find();
  };

  const toNs = (ms: number) => BigInt(Math.round(ms * 1e6));
  const cutoff: Record<CtFlowState, bigint> = {
    tcp_established: nowNs - toNs(lifetimes.tcpEstablishedMs),
    tcp_syn: nowNs - toNs(lifetimes.tcpSynMs),
    tcp_closing: nowNs - toNs(lifetimes.tcpClosingMs),
    other: nowNs - toNs(lifetimes.otherMs),
  };
  const flows = noFlows();
  const expired = (i: number, flags: number, lastSeen: bigint): boolean => {
    const state = ctFlowState(protoOf(i), flags);
    if (lastSeen >= cutoff[state]) return false;
    flows[state]++;
    return true;
  };

  const forward: number[] = [];
  const reply: number[] = [];
  const partner: number[] = [];
  const paired = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    if (dirOf(i) !== CT_DIR_FWD) continue;
    const last = lastSeenOf(i);
    const j = peerOf(i);
    if (j >= 0 && j !== i && dirOf(j) !== CT_DIR_FWD && peerOf(j) === i) {
      paired[j] = 1;
      const jlast = lastSeenOf(j);
      if (expired(i, flagsOf(i) | flagsOf(j), last > jlast ? last : jlast)) {
        forward.push(i);
        reply.push(j);
        partner.push(forward.length - 1);
      }
    } else if (expired(i, flagsOf(i), last)) {
      forward.push(i);
    }
  }
  for (let i = 0; i < n; i++) {
    if (dirOf(i) === CT_DIR_FWD || paired[i]) continue;
    if (expired(i, flagsOf(i), lastSeenOf(i))) {
      reply.push(i);
      partner.push(-1);
    }
  }
  const indices = new Uint32Array(forward.length + reply.length);
  indices.set(forward, 0);
  indices.set(reply, forward.length);
  return { indices, flows, forwardCount: forward.length, replyPartner: Int32Array.from(partner) };
}

/**
 * The reply entries of a selection to delete once its forward entries are
 * (positions in sel.indices): all but those whose flow's forward entry was
 * already gone at its delete (forwardGone, positions among the forward
 * entries). A forward entry that went between the read and the delete was
 * most likely removed by the datapath taking the flow's SNAT port over, and
 * its reply key then holds the new flow's entry (see Races above): it stays,
 * and is judged again, alone, at the next pass.
 */
export function repliesToDelete(sel: PackedSelection, forwardGone: readonly number[]): number[] {
  const gone = new Set(forwardGone);
  const out: number[] = [];
  sel.replyPartner.forEach((p, r) => {
    if (p < 0 || !gone.has(p)) out.push(sel.forwardCount + r);
  });
  return out;
}

export interface CtSelection {
  /** Keys to delete: every forward entry first, then the reply entries. */
  keys: CtKey[];
  /** Entries looked at. */
  entries: number;
  /** Flows removed (a pair or a lone entry counts once), by state. */
  flows: Record<CtFlowState, number>;
}

/** selectExpiredPacked over decoded entries (what TypedMap.entries() gives). */
export function selectExpiredCt(
  entries: ReadonlyArray<readonly [CtKey, CtValue]>,
  nowNs: bigint,
  lifetimes: CtLifetimes = DEFAULT_CT_LIFETIMES,
  fmt: CtFormat = CT4_FORMAT,
): CtSelection {
  const keys = Buffer.alloc(entries.length * fmt.keySize);
  const values = Buffer.alloc(entries.length * fmt.valueSize);
  entries.forEach(([k, v], i) => {
    fmt.key.encode(k, keys, i * fmt.keySize);
    fmt.value.encode(v, values, i * fmt.valueSize);
  });
  const sel = selectExpiredPacked({ keys, values, count: entries.length }, nowNs, lifetimes, fmt);
  return { keys: [...sel.indices].map((i) => entries[i]![0]), entries: entries.length, flows: sel.flows };
}

const EINVAL = errnoNumber('EINVAL');
const ENOENT = errnoNumber('ENOENT');
const ENOSPC = errnoNumber('ENOSPC');
const ENOTSUPP = 524;

/**
 * Every entry of a conntrack map, packed as the kernel returns them, read
 * with BPF_MAP_LOOKUP_BATCH in chunks (one entry at a time where the kernel
 * has no batch operations for the map).
 */
export function readCtPacked(map: BpfMap, fmt: CtFormat = CT4_FORMAT): PackedCt {
  const { keySize: KEY_SIZE, valueSize: VALUE_SIZE } = fmt;
  if (map.keySize !== KEY_SIZE || map.valueSize !== VALUE_SIZE) {
    throw new Error(
      `map ${map.label}: key/value sizes ${map.keySize}/${map.valueSize} are not a conntrack map's ${KEY_SIZE}/${VALUE_SIZE} (${fmt.map})`,
    );
  }
  const keyChunks: Buffer[] = [];
  const valueChunks: Buffer[] = [];
  let count = 0;
  let chunk = 4096;
  let inBatch: Buffer | null = null;
  for (;;) {
    const keys = Buffer.alloc(chunk * KEY_SIZE);
    const values = Buffer.alloc(chunk * VALUE_SIZE);
    const outBatch = Buffer.alloc(Math.max(KEY_SIZE, 8));
    const n = Buffer.alloc(4);
    n.writeUInt32LE(chunk);
    const rc = native().mapLookupBatch(map.fd, inBatch, outBatch, keys, values, n) as number;
    if ((rc === -EINVAL || rc === -ENOTSUPP) && inBatch === null) {
      const all = map.entries();
      return { keys: Buffer.concat(all.map(([k]) => k)), values: Buffer.concat(all.map(([, v]) => v)), count: all.length };
    }
    if (rc === -ENOSPC) {
      // one hash bucket holds more than `chunk` entries
      chunk *= 2;
      continue;
    }
    if (rc < 0 && rc !== -ENOENT) throw new BpfError(`lookup batch ${map.label}`, rc, libbpfText(rc));
    const got = n.readUInt32LE();
    keyChunks.push(keys.subarray(0, got * KEY_SIZE));
    valueChunks.push(values.subarray(0, got * VALUE_SIZE));
    count += got;
    if (rc === -ENOENT) break;
    inBatch = outBatch;
  }
  return { keys: Buffer.concat(keyChunks), values: Buffer.concat(valueChunks), count };
}

export interface CtGcOptions {
  /** Time between runs (default 10 s); 0: no periodic runs (runOnce() only). */
  intervalMs?: number;
  lifetimes?: Partial<CtLifetimes>;
  /** The monotonic clock in ns, the one bpf_ktime_get_ns() reads (tests inject their own). */
  now?: () => bigint;
  metrics?: AgentMetrics;
  log?: Logger;
  /** Live connection counts: each pass takes the open flows it collects off their backends and recounts tc's counts. */
  conns?: ConnCounts;
}

export interface CtGcRun {
  /** Entries before the run. */
  entries: number;
  /** Entries removed. */
  deleted: number;
  flows: Record<CtFlowState, number>;
  durationMs: number;
  /** With counts: what the pass did to them. */
  conns?: RecountResult;
}

/** What one pass removed from one conntrack map: the entries deleted and the flows by state. */
interface MapPass {
  ct: PackedCt;
  sel: PackedSelection;
  /** Positions in sel.indices of the entries this pass removed. */
  removed: number[];
  /** Deletes issued (forward entries that were already gone included). */
  deleted: number;
}

/** The periodic collector over each family's conntrack map, all in one pass. */
export class CtGc implements Component {
  readonly name = 'conntrack GC';
  readonly #maps: ReadonlyArray<{ family: Family; ct: TypedMap<CtKey, CtValue> }>;
  readonly #intervalMs: number;
  readonly #now: () => bigint;
  readonly #metrics: AgentMetrics | undefined;
  readonly #log: Logger | undefined;
  readonly #conns: ConnCounts | undefined;
  readonly lifetimes: CtLifetimes;
  #timer: NodeJS.Timeout | undefined;

  constructor(families: readonly CtGcMaps[], opts: CtGcOptions = {}) {
    this.#maps = families.flatMap((f) => (f.ct ? [{ family: f.family, ct: f.ct }] : []));
    this.#intervalMs = opts.intervalMs ?? DEFAULT_CT_GC_INTERVAL_MS;
    this.#now = opts.now ?? (() => process.hrtime.bigint());
    this.#metrics = opts.metrics;
    this.#log = opts.log;
    this.#conns = opts.conns;
    this.lifetimes = { ...DEFAULT_CT_LIFETIMES, ...definedOnly(opts.lifetimes ?? {}) };
    for (const [k, v] of Object.entries(this.lifetimes)) {
      if (!(Number.isFinite(v) && v > 0)) throw new Error(`conntrack GC: lifetime ${k} must be more than 0 (got ${v})`);
    }
    if (!(this.lifetimes.tcpClosingMs > SNAT_TAKE_OVER_MAX_MS)) {
      throw new Error(
        `conntrack GC: lifetime tcpClosingMs must be more than the datapath's SNAT take-over limit of ${SNAT_TAKE_OVER_MAX_MS} ms (got ${this.lifetimes.tcpClosingMs})`,
      );
    }
    if (!(Number.isFinite(this.#intervalMs) && this.#intervalMs >= 0))
      throw new Error(`conntrack GC: interval must be 0 or more (got ${this.#intervalMs})`);
    for (const { family, ct } of this.#maps) this.#metrics?.mapCapacity.set({ map: CT_FORMATS[family].map }, ct.raw.maxEntries);
  }

  /** Whether any family has a conntrack map to collect. */
  get any(): boolean {
    return this.#maps.length > 0;
  }

  /** One map's part of a pass: read, select, delete (forward entries first). */
  #pass(map: TypedMap<CtKey, CtValue>, fmt: CtFormat, now: bigint): MapPass {
    const ct = readCtPacked(map.raw, fmt);
    const sel = selectExpiredPacked(ct, now, this.lifetimes, fmt);
    const size = fmt.keySize;
    // Forward entries first; then the reply entries whose forward entry was still there.
    const deleteAt = (positions: ArrayLike<number>): number[] => {
      const keys = Buffer.alloc(positions.length * size);
      for (let i = 0; i < positions.length; i++) {
        const e = sel.indices[positions[i]!]!;
        keys.set(ct.keys.subarray(e * size, (e + 1) * size), i * size);
      }
      return map.raw.deleteBatch(keys, positions.length);
    };
    const forwardGone = deleteAt(Array.from({ length: sel.forwardCount }, (_, i) => i));
    const replies = repliesToDelete(sel, forwardGone);
    deleteAt(replies);
    // A forward entry already gone was forgotten by the datapath, not removed here.
    const gone = new Set(forwardGone);
    const removed = [...Array.from({ length: sel.forwardCount }, (_, i) => i).filter((i) => !gone.has(i)), ...replies];
    return { ct, sel, removed, deleted: sel.forwardCount + replies.length };
  }

  /**
   * One pass: read every entry (BPF_MAP_LOOKUP_BATCH), pick the expired,
   * delete them in one BPF_MAP_DELETE_BATCH (entries that went meanwhile
   * are skipped).
   */
  runOnce(): CtGcRun {
    const started = process.hrtime.bigint();
    const before = this.#conns?.snapshot();
    // Before the read, not after: see Races above.
    const now = this.#now();
    const passes = this.#maps.map(({ family, ct }) => ({ family, pass: this.#pass(ct, CT_FORMATS[family], now) }));
    // The counts lose the open counted flows this pass removed, of either family.
    const removedOf = (p: MapPass) => ({ ct: p.ct, deleted: Uint32Array.from(p.removed, (i) => p.sel.indices[i]!) });
    const conns = before && this.#conns?.afterGc(before, new Map(passes.map(({ family, pass }) => [family, removedOf(pass)])));
    const flows = noFlows();
    let [entries, deleted] = [0, 0];
    for (const { pass } of passes) {
      for (const k of Object.keys(flows) as CtFlowState[]) flows[k] += pass.sel.flows[k];
      entries += pass.ct.count;
      deleted += pass.deleted;
    }
    const run: CtGcRun = {
      entries,
      deleted,
      flows,
      durationMs: Number(process.hrtime.bigint() - started) / 1e6,
      ...(conns ? { conns } : {}),
    };
    const changed = (r: { tc?: { corrected: number }; sock?: { corrected: number }; removed: number } | undefined) =>
      !!(r?.tc?.corrected || r?.sock?.corrected || r?.removed);
    if (conns && (changed(conns) || changed(conns.v6))) this.#log?.info({ ...conns }, 'connection counts recounted');
    this.#metrics?.conntrackEntries.set(run.entries - run.deleted);
    this.#metrics?.conntrackGcDeleted.inc(run.deleted);
    if (run.deleted) this.#log?.debug({ ...run }, 'conntrack GC removed idle flows');
    return run;
  }

  /** Runs every interval until stop() (the timer does not keep the process alive). */
  start(): void {
    if (this.#timer || this.#intervalMs === 0) return;
    this.#timer = setInterval(() => {
      try {
        this.runOnce();
      } catch (err) {
        this.#log?.warn({ err }, 'conntrack GC failed; retrying at the next interval');
      }
    }, this.#intervalMs);
    this.#timer.unref();
    this.#log?.info({ intervalMs: this.#intervalMs, lifetimes: this.lifetimes }, 'conntrack GC started');
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}

function definedOnly(o: Partial<CtLifetimes>): Partial<CtLifetimes> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<CtLifetimes>;
}
