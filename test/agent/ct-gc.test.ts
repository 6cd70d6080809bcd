// The conntrack GC's choice (src/agent/loops/ct-gc.ts), as a pure function of the
// map's entries and the time: which entries go, pairs together, by the
// newer last_seen and the union of both entries' state; and the collector
// around it over a kernel map of the same layout (with the tc datapath's own
// map and packets in test/bpf/tc-ct-gc.test.ts).
import t from 'tap';
import { AgentMetrics } from '../../src/agent/http/metrics.ts';
import {
  CT6_FORMAT,
  CtGc,
  DEFAULT_CT_LIFETIMES,
  SNAT_TAKE_OVER_MAX_MS,
  ctFlowState,
  repliesToDelete,
  ctKeyId,
  ctPeerKey,
  readCtPacked,
  selectExpiredCt,
  selectExpiredPacked,
} from '../../src/agent/loops/ct-gc.ts';
import type { CtKey, CtValue } from '../../src/maps/codecs.ts';
import {
  CT_DIR_FRAG,
  CT_DIR_FWD,
  CT_DIR_REPLY_IN,
  CT_DIR_REPLY_OUT,
  CT_F_CLOSING,
  CT_F_DSR,
  CT_F_FIN_FWD,
  CT_F_FIN_REPLY,
  CT_F_LOCAL,
  CT_F_SEEN_REPLY,
  CT_F_SNAT,
  IPPROTO_TCP,
  IPPROTO_UDP,
} from '../../src/maps/constants.ts';
import { BpfMap } from '../../src/bpf/map.ts';
import type { Logger } from '../../src/agent/log.ts';
import { ctKey, ctValue } from '../../src/maps/codecs.ts';
import { ctMap } from '../../src/maps/registry.ts';
import { TypedMap } from '../../src/maps/typed-map.ts';

const BPF_MAP_TYPE_LRU_HASH = 9;

const NODE = '198.51.100.1';
const S = 1_000_000_000n;
const T0 = 1_000_000n * S; // a monotonic "now" far from zero

type Entry = [CtKey, CtValue];

/** The two entries the datapath makes for a SNATed flow (remote backend, Cluster policy). */
function snatFlow(o: {
  client?: string;
  cport?: number;
  backend?: string;
  snatPort?: number;
  proto?: number;
  flags?: number;
  fwdSeen: bigint;
  repSeen?: bigint;
  repFlags?: number;
}): [Entry, Entry] {
  const client = o.client ?? '203.0.113.7';
  const cport = o.cport ?? 40000;
  const backend = o.backend ?? '10.244.2.5';
  const snatPort = o.snatPort ?? 62000;
  const proto = o.proto ?? IPPROTO_TCP;
  const flags = CT_F_SNAT | (o.flags ?? 0);
  return [
    [
      { saddr: client, daddr: NODE, sport: cport, dport: 30080, proto, dir: CT_DIR_FWD },
      {
        new_saddr: NODE,
        new_daddr: backend,
        new_sport: snatPort,
        new_dport: 8080,
        backend_id: 11,
        rev_nat_id: 1,
        flags,
        last_seen: o.fwdSeen,
      },
    ],
    [
      { saddr: backend, daddr: NODE, sport: 8080, dport: snatPort, proto, dir: CT_DIR_REPLY_IN },
      {
        new_saddr: NODE,
        new_daddr: client,
        new_sport: 30080,
        new_dport: cport,
        backend_id: 11,
        rev_nat_id: 1,
        flags: CT_F_SNAT | (o.repFlags ?? o.flags ?? 0),
        last_seen: o.repSeen ?? o.fwdSeen,
      },
    ],
  ];
}

