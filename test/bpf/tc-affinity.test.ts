// sessionAffinity: ClientIP at tc (svcmap_tc_in, BPF_PROG_TEST_RUN): new
// flows from one client address to an affinity NodePort reach one backend,
// other clients may reach others; only a new conntrack entry consults the
// affinity map; an entry is used only while it is younger than the timeout
// and its slot still holds its backend; frontends without the flag never
// touch the map. Time is never waited for: entries are aged by rewriting
// their last use, relative to a time the program itself wrote.
import t, { type Test } from 'tap';
import type { AffinityKey, AffinityValue } from '../../src/maps/codecs.ts';
import {
  AFFINITY_ORIGIN_SOCK,
  AFFINITY_ORIGIN_TC,
  IPPROTO_TCP,
  SVC_F_AFFINITY,
  SVC_F_NODEPORT,
  SVC_SCOPE_EXT,
} from '../../src/maps/constants.ts';
import { TCP_ACK, TCP_SYN, buildIpv4 } from './fixtures/packets.ts';
import { CT_DIR_FWD } from './fixtures/tc-codecs.ts';
import { translated } from './fixtures/tc-expect.ts';
import { type BackendSpec, type ServiceSpec, TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const CLIENT = '203.0.113.7';
const BACKENDS: BackendSpec[] = [
  { id: 21, addr: '10.244.2.21', port: 8080 },
  { id: 22, addr: '10.244.2.22', port: 8080 },
  { id: 23, addr: '10.244.3.23', port: 8080 },
  { id: 24, addr: '10.244.3.24', port: 8080 },
];
const SEC = 1_000_000_000n;

const h = TcHarness.open();
t.teardown(() => h.close());
h.configure(NODE_IP);

let nextPort = 20000;
/** A client port no earlier flow of this file used: every SYN makes a new flow. */
const freshPort = () => nextPort++;

const affinityService = (port: number, revNatId: number, timeout: number, backends = BACKENDS): ServiceSpec => ({
  addr: NODE_IP,
  port,
  proto: 'tcp',
  revNatId,
  flags: SVC_F_NODEPORT | SVC_F_AFFINITY,
  affinityTimeout: timeout,
  backends,
});

/** The first packet of a new flow from client to NODE_IP:port; returns the backend address it was sent to. */
function newFlow(tt: Test, client: string, port: number, proto: 'tcp' | 'udp' = 'tcp'): string {
  const input = buildIpv4({ saddr: client, daddr: NODE_IP, proto, sport: freshPort(), dport: port, tcpFlags: TCP_SYN });
  return translated(tt, h.ingress(input), input, `new flow from ${client} to :${port}`).daddr;
}

const tcKey = (client: string, revNatId: number): AffinityKey => ({
  netns_cookie: 0n,
  client_addr: client,
  rev_nat_id: revNatId,
  origin: AFFINITY_ORIGIN_TC,
});
const addrOf = (id: number) => BACKENDS.find((b) => b.id === id)?.addr;

t.test('new flows from one client address reach one backend; other addresses may reach others', async (t) => {
  h.clearCt();
  h.clearAffinity();
  h.addService(affinityService(30500, 5, 10800));
  const seen = new Set<string>();
  for (let i = 0; i < 30; i++) seen.add(newFlow(t, CLIENT, 30500));
  t.equal(seen.size, 1, `30 flows from ${CLIENT}, one backend (${[...seen].join(', ')})`);
  t.equal(h.ctEntries().filter(([k]) => k.dir === CT_DIR_FWD).length, 30, 'each flow has its own conntrack entry');

  const entries = h.affinity.entries();
  t.equal(entries.length, 1, 'one affinity entry');
  const [key, val] = entries[0]!;
  t.same(key, tcKey(CLIENT, 5), "keyed by the client address and the frontend's rev_nat_id, origin tc");
  t.equal(addrOf(val.backend_id), [...seen][0], 'holding the backend the flows reached');
  t.equal(BACKENDS[val.slot - 1]?.id, val.backend_id, 'and the slot that holds it');
  t.ok(val.last_used > 0n, 'with the time of its last use');

  const byClient = new Map<string, Set<string>>();
  for (let c = 0; c < 24; c++) {
    const client = `203.0.113.${100 + c}`;
    const got = new Set<string>();
    for (let i = 0; i < 5; i++) got.add(newFlow(t, client, 30500));
    byClient.set(client, got);
  }
  for (const [client, got] of byClient) t.equal(got.size, 1, `${client}: 5 flows, one backend`);
  const union = new Set([...byClient.values()].flatMap((s) => [...s]));
  t.ok(union.size > 1, `24 clients spread over more than one backend (${[...union].join(', ')})`);
  t.equal(h.affinity.entries().length, 25, 'one entry per client');
});

t.test('new UDP flows from one client reach one backend too', async (t) => {
  h.clearCt();
  h.clearAffinity();
  h.addService({
    ...affinityService(
      30501,
      6,
      10800,
      BACKENDS.map((b) => ({ ...b, port: 53 })),
    ),
    proto: 'udp',
  });
  const seen = new Set<string>();
  for (let i = 0; i < 20; i++) seen.add(newFlow(t, CLIENT, 30501, 'udp'));
  t.equal(seen.size, 1, `20 UDP flows, one backend (${[...seen].join(', ')})`);
});

t.test('a known flow keeps its conntrack entry; only a new flow consults the affinity map', async (t) => {
  h.clearCt();
  h.clearAffinity();
  h.addService(affinityService(30502, 7, 10800));
  const sport = freshPort();
  const syn = buildIpv4({ saddr: CLIENT, daddr: NODE_IP, proto: 'tcp', sport, dport: 30502, tcpFlags: TCP_SYN });
  const first = translated(t, h.ingress(syn), syn, 'SYN').daddr;
  const entry = h.affinity.get(tcKey(CLIENT, 7))!;
  // Point the client at another backend (a current one, freshly used).
  const otherSlot = BACKENDS.findIndex((b) => b.addr !== first) + 1;
  const other = BACKENDS[otherSlot - 1]!;
  h.affinity.put(tcKey(CLIENT, 7), { ...entry, backend_id: other.id, slot: otherSlot });

  const data = buildIpv4({
    saddr: CLIENT,
    daddr: NODE_IP,
    proto: 'tcp',
    sport,
    dport: 30502,
    tcpFlags: TCP_ACK,
    payload: Buffer.from('x'),
  });
  t.equal(translated(t, h.ingress(data), data, 'data of the known flow').daddr, first, 'the known flow stays on its backend');
  t.equal(newFlow(t, CLIENT, 30502), other.addr, 'a new flow follows the affinity entry');
  t.equal(newFlow(t, CLIENT, 30502), other.addr, 'and the next one too');
});

t.test('an entry older than the timeout is replaced by a new choice; a younger one is used and refreshed', async (t) => {
  h.clearCt();
  h.clearAffinity();
  h.addService(affinityService(30503, 8, 5));
  newFlow(t, CLIENT, 30503);
  const written = h.affinity.get(tcKey(CLIENT, 8))!.last_used; // the program's clock, a moment ago
  t.ok(written > 7n * SEC, 'the node has been up for more than the ages used below');

  // Used 2 s ago, timeout 5 s: still current, and refreshed.
  h.affinity.put(tcKey(CLIENT, 8), { backend_id: BACKENDS[2]!.id, slot: 3, last_used: written - 2n * SEC });
  t.equal(newFlow(t, CLIENT, 30503), BACKENDS[2]!.addr, 'an entry younger than the timeout is used');
  const refreshed = h.affinity.get(tcKey(CLIENT, 8))!;
  t.ok(refreshed.last_used >= written, 'and its last use is now');
  t.match(refreshed, { backend_id: BACKENDS[2]!.id, slot: 3 });

  // Used 6 s ago: expired. The new choice is random, so over 20 rounds some
  // leave the old backend (all 20 on it: 4^-20).
  let moved = 0;
  for (let round = 0; round < 20; round++) {
    h.affinity.put(tcKey(CLIENT, 8), { backend_id: BACKENDS[2]!.id, slot: 3, last_used: written - 6n * SEC });
    const got = newFlow(t, CLIENT, 30503);
    if (got !== BACKENDS[2]!.addr) moved++;
    const now = h.affinity.get(tcKey(CLIENT, 8))!;
    t.equal(addrOf(now.backend_id), got, `round ${round}: the entry holds the new choice`);
    t.equal(BACKENDS[now.slot - 1]?.id, now.backend_id, `round ${round}: and its slot`);
    t.ok(now.last_used >= written, `round ${round}: used now`);
  }
  t.ok(moved > 0, `after the timeout the choice is made anew (${moved} of 20 rounds left the old backend)`);
});

t.test("a backend that is no longer in the frontend's slots is never used", async (t) => {
  h.clearCt();
  h.clearAffinity();
  h.addService(affinityService(30504, 9, 10800));
  const key = (slot: number) => ({ addr: NODE_IP, port: 30504, slot, proto: IPPROTO_TCP, scope: SVC_SCOPE_EXT });
  const master = (count: number) => ({
    backend_id: 0,
    rev_nat_id: 9,
    count,
    flags: SVC_F_NODEPORT | SVC_F_AFFINITY,
    algorithm: 0,
    affinity_timeout: 10800,
  });
  const fresh = () => {
    newFlow(t, '203.0.113.250', 30504);
    return h.affinity.get(tcKey('203.0.113.250', 9))!.last_used;
  };

  // A backend id the entry names but no slot of the frontend holds (an id
  // freed and reused, or another service's backend): never trusted.
  const STRANGER = { id: 99, addr: '10.244.9.99', port: 8080 };
  h.backends.put(STRANGER.id, { addr: STRANGER.addr, port: STRANGER.port, proto: IPPROTO_TCP, state: 0, flags: 0, zone: 0 });
  for (const [what, slot] of [
    ['slot 2 holds another backend', 2],
    ['slot 0 (the master)', 0],
    ['a slot past the count', 5],
  ] as const) {
    h.affinity.put(tcKey(CLIENT, 9), { backend_id: STRANGER.id, slot, last_used: fresh() });
    const got = newFlow(t, CLIENT, 30504);
    t.not(got, STRANGER.addr, `${what}: not used`);
    const now = h.affinity.get(tcKey(CLIENT, 9))!;
    t.equal(addrOf(now.backend_id), got, `${what}: the entry is replaced by the new choice`);
  }

  // The client's backend leaves, as the agent writes it: the last slot's
  // backend moves into its slot, the count shrinks, the last slot and the
  // backend go. The next new flow moves at once, and then stays.
  const chosen = h.affinity.get(tcKey(CLIENT, 9))!;
  const last = BACKENDS.length;
  if (chosen.slot !== last) {
    h.services.put(key(chosen.slot), {
      backend_id: BACKENDS[last - 1]!.id,
      rev_nat_id: 0,
      count: 0,
      flags: 0,
      algorithm: 0,
      affinity_timeout: 0,
    });
  }
  h.services.put(key(0), master(last - 1));
  h.services.delete(key(last));
  h.backends.delete(chosen.backend_id);
  const gone = addrOf(chosen.backend_id)!;
  const after = new Set<string>();
  for (let i = 0; i < 10; i++) after.add(newFlow(t, CLIENT, 30504));
  t.notOk(after.has(gone), `the removed backend ${gone} gets no new flow`);
  t.equal(after.size, 1, `the client moved to one remaining backend (${[...after].join(', ')})`);
});

t.test('turning affinity off and on again on a live frontend', async (t) => {
  h.clearCt();
  h.clearAffinity();
  const spec = affinityService(30505, 10, 10800);
  h.addService(spec);
  const sticky = newFlow(t, CLIENT, 30505);
  const before = h.affinity.get(tcKey(CLIENT, 10))!;

  h.addService({ ...spec, flags: SVC_F_NODEPORT, affinityTimeout: 0 });
  const off = new Set<string>();
  for (let i = 0; i < 40; i++) off.add(newFlow(t, CLIENT, 30505));
  t.ok(off.size > 1, `without the flag new flows spread again (${[...off].join(', ')})`);
  t.same(h.affinity.get(tcKey(CLIENT, 10)), before, 'and the entry is neither read nor refreshed');
  t.equal(h.affinity.entries().length, 1, 'nor any other written');

  h.addService(spec);
  for (let i = 0; i < 10; i++) t.equal(newFlow(t, CLIENT, 30505), sticky, `with the flag again: the remembered backend (${i + 1})`);
});

t.test('a frontend without the flag never writes the map', async (t) => {
  h.clearCt();
  h.clearAffinity();
  h.addService({ addr: NODE_IP, port: 30506, proto: 'tcp', revNatId: 11, flags: SVC_F_NODEPORT, backends: BACKENDS });
  const seen = new Set<string>();
  for (let i = 0; i < 40; i++) seen.add(newFlow(t, CLIENT, 30506));
  t.ok(seen.size > 1, `40 flows spread as before (${[...seen].join(', ')})`);
  t.equal(h.affinity.entries().length, 0, 'the affinity map stays empty');
});

t.test('tc keeps to its own entries: a socket-hook entry for the same frontend is not read', async (t) => {
  h.clearCt();
  h.clearAffinity();
  h.addService(affinityService(30507, 12, 10800));
  newFlow(t, '203.0.113.251', 30507);
  const now = h.affinity.get(tcKey('203.0.113.251', 12))!.last_used;
  const sockKey: AffinityKey = { netns_cookie: 0n, client_addr: CLIENT, rev_nat_id: 12, origin: AFFINITY_ORIGIN_SOCK };
  const sockVal: AffinityValue = { backend_id: BACKENDS[0]!.id, slot: 1, last_used: now };
  h.affinity.put(sockKey, sockVal);
  let elsewhere = 0;
  for (let round = 0; round < 20; round++) {
    h.affinity.delete(tcKey(CLIENT, 12));
    if (newFlow(t, CLIENT, 30507) !== BACKENDS[0]!.addr) elsewhere++;
  }
  t.ok(elsewhere > 0, `the tc choice ignores the socket entry (${elsewhere} of 20 went elsewhere)`);
  t.same(h.affinity.get(sockKey), sockVal, 'which stays as it was');
});
