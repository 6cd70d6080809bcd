// The socket hooks' counters end to end: the real agent with its hooks on a
// cgroup of the test's own, real sockets from a client pod in that cgroup.
// Each outcome is provoked and seen in `svcmap status` (summed over the
// CPUs, only counters that are not zero) and in the agent's
// svcmap_datapath_packets_total{hook,reason} on /metrics. The counters map
// is the test's own (its pin directory), and only the client runs in the
// cgroup, so every count here is the client's.
import t from 'tap';
import { z } from 'zod';
import { type Cluster, POD_IPS, TCP_PORT, UDP_PORT, echoService, startCluster } from './fixtures/cluster.ts';

const VIP = '10.96.0.60';
const EMPTY = '10.96.0.61'; // a Service without endpoints

let c: Cluster;
t.before(async () => {
  c = await startCluster([echoService('echo', VIP), echoService('empty', EMPTY, { endpoints: [] })]);
  await c.startAgent();
});
t.teardown(async () => {
  await c?.destroy();
});

const statusSchema = z.object({
  counters: z.array(z.object({ hook: z.string(), reason: z.string(), packets: z.number(), drop: z.boolean() })),
});

/** The non-zero counters `svcmap status -o json` shows, as "hook/reason" -> packets. */
function statusCounters(): Map<string, number> {
  const s = statusSchema.parse(JSON.parse(c.svcmap('status', '-o', 'json')));
  return new Map(s.counters.map((r) => [`${r.hook}/${r.reason}`, r.packets]));
}

/** What fn added to the counters (only those that moved). */
async function moved(fn: () => Promise<unknown>): Promise<Record<string, number>> {
  const before = statusCounters();
  await fn();
  const out: Record<string, number> = {};
  for (const [k, v] of statusCounters()) {
    const d = v - (before.get(k) ?? 0);
    if (d !== 0) out[k] = d;
  }
  return out;
}

async function metricsText(): Promise<string> {
  const up = await c.agent.waitFor((l) => l.msg === 'serving metrics and health', { what: 'metrics port' });
  return (await fetch(`http://127.0.0.1:${String(up.metricsPort)}/metrics`)).text();
}

function metric(text: string, hook: string, reason: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`svcmap_datapath_packets_total{hook="${hook}",reason="${reason}"}`));
  return line === undefined ? Number.NaN : Number(line.split(' ').at(-1));
}

t.test('connect4: translated, refused without a backend, passed for a pod address; getpeername4 follows', async (t) => {
  let d = await moved(async () => {
    const r = await c.client.tcpConnect({ ip: VIP, port: 80, count: 5, timeoutMs: 2000 });
    t.equal(r.ok, 5, JSON.stringify(r.errors));
    t.same(r.peerNames, [`${VIP}:80`], 'getpeername shows the VIP');
  });
  t.equal(d['connect4/translated'], 5, 'connect4/translated: one per connection');
  t.ok((d['getpeername4/reply_translated'] ?? 0) >= 5, `getpeername4/reply_translated (${JSON.stringify(d)})`);
  t.notOk(d['connect4/sk_revnat_write_failed'], 'every reverse entry was written');

  d = await moved(async () => {
    const r = await c.client.tcpConnect({ ip: EMPTY, port: 80, count: 3, timeoutMs: 2000 });
    t.same(r.errors, { ECONNREFUSED: 3 }, 'refused at once');
  });
  t.same(d, { 'connect4/no_backend': 3 }, 'connect4/no_backend, and nothing else');

  d = await moved(async () => {
    const r = await c.client.tcpConnect({ ip: POD_IPS[0]!, port: TCP_PORT, count: 2, timeoutMs: 2000 });
    t.equal(r.ok, 2, JSON.stringify(r.errors));
  });
  t.equal(d['connect4/passed'], 2, 'connect4/passed for a pod address');
  t.ok((d['getpeername4/passed'] ?? 0) >= 2, `getpeername4/passed (${JSON.stringify(d)})`);
  t.notOk(d['connect4/translated'], 'nothing translated');
});

t.test('sendmsg4 and recvmsg4: unconnected UDP', async (t) => {
  let d = await moved(async () => {
    const r = await c.client.udpSend({ ip: VIP, port: 53, count: 4, connected: false, timeoutMs: 2000 });
    t.equal(r.ok, 4, JSON.stringify(r.errors));
    t.same(r.replySources, [`${VIP}:53`], 'replies show the VIP');
  });
  t.equal(d['sendmsg4/translated'], 4, 'sendmsg4/translated: one per datagram');
  t.equal(d['recvmsg4/reply_translated'], 4, 'recvmsg4/reply_translated: one per reply');

  d = await moved(async () => {
    const r = await c.client.udpSend({ ip: EMPTY, port: 53, count: 2, connected: false, timeoutMs: 500 });
    t.equal(r.ok, 0, 'nothing reaches a Service without endpoints');
  });
  t.equal(d['sendmsg4/no_backend'], 2, `sendmsg4/no_backend (${JSON.stringify(d)})`);

  d = await moved(async () => {
    const r = await c.client.udpSend({ ip: POD_IPS[1]!, port: UDP_PORT, count: 3, connected: false, timeoutMs: 2000 });
    t.equal(r.ok, 3, JSON.stringify(r.errors));
  });
  t.equal(d['sendmsg4/passed'], 3, 'sendmsg4/passed for a pod address');
  t.equal(d['recvmsg4/passed'], 3, 'recvmsg4/passed: a reply from no frontend');
});

t.test('the agent exports the same counters, and svcmap status lists them', async (t) => {
  const status = statusCounters();
  const text = await metricsText();
  t.match(text, /# TYPE svcmap_datapath_packets_total counter/, 'a counter');
  for (const k of [
    'connect4/translated',
    'connect4/no_backend',
    'connect4/passed',
    'sendmsg4/translated',
    'sendmsg4/no_backend',
    'recvmsg4/reply_translated',
  ]) {
    const [hook, reason] = k.split('/') as [string, string];
    t.ok(status.get(k)! > 0, `${k} is in status`);
    t.equal(metric(text, hook, reason), status.get(k), `${k}: /metrics says what status says`);
  }
  t.equal(metric(text, 'tc_ingress', 'snat_ports_exhausted'), 0, 'counters that never moved are exported as 0');
  const table = c.svcmap('status');
  t.match(table, /DATAPATH COUNTERS/);
  t.match(table, new RegExp(`connect4\\s+no_backend\\s+${status.get('connect4/no_backend')}\\s+drop`), 'the table marks drops');
  t.notMatch(table, /snat_ports_exhausted/, 'and leaves zeros out');
});
