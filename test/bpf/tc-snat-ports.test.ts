// SNAT port allocation in svcmap_tc_in (BPF_PROG_TEST_RUN, nothing
// attached): a port is chosen from a hash of the flow (or the client's own
// port when it is in range) and, when taken, from random candidates (up to
// 32); it is reserved with a BPF_NOEXIST insert of the flow's reply entry;
// a flow that closed (FIN both ways, or an RST) gives its port to the next
// flow that probes it once it has been quiet for SNAT_CLOSED_HOLD_NS (1 s),
// or, in the last tries of a SYN, SNAT_CLOSED_HOLD_MIN_NS (10 ms), and not
// sooner; a live flow never gives it up; when every candidate is
// taken the packet is dropped and counted (snat_ports_exhausted) with no
// conntrack entry left behind.
import t, { type Test } from 'tap';
import { SNAT_PORT_MAX as SNAT_MAX, SNAT_PORT_MIN as SNAT_MIN } from '../../src/agent/datapath/tc-datapath.ts';
import { SVC_F_NODEPORT } from '../../src/maps/constants.ts';
import { TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, buildIpv4, parseIpv4 } from './fixtures/packets.ts';
import { CT_DIR_FWD, CT_DIR_REPLY_IN, CT_F_SNAT } from './fixtures/tc-codecs.ts';
import { translated } from './fixtures/tc-expect.ts';
import { TC_ACT_SHOT, TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const NODE_PORT = 30080;
const BACKEND = { id: 11, addr: '10.244.2.5', port: 8080 };
const S = 1_000_000_000n;

const h = TcHarness.open({ ctMax: 8192 });
t.teardown(() => h.close());
h.configure(NODE_IP, SNAT_MIN, SNAT_MAX);
h.addService({ addr: NODE_IP, port: NODE_PORT, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT, backends: [BACKEND] });

const fromClient = (client: string, sport: number, flags: number) =>
  buildIpv4({
    saddr: client,
    daddr: NODE_IP,
    proto: 'tcp',
    sport,
    dport: NODE_PORT,
    tcpFlags: flags,
    payload: flags & TCP_SYN ? undefined : Buffer.from('c'),
  });
const fromBackend = (snatPort: number, flags: number) =>
  buildIpv4({
    saddr: BACKEND.addr,
    daddr: NODE_IP,
    proto: 'tcp',
    sport: BACKEND.port,
    dport: snatPort,
    tcpFlags: flags,
    payload: flags & TCP_SYN ? undefined : Buffer.from('b'),
  });

/** A SYN from client:sport; the SNAT port it got. */
function open(t: Test, client: string, sport: number): number {
  const input = fromClient(client, sport, TCP_SYN);
  return translated(t, h.ingress(input), input, `SYN ${client}:${sport}`).sport;
}

/** Makes every conntrack entry look `ns` older. */
function age(ns: bigint): void {
  for (const [k, v] of h.ctEntries()) h.ct.put(k, { ...v, last_seen: v.last_seen - ns });
}

const replyEntry = (port: number) => h.ctEntries().find(([k]) => k.dir === CT_DIR_REPLY_IN && k.dport === port);
const fwdEntry = (client: string, sport: number) =>
  h.ctEntries().find(([k]) => k.dir === CT_DIR_FWD && k.saddr === client && k.sport === sport);

t.test('distinct flows to one backend get distinct ports, from the range', async (t) => {
  h.clearCt();
  const ports = new Set<number>();
  const n = 2000; // 44% of the 4536 ports: many probes meet a taken port
  for (let i = 0; i < n; i++) {
    const client = `203.0.113.${1 + (i % 200)}`;
    const input = fromClient(client, 40000 + Math.floor(i / 200), TCP_SYN);
    const res = h.ingress(input);
    const out = parseIpv4(res.packetOut);
    if (out.sport < SNAT_MIN || out.sport > SNAT_MAX || out.saddr !== NODE_IP) t.fail(`flow ${i}: port ${out.sport} from ${out.saddr}`);
    ports.add(out.sport);
  }
  t.equal(ports.size, n, `${n} flows, ${n} distinct SNAT ports`);
  t.equal(h.ctEntries().length, 2 * n, 'two entries per flow');
});

t.test('the first candidate comes from a hash of the flow; a taken one makes the probe pick another', async (t) => {
  h.clearCt();
  const first = open(t, '203.0.113.50', 40100);
  h.clearCt();
  t.equal(open(t, '203.0.113.50', 40100), first, 'the same flow hashes to the same first candidate');
  const other = new Set<number>();
  for (let i = 0; i < 8; i++) other.add(open(t, '203.0.113.51', 40200 + i));
  t.ok(other.size > 1, `other flows start elsewhere (${[...other].join(', ')})`);

  // A live flow of another client holds the first candidate: the probe moves on.
  h.clearCt();
  h.ct.put(
    { saddr: BACKEND.addr, daddr: NODE_IP, sport: BACKEND.port, dport: first, proto: 6, dir: CT_DIR_REPLY_IN },
    {
      new_saddr: NODE_IP,
      new_daddr: '203.0.113.99',
      new_sport: NODE_PORT,
      new_dport: 45000,
      backend_id: BACKEND.id,
      rev_nat_id: 1,
      flags: CT_F_SNAT,
      last_seen: process.hrtime.bigint(),
    },
  );
  const got = open(t, '203.0.113.50', 40100);
  t.not(got, first, `port ${first} is taken: the flow got ${got}`);
  t.equal(replyEntry(first)?.[1].new_daddr, '203.0.113.99', 'the holder keeps its entry');
  t.equal(replyEntry(got)?.[1].new_daddr, '203.0.113.50', 'the new flow has its own');
});

for (const close of ['FIN both ways', 'RST from the client', 'RST from the backend'] as const) {
  t.test(`a flow closed by ${close} frees its port, after the hold and not before`, async (t) => {
    h.clearCt();
    h.configure(NODE_IP, 61000, 61000); // one port
    t.teardown(() => h.configure(NODE_IP, SNAT_MIN, SNAT_MAX));
    const A = '203.0.113.10',
      B = '203.0.113.20';
    t.equal(open(t, A, 41000), 61000, 'flow A takes the one port');
    const synB = fromClient(B, 42000, TCP_SYN);

    // A is established; idle for a long time it still keeps its port.
    h.ingress(fromBackend(61000, TCP_SYN | TCP_ACK));
    h.ingress(fromClient(A, 41000, TCP_ACK));
    age(100n * S);
    t.same(
      h.countsOf(() => t.equal(h.ingress(synB).retval, TC_ACT_SHOT, 'B is dropped')),
      { 'tc_ingress/snat_ports_exhausted': 1 },
      'a live flow, idle 100 s, keeps its port: B is counted as exhausted',
    );

    if (close === 'FIN both ways') {
      h.ingress(fromClient(A, 41000, TCP_FIN | TCP_ACK));
      t.equal(h.ingress(synB).retval, TC_ACT_SHOT, 'one FIN (a half-close) keeps the port');
      h.ingress(fromBackend(61000, TCP_FIN | TCP_ACK));
      h.ingress(fromClient(A, 41000, TCP_ACK)); // the last ACK
    } else if (close === 'RST from the client') {
      h.ingress(fromClient(A, 41000, TCP_RST));
    } else {
      h.ingress(fromBackend(61000, TCP_RST));
    }
    // Moved forward by a second: as if the flow had closed just now, well within either hold.
    age(-S);
    t.equal(h.ingress(synB).retval, TC_ACT_SHOT, 'just closed: the port is held, also from a SYN');
    age(S + S / 2n);
    const C = fromClient('203.0.113.21', 42100, TCP_ACK);
    t.equal(h.ingress(C).retval, TC_ACT_SHOT, 'closed 0.5 s ago: held from a first packet other than a SYN (that waits 1 s)');
    const late = translated(t, h.ingress(fromBackend(61000, TCP_ACK)), fromBackend(61000, TCP_ACK), 'a late packet of A');
    t.same([late.daddr, late.dport], [A, 41000], 'goes to A while the port is held');
    age(-S); // the late packet restarted the hold
    t.equal(h.ingress(synB).retval, TC_ACT_SHOT, 'a late packet restarts the hold');

    age(S + S / 2n);
    t.equal(translated(t, h.ingress(synB), synB, 'B after the hold').sport, 61000, 'closed and quiet 0.5 s: a SYN takes the port over');
    t.equal(fwdEntry(A, 41000), undefined, "A's forward entry is gone with its port");
    t.ok(fwdEntry(B, 42000), "B's forward entry is there");
    t.equal(h.ctEntries().length, 2, "two entries: B's");
    const back = translated(
      t,
      h.ingress(fromBackend(61000, TCP_SYN | TCP_ACK)),
      fromBackend(61000, TCP_SYN | TCP_ACK),
      'reply on port 61000',
    );
    t.same([back.daddr, back.dport], [B, 42000], 'replies on the port now go to B');

    // A's client sends again on its old port: a flow of its own, which finds no port (B holds it, live).
    t.same(
      h.countsOf(() => h.ingress(fromClient(A, 41000, TCP_ACK))),
      { 'tc_ingress/snat_ports_exhausted': 1 },
      "A's late packet does not land on B's flow",
    );
    t.equal(replyEntry(61000)?.[1].new_daddr, B, 'B keeps the port');
  });
}

t.test("a first packet other than a SYN takes a closed flow's port over after 1 s", async (t) => {
  h.clearCt();
  h.configure(NODE_IP, 61000, 61000);
  t.teardown(() => h.configure(NODE_IP, SNAT_MIN, SNAT_MAX));
  t.equal(open(t, '203.0.113.25', 41500), 61000);
  h.ingress(fromClient('203.0.113.25', 41500, TCP_RST));
  const ack = fromClient('203.0.113.26', 41600, TCP_ACK); // e.g. a connection whose entries the GC removed
  age(S / 2n);
  t.equal(h.ingress(ack).retval, TC_ACT_SHOT, 'quiet 0.5 s: held');
  age(S / 2n + S / 10n);
  t.equal(translated(t, h.ingress(ack), ack, 'quiet 1.1 s').sport, 61000, 'quiet 1.1 s: taken over');
});

t.test('a SYN that restarts a closed flow whose port went to another flow leaves that flow alone', async (t) => {
  h.clearCt();
  h.configure(NODE_IP, 61000, 61001);
  t.teardown(() => h.configure(NODE_IP, SNAT_MIN, SNAT_MAX));
  const A = '203.0.113.30',
    B = '203.0.113.31';
  const pa = open(t, A, 43000);
  h.ingress(fromClient(A, 43000, TCP_RST));
  const aFwd = fwdEntry(A, 43000)!;
  age(2n * S);
  // B takes A's port over (retried until B's first probe meets it: the other port is free as well).
  let pb = -1;
  for (let i = 0; i < 40 && pb !== pa; i++) {
    if (pb !== -1) for (const [k, v] of h.ctEntries()) if (k.saddr === B || v.new_daddr === B) h.ct.delete(k);
    pb = open(t, B, 44000 + i);
  }
  t.equal(pb, pa, `B holds A's old port ${pa}`);
  t.equal(fwdEntry(A, 43000), undefined, "A's forward entry went with the port");
  t.equal(replyEntry(pa)?.[1].new_daddr, B, "the port's reply entry is B's");

  // Had A's forward entry survived (a race), A's next SYN forgets it, and not B's reply entry.
  h.ct.put(aFwd[0], aFwd[1]);
  const again = open(t, A, 43000);
  t.not(again, pa, `A's new connection gets the other port (${again})`);
  t.equal(replyEntry(pa)?.[1].new_daddr, B, "B's reply entry is still there");
});

t.test('exhaustion in a tiny range: counted, dropped, nothing left behind', async (t) => {
  h.clearCt();
  h.configure(NODE_IP, 61000, 61003); // four ports
  t.teardown(() => h.configure(NODE_IP, SNAT_MIN, SNAT_MAX));
  const ports = new Set<number>();
  for (let i = 0; i < 4; i++) ports.add(open(t, '203.0.113.40', 45000 + i));
  t.same([...ports].sort(), [61000, 61001, 61002, 61003], 'four flows take the four ports');
  const before = h.ctEntries().length;
  for (let i = 0; i < 3; i++) {
    const input = fromClient('203.0.113.41', 46000 + i, TCP_SYN);
    const c = h.countsOf(() => t.equal(h.ingress(input).retval, TC_ACT_SHOT, `flow ${i + 5} dropped`));
    t.same(c, { 'tc_ingress/snat_ports_exhausted': 1 }, 'counted once, as snat_ports_exhausted');
  }
  t.equal(h.ctEntries().length, before, 'no conntrack entry for the dropped flows');
  // The four flows still work.
  for (const p of ports) {
    const out = translated(t, h.ingress(fromBackend(p, TCP_SYN | TCP_ACK)), fromBackend(p, TCP_SYN | TCP_ACK), `reply on ${p}`);
    t.equal(out.daddr, '203.0.113.40');
  }
});

t.test("a closed flow's reply entry alone (the GC removed the forward entry first), quiet 9 s or more, is left to the GC", async (t) => {
  // The GC deletes what it read as idle for the closing lifetime (10 s),
  // forward entries first; a reply entry taken over between its read and
  // its delete would be deleted under the new flow (SNAT_TAKE_OVER_MAX_NS
  // in bpf/lib/nat.h). With the forward entry still there, the take-over
  // removes it, and the GC then leaves the reply entry alone.
  h.clearCt();
  h.configure(NODE_IP, 61000, 61000);
  t.teardown(() => h.configure(NODE_IP, SNAT_MIN, SNAT_MAX));
  const A = '203.0.113.60',
    B = '203.0.113.61',
    C = '203.0.113.62';
  t.equal(open(t, A, 47000), 61000);
  h.ingress(fromClient(A, 47000, TCP_RST));
  age(10n * S);
  const synB = fromClient(B, 48000, TCP_SYN);
  t.equal(translated(t, h.ingress(synB), synB, 'B, A quiet 10 s').sport, 61000, 'both entries there, quiet 10 s: taken over');
  t.equal(fwdEntry(A, 47000), undefined, "A's forward entry went with it (so the GC will leave the reply entry)");

  h.ingress(fromClient(B, 48000, TCP_RST));
  age(10n * S);
  h.ct.delete(fwdEntry(B, 48000)![0]); // as the GC's first delete does
  const synC = fromClient(C, 49000, TCP_SYN);
  t.same(
    h.countsOf(() => t.equal(h.ingress(synC).retval, TC_ACT_SHOT, 'C is dropped')),
    { 'tc_ingress/snat_ports_exhausted': 1 },
    'the reply entry alone, quiet 10 s: not taken over',
  );
  t.equal(replyEntry(61000)?.[1].new_daddr, B, "B's reply entry is untouched, for the GC");
  // A late packet of B's flow restarts its idle time: within the limit, the lone entry can go.
  translated(t, h.ingress(fromBackend(61000, TCP_ACK)), fromBackend(61000, TCP_ACK), 'a late packet of B');
  age(8n * S);
  t.equal(translated(t, h.ingress(synC), synC, 'C, B quiet 8 s').sport, 61000, 'alone, quiet 8 s: taken over');
});

t.test("a SYN retransmit of a flow whose reply entry is gone or another flow's starts the flow afresh", async (t) => {
  // The GC or the LRU may remove a flow's reply entry under it: the
  // backend's SYN-ACK would then reach the node's stack and be reset, for
  // every retransmitted SYN, until the client gave up.
  h.clearCt();
  const A = '203.0.113.70';
  const pa = open(t, A, 49000);
  const rep = replyEntry(pa)!;
  h.ct.delete(rep[0]);
  const again = open(t, A, 49000);
  t.equal(replyEntry(again)?.[1].new_daddr, A, `the retransmit reserved a reply entry again (port ${again})`);
  const back = translated(t, h.ingress(fromBackend(again, TCP_SYN | TCP_ACK)), fromBackend(again, TCP_SYN | TCP_ACK), 'SYN-ACK');
  t.same([back.daddr, back.dport], [A, 49000], 'the SYN-ACK reaches the client');
  t.equal(h.ctEntries().length, 2, "two entries, the flow's");

  // Its port's reply entry names another flow (B's, written over it): A moves to another port, B keeps its own.
  const B = { k: { ...rep[0], dport: again }, v: { ...rep[1], new_daddr: '203.0.113.71', new_dport: 49100 } };
  h.ct.put(B.k, B.v);
  const third = open(t, A, 49000);
  t.not(third, again, `A gets another port (${third})`);
  t.equal(replyEntry(again)?.[1].new_daddr, '203.0.113.71', "the other flow's reply entry is untouched");
  // Data on an established flow is left alone: a lookup per SYN only.
  h.ingress(fromBackend(third, TCP_SYN | TCP_ACK));
  h.ct.delete(replyEntry(third)![0]);
  const data = fromClient(A, 49000, TCP_ACK);
  t.equal(translated(t, h.ingress(data), data, 'data').sport, third, 'a packet other than a SYN keeps the flow as it is');
});
