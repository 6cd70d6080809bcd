// The conntrack GC (src/agent/loops/ct-gc.ts) against the CT map of a loaded tc
// object, with packets through BPF_PROG_TEST_RUN (nothing attached): the
// datapath's last_seen and the agent's clock are the same clock; a closed
// flow's two entries go once the closing lifetime has passed and its SNAT
// port serves a new flow; established, unanswered and UDP flows go after
// their own lifetimes.
import t from 'tap';
import { CtGc } from '../../src/agent/loops/ct-gc.ts';
import { AgentMetrics } from '../../src/agent/http/metrics.ts';
import { CT_F_CLOSING, SVC_F_NODEPORT } from '../../src/maps/constants.ts';
import { TCP_ACK, TCP_FIN, TCP_SYN, buildIpv4, parseIpv4 } from './fixtures/packets.ts';
import { CT_DIR_FWD, CT_DIR_REPLY_IN, CT_DIR_REPLY_OUT } from './fixtures/tc-codecs.ts';
import { translated } from './fixtures/tc-expect.ts';
import { TC_ACT_SHOT, TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const REMOTE = { id: 61, addr: '10.244.2.61', port: 8080 };
const LOCAL = { id: 62, addr: '10.244.1.62', port: 8080, local: true };
const UDP_REMOTE = { id: 63, addr: '10.244.2.63', port: 53 };
const SNAT_ONLY_PORT = 62000;
const S = 1_000_000_000n;

const h = TcHarness.open({ ctMax: 256 });
t.teardown(() => h.close());
// One SNAT port: a second concurrent flow to the backend has none left.
h.configure(NODE_IP, SNAT_ONLY_PORT, SNAT_ONLY_PORT);
h.addService({ addr: NODE_IP, port: 30600, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT, backends: [REMOTE] });
h.addService({ addr: NODE_IP, port: 30601, proto: 'tcp', revNatId: 2, flags: SVC_F_NODEPORT, backends: [LOCAL] });
h.addService({ addr: NODE_IP, port: 30602, proto: 'udp', revNatId: 3, flags: SVC_F_NODEPORT, backends: [UDP_REMOTE] });

const tcp = (client: string, sport: number, dport: number, flags: number) =>
  buildIpv4({
    saddr: client,
    daddr: NODE_IP,
    proto: 'tcp',
    sport,
    dport,
    tcpFlags: flags,
    payload: flags & TCP_SYN ? undefined : Buffer.from('x'),
  });

/**
 * A GC over the harness's CT map whose clock the test sets relative to the
 * entries' own last_seen (idle(): `n` seconds after the newest entry, or
 * after the oldest), never to when the test happened to run, so a slow
 * machine sees the same idle times as a fast one.
 */
function gcAt(metrics?: AgentMetrics) {
  let now = 0n;
  const gc = new CtGc([{ family: 4, ct: h.ct }], { now: () => now, intervalMs: 0, ...(metrics ? { metrics } : {}) });
  const seen = () => h.ctEntries().map(([, v]) => v.last_seen);
  const clock = {
    /** The clock at `sec` seconds after the newest entry was last seen: every entry has been idle at least that long. */
    idle(sec: bigint): void {
      now = seen().reduce((a, b) => (b > a ? b : a)) + sec * S;
    },
    /** The clock at `sec` seconds after the oldest entry was last seen: no entry has been idle longer. */
    idleOldest(sec: bigint): void {
      now = seen().reduce((a, b) => (b < a ? b : a)) + sec * S;
    },
  };
  return { gc, clock };
}

/**
 * Runs send() while the CT entries look just used (last_seen an hour ahead)
 * and puts them back as they were: whatever the datapath decides by how
 * long a closed flow has been quiet (its 10 ms take-over hold) it decides
 * for a flow that is not quiet, however slowly the test runs.
 */
function whileFresh<T>(send: () => T): T {
  const before = h.ctEntries();
  for (const [k, v] of before) h.ct.put(k, { ...v, last_seen: v.last_seen + 3600n * S });
  try {
    return send();
  } finally {
    for (const [k, v] of before) h.ct.put(k, v);
  }
}

t.test("last_seen is on the agent's clock: bpf_ktime_get_ns() and process.hrtime.bigint() are both CLOCK_MONOTONIC", async (t) => {
  h.clearCt();
  const before = process.hrtime.bigint();
  h.ingress(tcp('203.0.113.5', 40000, 30600, TCP_SYN));
  const after = process.hrtime.bigint();
  const seen = h.ctEntries().map(([, v]) => v.last_seen);
  t.equal(seen.length, 2);
  for (const s of seen) t.ok(s >= before && s <= after, `last_seen ${s} lies between ${before} and ${after}`);
});

t.test('a closed flow goes after the closing lifetime, both entries, and its SNAT port serves a new flow', async (t) => {
  h.clearCt();
  const metrics = new AgentMetrics();
  const { gc, clock } = gcAt(metrics);
  const A = '203.0.113.10';
  const B = '203.0.113.11';

  const syn = tcp(A, 40001, 30600, TCP_SYN);
  const out = translated(t, h.ingress(syn), syn, 'A: SYN');
  t.equal(out.sport, SNAT_ONLY_PORT, 'A holds the only SNAT port');
  const fromBackend = (flags: number) =>
    buildIpv4({
      saddr: REMOTE.addr,
      daddr: NODE_IP,
      proto: 'tcp',
      sport: REMOTE.port,
      dport: SNAT_ONLY_PORT,
      tcpFlags: flags,
      payload: flags & TCP_SYN ? undefined : Buffer.from('y'),
    });
  translated(t, h.ingress(fromBackend(TCP_SYN | TCP_ACK)), fromBackend(TCP_SYN | TCP_ACK), 'A: SYN-ACK');
  translated(t, h.ingress(tcp(A, 40001, 30600, TCP_ACK)), tcp(A, 40001, 30600, TCP_ACK), 'A: ACK');

  t.equal(h.ingress(tcp(B, 40002, 30600, TCP_SYN)).retval, TC_ACT_SHOT, 'B: no SNAT port while A holds it');
  clock.idleOldest(11n);
  t.match(gc.runOnce(), { entries: 2, deleted: 0 }, 'A is established: 11 s idle is nothing');

  // A closes: FIN from the client, FIN from the backend, last ACK.
  h.ingress(tcp(A, 40001, 30600, TCP_FIN | TCP_ACK));
  h.ingress(fromBackend(TCP_FIN | TCP_ACK));
  h.ingress(tcp(A, 40001, 30600, TCP_ACK));
  t.ok(
    h.ctEntries().every(([, v]) => v.flags & CT_F_CLOSING),
    'both entries are closing',
  );
  t.equal(whileFresh(() => h.ingress(tcp(B, 40002, 30600, TCP_SYN))).retval, TC_ACT_SHOT, 'B: still no port until the GC runs');

  clock.idleOldest(9n);
  t.match(gc.runOnce(), { entries: 2, deleted: 0 }, 'closed 9 s ago: kept (late retransmits still translate)');
  clock.idle(11n);
  t.match(gc.runOnce(), { entries: 2, deleted: 2, flows: { tcp_closing: 1 } }, 'closed 11 s ago: gone');
  t.same(h.ctEntries(), [], 'forward and reply entry both');
  const text = await metrics.registry.metrics();
  t.match(text, /^svcmap_conntrack_entries 0$/m);
  t.match(text, /^svcmap_conntrack_gc_deleted_total 2$/m);

  const bsyn = tcp(B, 40002, 30600, TCP_SYN);
  const b = translated(t, h.ingress(bsyn), bsyn, 'B: SYN after the GC');
  t.equal(b.sport, SNAT_ONLY_PORT, 'B got the SNAT port A gave back');
  const rep = h.ctEntries().find(([k]) => k.dir === CT_DIR_REPLY_IN);
  t.match(rep?.[1], { new_daddr: B, new_dport: 40002 }, 'and the reply entry now leads to B');
});

t.test('each state keeps its own lifetime against the real map', async (t) => {
  h.clearCt();
  h.configure(NODE_IP);
  t.teardown(() => h.configure(NODE_IP, SNAT_ONLY_PORT, SNAT_ONLY_PORT));
  const { gc, clock } = gcAt();
  const C = '203.0.113.20';

  // Established (SNAT), established (DNAT-only, reply at egress), SYN only, UDP answered.
  const est = parseIpv4(h.ingress(tcp(C, 41000, 30600, TCP_SYN)).packetOut);
  h.ingress(
    buildIpv4({ saddr: est.daddr, daddr: est.saddr, proto: 'tcp', sport: est.dport, dport: est.sport, tcpFlags: TCP_SYN | TCP_ACK }),
  );
  const loc = parseIpv4(h.ingress(tcp(C, 41001, 30601, TCP_SYN)).packetOut);
  h.egress(
    buildIpv4({ saddr: loc.daddr, daddr: loc.saddr, proto: 'tcp', sport: loc.dport, dport: loc.sport, tcpFlags: TCP_SYN | TCP_ACK }),
  );
  h.ingress(tcp(C, 41002, 30600, TCP_SYN));
  const q = parseIpv4(
    h.ingress(buildIpv4({ saddr: C, daddr: NODE_IP, proto: 'udp', sport: 41003, dport: 30602, payload: Buffer.from('q') })).packetOut,
  );
  h.ingress(buildIpv4({ saddr: q.daddr, daddr: q.saddr, proto: 'udp', sport: q.dport, dport: q.sport, payload: Buffer.from('a') }));
  t.equal(h.ctEntries().length, 8, 'four flows, two entries each');
  const flowsLeft = () =>
    h
      .ctEntries()
      .filter(([k]) => k.dir === CT_DIR_FWD)
      .map(([k]) => k.sport)
      .sort();

  clock.idleOldest(59n);
  t.match(gc.runOnce(), { deleted: 0 }, 'at 59 s everything stays');
  clock.idle(61n);
  t.match(gc.runOnce(), { deleted: 4, flows: { tcp_syn: 1, other: 1 } }, 'at 61 s the unanswered SYN and the UDP flow go');
  t.same(flowsLeft(), [41000, 41001], 'the established flows stay');
  t.equal(h.ctEntries().filter(([k]) => k.dir === CT_DIR_REPLY_OUT).length, 1, "with the DNAT-only flow's egress reply entry");
  clock.idleOldest(6n * 3600n - 1n);
  t.match(gc.runOnce(), { deleted: 0 }, 'just under 6 h: still there');
  clock.idle(6n * 3600n + 1n);
  t.match(gc.runOnce(), { deleted: 4, flows: { tcp_established: 2 } }, 'past 6 h idle: gone');
  t.same(h.ctEntries(), []);
});

t.test('traffic keeps a flow: the GC goes by the newest packet of either direction', async (t) => {
  h.clearCt();
  const { gc, clock } = gcAt();
  const D = '203.0.113.30';
  h.ingress(buildIpv4({ saddr: D, daddr: NODE_IP, proto: 'udp', sport: 42000, dport: 30602, payload: Buffer.from('q') }));
  // Pretend the flow was made 50 s before now, then the backend answers now.
  const entries = h.ctEntries();
  for (const [k, v] of entries) h.ct.put(k, { ...v, last_seen: v.last_seen - 50n * S });
  const rep = entries.find(([k]) => k.dir === CT_DIR_REPLY_IN)![0];
  h.ingress(buildIpv4({ saddr: rep.saddr, daddr: rep.daddr, proto: 'udp', sport: rep.sport, dport: rep.dport, payload: Buffer.from('a') }));
  clock.idle(20n);
  t.match(gc.runOnce(), { deleted: 0 }, 'the forward entry is 70 s idle, but the answer came 20 s ago: the pair stays');
  clock.idle(61n);
  t.match(gc.runOnce(), { deleted: 2 });
});
