// The flow state the tc programs keep in their conntrack entries
// (BPF_PROG_TEST_RUN, nothing attached): a reply sets CT_F_SEEN_REPLY, FINs
// set CT_F_FIN_FWD / CT_F_FIN_REPLY and, from both sides, CT_F_CLOSING, an
// RST sets CT_F_CLOSING; every change lands on both entries of the flow at
// once, with last_seen, while plain packets refresh last_seen at most once a
// second. A SYN on a closed flow starts it afresh.
import t from 'tap';
import { SVC_F_NODEPORT } from '../../src/maps/constants.ts';
import type { CtKey, CtValue } from '../../src/maps/codecs.ts';
import { TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, buildIpv4, parseIpv4 } from './fixtures/packets.ts';
import { CT_DIR_FWD, CT_DIR_REPLY_IN, CT_DIR_REPLY_OUT, CT_F_LOCAL, CT_F_SNAT } from './fixtures/tc-codecs.ts';
import { CT_F_CLOSING, CT_F_FIN_FWD, CT_F_FIN_REPLY, CT_F_SEEN_REPLY } from '../../src/maps/constants.ts';
import { translated } from './fixtures/tc-expect.ts';
import { TC_ACT_OK, TC_ACT_REDIRECT, TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const CLIENT = '203.0.113.7';
const REMOTE = { id: 51, addr: '10.244.2.51', port: 8080 };
const LOCAL = { id: 52, addr: '10.244.1.52', port: 8080, local: true };
const UDP_REMOTE = { id: 53, addr: '10.244.2.53', port: 53 };
const SNAT_PORT = 30500;
const LOCAL_PORT = 30501;
const UDP_PORT = 30502;
const STATE = CT_F_SEEN_REPLY | CT_F_CLOSING | CT_F_FIN_FWD | CT_F_FIN_REPLY;

const h = TcHarness.open({ ctMax: 256 });
t.teardown(() => h.close());
h.configure(NODE_IP);
h.addService({ addr: NODE_IP, port: SNAT_PORT, proto: 'tcp', revNatId: 1, flags: SVC_F_NODEPORT, backends: [REMOTE] });
h.addService({ addr: NODE_IP, port: LOCAL_PORT, proto: 'tcp', revNatId: 2, flags: SVC_F_NODEPORT, backends: [LOCAL] });
h.addService({ addr: NODE_IP, port: UDP_PORT, proto: 'udp', revNatId: 3, flags: SVC_F_NODEPORT, backends: [UDP_REMOTE] });

interface Flow {
  /** A packet from the client (ingress). */
  fwd(flags: number): Buffer;
  /** A packet from the backend: at ingress for a SNATed flow, at egress for a DNAT-only one. */
  reply(flags: number): Buffer;
  sendReply(flags: number): ReturnType<TcHarness['ingress']>;
  entries(): { fwd: [CtKey, CtValue] | undefined; rep: [CtKey, CtValue] | undefined };
}

/** Opens a TCP flow with a SYN from sport; remote (SNAT) or local (DNAT only). */
function open(sport: number, local = false, firstFlags = TCP_SYN): Flow {
  const dport = local ? LOCAL_PORT : SNAT_PORT;
  const fwd = (flags: number) =>
    buildIpv4({
      saddr: CLIENT,
      daddr: NODE_IP,
      proto: 'tcp',
      sport,
      dport,
      tcpFlags: flags,
      payload: flags & TCP_SYN ? undefined : Buffer.from('c'),
    });
  const first = h.ingress(fwd(firstFlags));
  if (first.retval !== TC_ACT_OK && first.retval !== TC_ACT_REDIRECT) throw new Error(`first packet: retval ${first.retval}`);
  const out = parseIpv4(first.packetOut);
  const reply = (flags: number) =>
    buildIpv4({
      saddr: out.daddr,
      daddr: out.saddr,
      proto: 'tcp',
      sport: out.dport,
      dport: out.sport,
      tcpFlags: flags,
      payload: flags & TCP_SYN ? undefined : Buffer.from('b'),
    });
  const entries = () => {
    const all = h.ctEntries();
    return {
      fwd: all.find(([k]) => k.dir === CT_DIR_FWD && k.sport === sport && k.dport === dport),
      rep: all.find(([k]) => k.dir === (local ? CT_DIR_REPLY_OUT : CT_DIR_REPLY_IN) && k.saddr === out.daddr && k.dport === out.sport),
    };
  };
  return { fwd, reply, sendReply: (flags) => (local ? h.egress(reply(flags)) : h.ingress(reply(flags))), entries };
}

/** The state bits of both entries. */
function state(f: Flow): [number | undefined, number | undefined] {
  const { fwd, rep } = f.entries();
  return [fwd === undefined ? undefined : fwd[1].flags & STATE, rep === undefined ? undefined : rep[1].flags & STATE];
}

for (const local of [false, true]) {
  const kind = local ? 'DNAT-only flow (reply at egress)' : 'SNATed flow (reply at ingress)';
  const base = local ? CT_F_LOCAL : CT_F_SNAT;

  t.test(`${kind}: SYN, SYN-ACK, FINs both ways`, async (t) => {
    h.clearCt();
    const f = open(local ? 42000 : 42100, local);
    t.same(state(f), [0, 0], 'after the SYN: no state yet');
    t.equal(f.entries().fwd?.[1].flags, base, 'and the translation flags as before');

    const before = f.entries().rep![1].last_seen;
    translated(t, f.sendReply(TCP_SYN | TCP_ACK), f.reply(TCP_SYN | TCP_ACK), 'SYN-ACK');
    t.same(state(f), [CT_F_SEEN_REPLY, CT_F_SEEN_REPLY], 'the SYN-ACK: SEEN_REPLY on both entries');
    t.ok(f.entries().rep![1].last_seen > before, 'the state change wrote last_seen at once (within the refresh second)');

    translated(t, h.ingress(f.fwd(TCP_ACK)), f.fwd(TCP_ACK), 'ACK');
    t.same(state(f), [CT_F_SEEN_REPLY, CT_F_SEEN_REPLY], 'data: no change');

    translated(t, h.ingress(f.fwd(TCP_FIN | TCP_ACK)), f.fwd(TCP_FIN | TCP_ACK), 'client FIN');
    t.same(
      state(f),
      [CT_F_SEEN_REPLY | CT_F_FIN_FWD, CT_F_SEEN_REPLY | CT_F_FIN_FWD],
      "the client's FIN: FIN_FWD on both, not closing yet (a half-close)",
    );

    translated(t, f.sendReply(TCP_ACK), f.reply(TCP_ACK), 'backend data after the half-close');
    translated(t, f.sendReply(TCP_FIN | TCP_ACK), f.reply(TCP_FIN | TCP_ACK), 'backend FIN');
    const closed = CT_F_SEEN_REPLY | CT_F_FIN_FWD | CT_F_FIN_REPLY | CT_F_CLOSING;
    t.same(state(f), [closed, closed], "the backend's FIN: FIN_REPLY and CLOSING on both");
    t.equal(f.entries().fwd![1].flags & ~STATE, base, 'the translation flags are untouched');

    translated(t, h.ingress(f.fwd(TCP_ACK)), f.fwd(TCP_ACK), 'last ACK');
    t.same(state(f), [closed, closed]);
  });

  t.test(`${kind}: the backend closes first`, async (t) => {
    h.clearCt();
    const f = open(local ? 42001 : 42101, local);
    f.sendReply(TCP_SYN | TCP_ACK);
    f.sendReply(TCP_FIN | TCP_ACK);
    t.same(state(f), [CT_F_SEEN_REPLY | CT_F_FIN_REPLY, CT_F_SEEN_REPLY | CT_F_FIN_REPLY]);
    h.ingress(f.fwd(TCP_FIN | TCP_ACK));
    const closed = CT_F_SEEN_REPLY | CT_F_FIN_FWD | CT_F_FIN_REPLY | CT_F_CLOSING;
    t.same(state(f), [closed, closed]);
  });

  t.test(`${kind}: an RST from either side closes`, async (t) => {
    h.clearCt();
    const a = open(local ? 42002 : 42102, local);
    a.sendReply(TCP_SYN | TCP_ACK);
    translated(t, h.ingress(a.fwd(TCP_RST | TCP_ACK)), a.fwd(TCP_RST | TCP_ACK), 'client RST');
    t.same(state(a), [CT_F_SEEN_REPLY | CT_F_CLOSING, CT_F_SEEN_REPLY | CT_F_CLOSING], 'client RST: CLOSING on both');

    const b = open(local ? 42003 : 42103, local);
    translated(t, b.sendReply(TCP_RST | TCP_ACK), b.reply(TCP_RST | TCP_ACK), 'backend RST to the SYN');
    t.same(state(b), [CT_F_SEEN_REPLY | CT_F_CLOSING, CT_F_SEEN_REPLY | CT_F_CLOSING], 'refused: SEEN_REPLY and CLOSING on both');
  });
}

t.test('UDP: the answer sets SEEN_REPLY on both entries; datagrams from the client do not', async (t) => {
  h.clearCt();
  const q = (i: number) =>
    buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'udp', sport: 43000, dport: UDP_PORT, payload: Buffer.from(`q${i}`) });
  const out = parseIpv4(h.ingress(q(0)).packetOut);
  h.ingress(q(1));
  const flags = () =>
    h
      .ctEntries()
      .map(([k, v]) => [k.dir, v.flags & STATE])
      .sort();
  t.same(
    flags(),
    [
      [CT_DIR_FWD, 0],
      [CT_DIR_REPLY_IN, 0],
    ],
    'queries only: nothing seen back',
  );
  const answer = buildIpv4({
    saddr: out.daddr,
    daddr: out.saddr,
    proto: 'udp',
    sport: out.dport,
    dport: out.sport,
    payload: Buffer.from('a'),
  });
  translated(t, h.ingress(answer), answer, 'answer');
  t.same(flags(), [
    [CT_DIR_FWD, CT_F_SEEN_REPLY],
    [CT_DIR_REPLY_IN, CT_F_SEEN_REPLY],
  ]);
});

