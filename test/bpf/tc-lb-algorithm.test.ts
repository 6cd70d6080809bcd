// Load-balancing algorithms at tc (svcmap_tc_in, BPF_PROG_TEST_RUN): rr
// rotates exactly through the slots for sequential new flows; sh keeps a
// client address on one backend (and, with SVC_F_SH_PORT, a client
// address + source port); session affinity on top of rr uses rr on a miss;
// random is unchanged.
import t, { type Test } from 'tap';
import {
  IPPROTO_TCP, LB_ALG_MAGLEV, LB_ALG_RR, LB_ALG_SH, SVC_F_AFFINITY, SVC_F_NODEPORT, SVC_F_SH_PORT, SVC_SCOPE_EXT,
} from '../../src/maps/constants.ts';
import { TCP_SYN, buildIpv4 } from './fixtures/packets.ts';
import { translated } from './fixtures/tc-expect.ts';
import { type BackendSpec, type ServiceSpec, TcHarness } from './fixtures/tc-harness.ts';

const NODE_IP = '198.51.100.1';
const BACKENDS: BackendSpec[] = [
  { id: 31, addr: '10.244.2.31', port: 8080 },
  { id: 32, addr: '10.244.2.32', port: 8080 },
  { id: 33, addr: '10.244.3.33', port: 8080 },
];

const h = TcHarness.open();
t.teardown(() => h.close());
h.configure(NODE_IP);

let nextPort = 21000;
const freshPort = () => nextPort++;

const service = (port: number, revNatId: number, algorithm: number, flags = 0, backends = BACKENDS): ServiceSpec => ({
  addr: NODE_IP, port, proto: 'tcp', revNatId, flags: SVC_F_NODEPORT | flags, algorithm, backends,
  ...(flags & SVC_F_AFFINITY ? { affinityTimeout: 10800 } : {}),
});

function newFlow(tt: Test, client: string, port: number, sport = freshPort()): string {
  const input = buildIpv4({ saddr: client, daddr: NODE_IP, proto: 'tcp', sport, dport: port, tcpFlags: TCP_SYN });
  return translated(tt, h.ingress(input), input, `new flow from ${client}:${sport} to :${port}`).daddr;
}

const master = (port: number) => h.services.get({ addr: NODE_IP, port, proto: IPPROTO_TCP, scope: SVC_SCOPE_EXT, slot: 0 });

t.test('rr: sequential new flows rotate exactly through the slots', async (t) => {
  h.clearCt();
  h.addService(service(30600, 60, LB_ALG_RR));
  const got: string[] = [];
  for (let i = 0; i < 9; i++) got.push(newFlow(t, `203.0.113.${10 + i}`, 30600));
  const first = BACKENDS.findIndex((b) => b.addr === got[0]);
  t.same(got, got.map((_, i) => BACKENDS[(first + i) % 3]!.addr), `exact rotation: ${got.join(', ')}`);
  t.equal(master(30600)?.backend_id, 9, 'the master\'s counter advanced once per new flow');
  // Packets of a known flow do not advance it.
  const sport = freshPort();
  const a = newFlow(t, '203.0.113.50', 30600, sport);
  const input = buildIpv4({ saddr: '203.0.113.50', daddr: NODE_IP, proto: 'tcp', sport, dport: 30600, tcpFlags: 0x10 });
  t.equal(translated(t, h.ingress(input), input, 'same flow').daddr, a, 'the flow keeps its backend');
  t.equal(master(30600)?.backend_id, 10, 'a known flow\'s packet does not turn the wheel');
});

t.test('sh: one client address always reaches one backend; clients spread', async (t) => {
  h.clearCt();
  h.addService(service(30601, 61, LB_ALG_SH));
  const union = new Set<string>();
  for (let c = 0; c < 24; c++) {
    const client = `203.0.113.${100 + c}`;
    const got = new Set<string>();
    for (let i = 0; i < 8; i++) got.add(newFlow(t, client, 30601));
    t.equal(got.size, 1, `${client}: 8 flows (new source ports), one backend`);
    union.add([...got][0]!);
  }
  t.equal(union.size, 3, `24 clients reach all 3 backends (${[...union].join(', ')})`);
  t.equal(master(30601)?.backend_id, 0, 'sh does not touch the rr counter');
});

t.test('sh with SVC_F_SH_PORT: the source port is hashed too', async (t) => {
  h.clearCt();
  h.addService(service(30602, 62, LB_ALG_SH, SVC_F_SH_PORT));
  const client = '203.0.113.9';
  const byPort = new Map<number, string>();
  for (let i = 0; i < 24; i++) {
    const sport = 40000 + i * 7;
    byPort.set(sport, newFlow(t, client, 30602, sport));
  }
  t.ok(new Set(byPort.values()).size > 1, 'one address, different ports: more than one backend');
  h.clearCt();
  for (const [sport, be] of byPort) t.equal(newFlow(t, client, 30602, sport), be, `${client}:${sport} again: the same backend`);
});

t.test('affinity on top of rr: a miss chooses by rr, a hit keeps the backend', async (t) => {
  h.clearCt();
  h.clearAffinity();
  h.addService(service(30603, 63, LB_ALG_RR, SVC_F_AFFINITY));
  const firsts: string[] = [];
  for (let c = 0; c < 6; c++) {
    const client = `203.0.113.${150 + c}`;
    const be = newFlow(t, client, 30603);
    firsts.push(be);
    for (let i = 0; i < 3; i++) t.equal(newFlow(t, client, 30603), be, `${client}: affinity holds`);
  }
  const first = BACKENDS.findIndex((b) => b.addr === firsts[0]);
  t.same(firsts, firsts.map((_, i) => BACKENDS[(first + i) % 3]!.addr), `new clients rotate: ${firsts.join(', ')}`);
  t.equal(master(30603)?.backend_id, 6, 'only the misses turned the wheel');
});

t.test('an algorithm id the datapath does not implement (maglev today) is random, and works', async (t) => {
  h.clearCt();
  h.addService(service(30604, 64, LB_ALG_MAGLEV));
  const seen = new Set<string>();
  for (let i = 0; i < 40; i++) seen.add(newFlow(t, '203.0.113.77', 30604));
  t.ok(seen.size > 1, `random spread (${[...seen].join(', ')})`);
});