/** The two entries of a DNAT-only flow (local backend): the reply is rewritten at egress. */
function dnatFlow(o: {
  client?: string;
  cport?: number;
  frontPort?: number;
  proto?: number;
  flags?: number;
  fwdSeen: bigint;
  repSeen?: bigint;
  snatPort?: number /* unused: no SNAT */;
}): [Entry, Entry] {
  const client = o.client ?? '203.0.113.9';
  const cport = o.cport ?? 41000;
  const frontPort = o.frontPort ?? 30100;
  const proto = o.proto ?? IPPROTO_TCP;
  const flags = CT_F_LOCAL | (o.flags ?? 0);
  return [
    [
      { saddr: client, daddr: NODE, sport: cport, dport: frontPort, proto, dir: CT_DIR_FWD },
      {
        new_saddr: '0.0.0.0',
        new_daddr: '10.244.1.5',
        new_sport: 0,
        new_dport: 8080,
        backend_id: 21,
        rev_nat_id: 2,
        flags,
        last_seen: o.fwdSeen,
      },
    ],
    [
      { saddr: '10.244.1.5', daddr: client, sport: 8080, dport: cport, proto, dir: CT_DIR_REPLY_OUT },
      {
        new_saddr: NODE,
        new_daddr: '0.0.0.0',
        new_sport: frontPort,
        new_dport: 0,
        backend_id: 21,
        rev_nat_id: 2,
        flags,
        last_seen: o.repSeen ?? o.fwdSeen,
      },
    ],
  ];
}

const ids = (keys: CtKey[]) => keys.map(ctKeyId).sort();
const keysOf = (...entries: Entry[]) => ids(entries.map(([k]) => k));
/** Resolves once count() reaches n, checked every 5 ms (tap's timeout ends a wait that never does). */
async function runsReach(count: () => number, n: number): Promise<void> {
  while (count() < n) await new Promise((r) => setTimeout(r, 5));
}
const ago = (seconds: number) => T0 - BigInt(Math.round(seconds * 1000)) * 1_000_000n;

t.test('the peer key: SNAT -> REPLY_IN, DNAT-only -> REPLY_OUT, and back', async (t) => {
  const [sf, sr] = snatFlow({ fwdSeen: T0 });
  t.same(ctPeerKey(sf[0], sf[1]), sr[0], 'forward of a SNATed flow -> {backend, node ip, backend port, SNAT port}, REPLY_IN');
  t.same(ctPeerKey(sr[0], sr[1]), sf[0], 'and its reply entry names the forward entry');
  const [df, dr] = dnatFlow({ fwdSeen: T0 });
  t.same(ctPeerKey(df[0], df[1]), dr[0], 'forward of a DNAT-only flow -> {backend, client, backend port, client port}, REPLY_OUT');
  t.same(ctPeerKey(dr[0], dr[1]), df[0], 'and back');
});

t.test('the state a flow is in', async (t) => {
  t.equal(ctFlowState(IPPROTO_TCP, CT_F_SNAT), 'tcp_syn', 'TCP, nothing back yet');
  t.equal(ctFlowState(IPPROTO_TCP, CT_F_SNAT | CT_F_SEEN_REPLY), 'tcp_established');
  t.equal(ctFlowState(IPPROTO_TCP, CT_F_SEEN_REPLY | CT_F_FIN_FWD), 'tcp_established', 'a half-close keeps the established lifetime');
  t.equal(ctFlowState(IPPROTO_TCP, CT_F_SEEN_REPLY | CT_F_FIN_FWD | CT_F_FIN_REPLY | CT_F_CLOSING), 'tcp_closing');
  t.equal(ctFlowState(IPPROTO_TCP, CT_F_CLOSING), 'tcp_closing', 'an RST before any reply');
  t.equal(ctFlowState(IPPROTO_UDP, 0), 'other');
  t.equal(ctFlowState(IPPROTO_UDP, CT_F_SEEN_REPLY), 'other', 'UDP has one lifetime, answered or not');
});

t.test("the default lifetimes are Cilium's", async (t) => {
  t.same(DEFAULT_CT_LIFETIMES, { tcpEstablishedMs: 21_600_000, tcpSynMs: 60_000, tcpClosingMs: 10_000, otherMs: 60_000 });
});