t.test('without a state change, last_seen is written at most once a second', async (t) => {
  h.clearCt();
  const f = open(42200);
  f.sendReply(TCP_SYN | TCP_ACK);
  const seen = () => [f.entries().fwd![1].last_seen, f.entries().rep![1].last_seen];
  const before = seen();
  for (let i = 0; i < 5; i++) {
    h.ingress(f.fwd(TCP_ACK));
    f.sendReply(TCP_ACK);
  }
  t.same(seen(), before, 'ten packets within the second: last_seen stays');
  await new Promise((r) => setTimeout(r, 1100));
  h.ingress(f.fwd(TCP_ACK));
  const after = seen();
  t.ok(after[0]! > before[0]!, 'a packet after more than a second refreshes the forward entry');
  t.equal(after[1], before[1], 'and only the entry the packet met');
});

t.test('a SYN on a closed flow starts it afresh; on a live one it keeps the flow', async (t) => {
  h.clearCt();
  const f = open(42300);
  f.sendReply(TCP_SYN | TCP_ACK);
  const established = f.entries();
  translated(t, h.ingress(f.fwd(TCP_SYN)), f.fwd(TCP_SYN), 'SYN on the established flow');
  t.same(f.entries().fwd?.[1], established.fwd?.[1], 'a SYN without FIN or RST before it keeps the flow as it was');

  h.ingress(f.fwd(TCP_FIN | TCP_ACK));
  f.sendReply(TCP_FIN | TCP_ACK);
  t.same(state(f)[0]! & CT_F_CLOSING, CT_F_CLOSING, 'closed');
  const out = translated(t, h.ingress(f.fwd(TCP_SYN)), f.fwd(TCP_SYN), 'a new SYN from the same client port');
  t.equal(out.daddr, REMOTE.addr);
  const all = h.ctEntries();
  t.equal(all.length, 2, 'one fresh pair, nothing left of the old flow');
  t.same(
    all.map(([, v]) => v.flags & STATE),
    [0, 0],
    'with no state',
  );

  h.clearCt();
  const half = open(42301);
  half.sendReply(TCP_SYN | TCP_ACK);
  h.ingress(half.fwd(TCP_FIN | TCP_ACK));
  h.ingress(half.fwd(TCP_SYN));
  t.same(
    h.ctEntries().map(([, v]) => v.flags & STATE),
    [0, 0],
    'after a FIN from one side, a SYN starts afresh too',
  );
});

t.test('a flow whose first packet is an RST starts out closing', async (t) => {
  h.clearCt();
  const f = open(42400, false, TCP_RST | TCP_ACK);
  t.same(state(f), [CT_F_CLOSING, CT_F_CLOSING]);
});