t.test('each state expires after its own lifetime, both entries of the flow together', async (t) => {
  const cases: Array<[string, number, number, number]> = [
    // what, proto, flags, lifetime in seconds
    ['TCP closing', IPPROTO_TCP, CT_F_SEEN_REPLY | CT_F_FIN_FWD | CT_F_FIN_REPLY | CT_F_CLOSING, 10],
    ['TCP reset', IPPROTO_TCP, CT_F_CLOSING, 10],
    ['TCP SYN only', IPPROTO_TCP, 0, 60],
    ['TCP established', IPPROTO_TCP, CT_F_SEEN_REPLY, 6 * 3600],
    ['TCP half-closed', IPPROTO_TCP, CT_F_SEEN_REPLY | CT_F_FIN_REPLY, 6 * 3600],
    ['UDP unanswered', IPPROTO_UDP, 0, 60],
    ['UDP answered', IPPROTO_UDP, CT_F_SEEN_REPLY, 60],
  ];
  for (const [what, proto, flags, life] of cases) {
    for (const make of [snatFlow, dnatFlow]) {
      const kind = make === snatFlow ? 'SNAT' : 'DNAT-only';
      const young = make({ proto, flags, fwdSeen: ago(life - 1) });
      const old = make({ proto, flags, fwdSeen: ago(life + 1), cport: 50000, snatPort: 61500 });
      const sel = selectExpiredCt([...young, ...old], T0);
      t.same(ids(sel.keys), keysOf(...old), `${what} (${kind}): idle ${life + 1}s goes, both entries; idle ${life - 1}s stays`);
      t.equal(sel.entries, 4);
      t.equal(
        Object.values(sel.flows).reduce((a, b) => a + b, 0),
        1,
        `${what} (${kind}): one flow counted`,
      );
    }
  }
});

t.test('the newer last_seen of the two entries decides', async (t) => {
  // The forward entry has been quiet for an hour, but the backend spoke 5 s ago.
  const quietClient = snatFlow({ flags: CT_F_SEEN_REPLY | CT_F_CLOSING, fwdSeen: ago(3600), repSeen: ago(5) });
  t.same(selectExpiredCt(quietClient, T0).keys, [], 'closing, but the reply entry is 5 s old: both stay');
  const quietBackend = snatFlow({ flags: 0, proto: IPPROTO_UDP, fwdSeen: ago(30), repSeen: ago(3600), cport: 40001 });
  t.same(selectExpiredCt(quietBackend, T0).keys, [], 'UDP: the client sent 30 s ago, the old reply entry stays with it');
  const both = snatFlow({ flags: 0, proto: IPPROTO_UDP, fwdSeen: ago(61), repSeen: ago(3600), cport: 40002 });
  t.same(ids(selectExpiredCt(both, T0).keys), keysOf(...both), 'both older than the lifetime: both go');
});

t.test("the state is the union of both entries' flags", async (t) => {
  // Only the reply entry knows the flow is closing (its copy to the forward entry was lost).
  const flow = snatFlow({ flags: CT_F_SEEN_REPLY, repFlags: CT_F_SEEN_REPLY | CT_F_CLOSING, fwdSeen: ago(11) });
  const sel = selectExpiredCt(flow, T0);
  t.same(ids(sel.keys), keysOf(...flow));
  t.equal(sel.flows.tcp_closing, 1);
  // Only the reply entry knows the backend answered: established, not a lone SYN.
  const est = snatFlow({ flags: 0, repFlags: CT_F_SEEN_REPLY, fwdSeen: ago(120), cport: 40003 });
  t.same(selectExpiredCt(est, T0).keys, [], "established by the reply entry's flag: 120 s idle is fine");
});

t.test('forward entries come first, so a SNAT port is freed only after the flow that held it', async (t) => {
  const a = snatFlow({ flags: CT_F_CLOSING, fwdSeen: ago(20), cport: 40010, snatPort: 61010 });
  const b = dnatFlow({ flags: CT_F_CLOSING, fwdSeen: ago(20), cport: 40011 });
  const c = snatFlow({ flags: 0, proto: IPPROTO_UDP, fwdSeen: ago(90), cport: 40012, snatPort: 61012 });
  // The map's order is the hash's: put reply entries first.
  const sel = selectExpiredCt([a[1], b[1], c[1], a[0], b[0], c[0]], T0);
  t.equal(sel.keys.length, 6);
  t.same(
    sel.keys.slice(0, 3).map((k) => k.dir),
    [CT_DIR_FWD, CT_DIR_FWD, CT_DIR_FWD],
    'forward entries first',
  );
  t.ok(
    sel.keys.slice(3).every((k) => k.dir !== CT_DIR_FWD),
    'then the reply entries',
  );
  t.same(sel.flows, { tcp_established: 0, tcp_syn: 0, tcp_closing: 2, other: 1 });
});

t.test('lone entries (the partner was evicted or replaced) go after the same lifetimes', async (t) => {
  const [fwdOnly] = snatFlow({ flags: CT_F_SEEN_REPLY | CT_F_CLOSING, fwdSeen: ago(11), cport: 40020 });
  const [, repOnly] = snatFlow({ flags: CT_F_SEEN_REPLY | CT_F_CLOSING, fwdSeen: ago(11), cport: 40021, snatPort: 61021 });
  const [, repYoung] = snatFlow({ flags: CT_F_SEEN_REPLY, fwdSeen: ago(11), cport: 40022, snatPort: 61022 });
  const [, udpRep] = dnatFlow({ proto: IPPROTO_UDP, fwdSeen: ago(61), cport: 40023 });
  const sel = selectExpiredCt([fwdOnly, repOnly, repYoung, udpRep], T0);
  t.same(ids(sel.keys), keysOf(fwdOnly, repOnly, udpRep), 'the closed and the UDP ones go; the established reply entry stays');
  t.same(sel.flows, { tcp_established: 0, tcp_syn: 0, tcp_closing: 2, other: 1 });
});

t.test("direct server return's entries, each alone on its node, go after their state's lifetime", async (t) => {
  // The ingress node: a forward entry, DNAT only, no reply entry (the backend's node answers).
  const ingress = (cport: number, proto: number, flags: number, seen: bigint): Entry => [
    { saddr: '203.0.113.7', daddr: NODE, sport: cport, dport: 30080, proto, dir: CT_DIR_FWD },
    {
      new_saddr: '0.0.0.0',
      new_daddr: '10.244.2.5',
      new_sport: 0,
      new_dport: 8080,
      backend_id: 11,
      rev_nat_id: 1,
      flags: CT_F_DSR | flags,
      last_seen: seen,
    },
  ];
  // The backend's node: a reply entry {backend -> client} from the option, the frontend as the new source.
  const backend = (cport: number, proto: number, flags: number, seen: bigint): Entry => [
    { saddr: '10.244.1.5', daddr: '203.0.113.7', sport: 8080, dport: cport, proto, dir: CT_DIR_REPLY_OUT },
    {
      new_saddr: '198.51.100.2',
      new_daddr: '0.0.0.0',
      new_sport: 30090,
      new_dport: 0,
      backend_id: 0,
      rev_nat_id: 5,
      flags: CT_F_DSR | CT_F_LOCAL | flags,
      last_seen: seen,
    },
  ];
  const established = ingress(40030, IPPROTO_TCP, CT_F_SEEN_REPLY, ago(3600)); // the client's ACK marked it
  const synOnly = ingress(40031, IPPROTO_TCP, 0, ago(61));
  const udpIn = ingress(40032, IPPROTO_UDP, 0, ago(61));
  const closed = backend(40033, IPPROTO_TCP, CT_F_SEEN_REPLY | CT_F_FIN_FWD | CT_F_FIN_REPLY | CT_F_CLOSING, ago(11)); // both FINs merged
  const open = backend(40034, IPPROTO_TCP, CT_F_SEEN_REPLY, ago(3600));
  const udpOut = backend(40035, IPPROTO_UDP, CT_F_SEEN_REPLY, ago(61));
  const sel = selectExpiredCt([established, synOnly, udpIn, closed, open, udpOut], T0);
  t.same(
    ids(sel.keys),
    keysOf(synOnly, udpIn, closed, udpOut),
    'the unanswered SYN, the closed flow and the idle UDP ones go; established ones stay',
  );
  t.same(sel.flows, { tcp_established: 0, tcp_syn: 1, tcp_closing: 1, other: 2 });
});

t.test(
  "a fragmented datagram's entry (CT_DIR_FRAG, whose last fragment never came) goes alone, after its protocol's lifetime",
  async (t) => {
    const frag = (id: number, seen: bigint, proto = IPPROTO_UDP): Entry => [
      { saddr: '203.0.113.7', daddr: NODE, sport: id, dport: 0, proto, dir: CT_DIR_FRAG },
      { new_saddr: NODE, new_daddr: '10.244.2.5', new_sport: 0, new_dport: 0, backend_id: 1, rev_nat_id: 1, flags: 0, last_seen: seen },
    ];
    const [fwd, rep] = snatFlow({ proto: IPPROTO_UDP, fwdSeen: ago(1) });
    const old = frag(0x1111, ago(61)),
      young = frag(0x2222, ago(30));
    const sel = selectExpiredCt([fwd, rep, old, young], T0);
    t.same(ids(sel.keys), keysOf(old), 'the 61 s old one goes; the flow and the 30 s old one stay');
  },
);

t.test('a reply entry whose forward entry was gone at its delete (a SNAT take-over) stays', async (t) => {
  const a = snatFlow({ flags: CT_F_CLOSING, fwdSeen: ago(11), cport: 40030, snatPort: 61030 });
  const b = snatFlow({ flags: CT_F_CLOSING, fwdSeen: ago(11), cport: 40031, snatPort: 61031 });
  const [, lone] = snatFlow({ flags: CT_F_CLOSING, fwdSeen: ago(11), cport: 40032, snatPort: 61032 });
  const entries: Entry[] = [a[0], a[1], b[0], b[1], lone];
  const keys = Buffer.alloc(entries.length * ctKey.layout.size);
  const values = Buffer.alloc(entries.length * ctValue.layout.size);
  entries.forEach(([k, v], i) => {
    ctKey.encode(k, keys, i * ctKey.layout.size);
    ctValue.encode(v, values, i * ctValue.layout.size);
  });
  const sel = selectExpiredPacked({ keys, values, count: entries.length }, T0);
  t.equal(sel.forwardCount, 2, 'two forward entries');
  const at = (pos: number) => ctKeyId(entries[sel.indices[pos]!]![0]);
  const fwdOfA = [0, 1].find((p) => at(p) === ctKeyId(a[0][0]))!;
  t.same(
    repliesToDelete(sel, []).map(at).sort(),
    [a[1], b[1], lone].map(([k]) => ctKeyId(k)).sort(),
    'every forward entry deleted: every reply entry goes',
  );
  t.same(
    repliesToDelete(sel, [fwdOfA]).map(at).sort(),
    [b[1], lone].map(([k]) => ctKeyId(k)).sort(),
    "a's forward entry was gone: a's reply entry stays, the lone one goes",
  );
});

t.test('a reply entry that another flow took over is not removed with the old forward entry', async (t) => {
  // Two frontends of one local backend, the same client port: both forward
  // entries name the same REPLY_OUT key, which the later flow overwrote.
  const [oldFwd] = dnatFlow({ frontPort: 30100, fwdSeen: ago(3600), cport: 40030 });
  const [newFwd, newRep] = dnatFlow({ frontPort: 30101, flags: CT_F_SEEN_REPLY, fwdSeen: ago(1), cport: 40030 });
  t.same(ctPeerKey(oldFwd[0], oldFwd[1]), newRep[0], 'the old forward entry names the shared reply key');
  const sel = selectExpiredCt([oldFwd, newFwd, newRep], T0);
  t.same(ids(sel.keys), keysOf(oldFwd), 'only the old forward entry goes (SYN only, an hour idle)');
});

t.test('an entry from the future (last_seen ahead of now) is not idle', async (t) => {
  const flow = snatFlow({ flags: CT_F_CLOSING, fwdSeen: T0 + 5n * S });
  t.same(selectExpiredCt(flow, T0).keys, []);
});

t.test('lifetimes are options', async (t) => {
  const flow = snatFlow({ flags: CT_F_SEEN_REPLY, fwdSeen: ago(120) });
  t.same(selectExpiredCt(flow, T0).keys, [], 'established, 2 min idle: kept by default');
  t.equal(
    selectExpiredCt(flow, T0, { ...DEFAULT_CT_LIFETIMES, tcpEstablishedMs: 60_000 }).keys.length,
    2,
    'gone with a 1 min TCP lifetime',
  );
  const udp = snatFlow({ proto: IPPROTO_UDP, fwdSeen: ago(20), cport: 40040 });
  t.equal(selectExpiredCt(udp, T0, { ...DEFAULT_CT_LIFETIMES, otherMs: 15_000 }).keys.length, 2, 'UDP with a 15 s lifetime');
});

t.test('an empty map selects nothing', async (t) => {
  t.same(selectExpiredCt([], T0), { keys: [], entries: 0, flows: { tcp_established: 0, tcp_syn: 0, tcp_closing: 0, other: 0 } });
});

/** A real (kernel) LRU hash with the conntrack map's layout, holding `entries`. */
function kernelMap(entries: Entry[], maxEntries = 4096) {
  const raw = BpfMap.create(BPF_MAP_TYPE_LRU_HASH, 'tst_ctgc', 16, 32, maxEntries);
  const map = new TypedMap(ctMap, raw);
  map.putMany(entries);
  return map;
}

t.test('the collector: reads the map, one batch delete per run, metrics, injected clock', async (t) => {
  const closed = snatFlow({ flags: CT_F_SEEN_REPLY | CT_F_CLOSING, fwdSeen: T0 });
  const live = snatFlow({ flags: CT_F_SEEN_REPLY, fwdSeen: T0, cport: 40050, snatPort: 61050 });
  const map = kernelMap([...closed, ...live]);
  t.teardown(() => map.raw.close());
  const metrics = new AgentMetrics();
  let now = T0 + 5n * S;
  const gc = new CtGc([{ family: 4, ct: map }], { now: () => now, metrics, intervalMs: 0 });

  t.match(gc.runOnce(), { entries: 4, deleted: 0 });
  now = T0 + 11n * S;
  t.match(gc.runOnce(), { entries: 4, deleted: 2, flows: { tcp_closing: 1 } });
  t.same(ids(map.entries().map(([k]) => k)), keysOf(...live), "the closed flow's two entries are gone, the live flow's stay");

  const text = await metrics.registry.metrics();
  t.match(text, /^svcmap_conntrack_entries 2$/m, 'entries after the run');
  t.match(text, /^svcmap_conntrack_gc_deleted_total 2$/m, 'deleted so far');
  t.match(text, /^svcmap_map_capacity\{map="svcmap_ct"\} 4096$/m, "the map's capacity");
});

t.test('the packed reader returns what the map holds, across many batches', async (t) => {
  const entries: Entry[] = [];
  for (let i = 0; i < 5000; i++)
    entries.push(
      ...snatFlow({ fwdSeen: T0 + BigInt(i), cport: 1024 + i, snatPort: 1 + (i % 60000), client: `203.0.${i >> 8}.${i & 255}` }),
    );
  const map = kernelMap(entries, 16384);
  t.teardown(() => map.raw.close());
  const packed = readCtPacked(map.raw);
  t.equal(packed.count, 10000, 'all 10000 entries (more than one 4096-entry batch)');
  const got = new Set<string>();
  for (let i = 0; i < packed.count; i++) got.add(ctKeyId(ctKey.decode(Buffer.from(packed.keys.subarray(i * 16, (i + 1) * 16)), 0)));
  t.same([...got].sort(), keysOf(...entries));
  t.equal(selectExpiredPacked(packed, T0 + 30n * S).indices.length, 0, 'unanswered SYNs, 30 s idle: all stay');
  const sel = selectExpiredPacked(packed, T0 + 61n * S);
  t.equal(sel.indices.length, 10000, '61 s idle: all go');
  t.same(sel.flows, { tcp_established: 0, tcp_syn: 5000, tcp_closing: 0, other: 0 }, 'as 5000 pairs');
});

t.test('the collector runs on its interval until stopped', async (t) => {
  const map = kernelMap(snatFlow({ flags: CT_F_CLOSING, fwdSeen: T0 }));
  t.teardown(() => map.raw.close());
  let runs = 0;
  const gc = new CtGc([{ family: 4, ct: map }], {
    now: () => {
      runs++;
      return T0 + 60n * S;
    },
    intervalMs: 20,
  });
  gc.start();
  gc.start(); // idempotent
  // Waits for the runs themselves, not for a time that should hold them: a
  // busy machine fires a 20 ms timer late, not never.
  await runsReach(() => runs, 2);
  gc.stop();
  t.ok(runs >= 2, `ran ${runs} times, at a 20 ms interval`);
  t.same(map.entries(), []);
  const after = runs;
  // Three intervals with the timer stopped: a run that came would be seen.
  await new Promise((r) => setTimeout(r, 60));
  t.equal(runs, after, 'no run after stop()');
});

t.test('a failing run is logged and the next one goes on', async (t) => {
  const map = kernelMap([]);
  const warnings: unknown[] = [];
  const log = { warn: (o: unknown) => warnings.push(o), debug: () => {}, info: () => {} } as unknown as Logger;
  let runs = 0;
  const gc = new CtGc([{ family: 4, ct: map }], {
    intervalMs: 10,
    log,
    now: () => {
      runs++;
      return T0;
    },
  });
  map.raw.close(); // every read fails now (EBADF)
  gc.start();
  await runsReach(() => warnings.length, 2);
  gc.stop();
  t.ok(warnings.length >= 2, `${warnings.length} failed runs logged, and the timer kept going`);
  t.equal(runs, warnings.length, 'each run read the clock (first), then failed at the map');
});

t.test('bad settings are refused', async (t) => {
  const map = kernelMap([]);
  t.teardown(() => map.raw.close());
  t.throws(() => new CtGc([{ family: 4, ct: map }], { lifetimes: { tcpClosingMs: 0 } }), /tcpClosingMs must be more than 0/);
  t.throws(
    () => new CtGc([{ family: 4, ct: map }], { lifetimes: { tcpClosingMs: SNAT_TAKE_OVER_MAX_MS } }),
    /tcpClosingMs must be more than the datapath's SNAT take-over limit of 9000 ms/,
  );
  t.throws(() => new CtGc([{ family: 4, ct: map }], { intervalMs: -1 }), /interval/);
  t.same(
    new CtGc([{ family: 4, ct: map }], { lifetimes: { otherMs: 5000, tcpSynMs: undefined } }).lifetimes,
    { ...DEFAULT_CT_LIFETIMES, otherMs: 5000 },
    'unset lifetimes keep their defaults',
  );
});

t.test("the closing lifetime outlasts the datapath's SNAT take-over limit", async (t) => {
  // The GC must never delete a reply entry the datapath may still take over for a new flow.
  t.equal(SNAT_TAKE_OVER_MAX_MS, 9_000, 'SNAT_TAKE_OVER_MAX_NS (bpf/include/) in ms');
  t.ok(DEFAULT_CT_LIFETIMES.tcpClosingMs > SNAT_TAKE_OVER_MAX_MS, 'the default closing lifetime is longer');
});

t.test('IPv6 entries (svcmap_ct6\'s layout): pairs found over 16-byte addresses, an all-zero address meaning "leave it"', async (t) => {
  const v6 = (e: Entry): Entry => {
    const map = (a: string) =>
      a === '0.0.0.0'
        ? '::'
        : a === NODE
          ? 'fd00::1'
          : `fd00::${a
              .split('.')
              .map(Number)
              .reduce((x, y) => x * 256 + y, 0)
              .toString(16)
              .slice(-4)}`;
    return [
      { ...e[0], saddr: map(e[0].saddr), daddr: map(e[0].daddr) },
      { ...e[1], new_saddr: map(e[1].new_saddr), new_daddr: map(e[1].new_daddr) },
    ];
  };
  const snat = snatFlow({ fwdSeen: ago(120), repSeen: ago(61) }).map(v6) as [Entry, Entry];
  const dnat = dnatFlow({ fwdSeen: ago(61), repSeen: ago(5), flags: CT_F_SEEN_REPLY, proto: IPPROTO_UDP }).map(v6) as [Entry, Entry];
  t.same(ctPeerKey(snat[0][0], snat[0][1]), snat[1][0], 'the SNATed forward entry names its reply entry');
  t.same(ctPeerKey(dnat[1][0], dnat[1][1]), dnat[0][0], 'a DNAT-only reply entry names its forward entry ("::" kept its address)');
  const sel = selectExpiredCt([...snat, ...dnat], T0, DEFAULT_CT_LIFETIMES, CT6_FORMAT);
  t.same(ids(sel.keys), keysOf(...snat), 'the SYN-only flow goes as a pair; the UDP flow answered 5 s ago stays whole');
  t.same(sel.flows, { tcp_established: 0, tcp_syn: 1, tcp_closing: 0, other: 0 });
});
