// Failover between API servers, as an operator with a highly available
// control plane meets it: `svcmap agent --k8s-api-server A,B` (the real CLI,
// the real client-node informers) against two test API servers on one store
// (lab/apiserver sameStoreAs: two kube-apiservers on one etcd), objects
// written through the API, real connections from a client pod in the hooks'
// cgroup to the echo pods.
//  - the agent watches through A; /healthz, svcmap status and the metrics
//    say so;
//  - A killed (its port closed: connection refused) during a loop of
//    connections: 0 failures; the agent moves to B and relists there; a
//    Service created and one deleted after the kill reach the maps (the
//    deletion too: the relist drops what is gone); /healthz, status and the
//    metrics name B and one failover;
//  - B stalls (takes requests, answers none, no bookmarks): after the stall
//    bound (--k8s-api-stall-timeout, short here) and an unanswered /readyz
//    the agent moves back to A (running again) and a change made meanwhile
//    reaches the maps.
// Each step waits for the agent's log and sync; no step is timed.
import t from 'tap';
import { type ApiServer, endpointSlice, node, service, startApiServer, writeKubeconfig } from '../../lab/apiserver/index.ts';
import { type LogLine, SVCMAP } from '../../lab/agent-process.ts';
import { type Cluster, POD_IPS, POD_NAMES, TCP_PORT, startCluster } from './fixtures/cluster.ts';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const WEB = '10.96.0.10';
const GONE = '10.96.0.11';
const AFTER = '10.96.0.12';
const STALLED = '10.96.0.13';
/** Generous guards against a hang (an agent that never syncs): the waits end on the agent's log, not on time. */
const HANG_GUARD_MS = 120_000;
/**
 * Short, so that the stall test does not wait the production bound (75 s);
 * the servers' bookmarks come well within it. The API servers run in this
 * process: nothing here blocks its event loop (svcmap runs asynchronously),
 * or they would fall silent.
 */
const STALL = '10s';
const BOOKMARK_MS = 250;
const MOVED = 'the API server stopped answering; moved to the next one, relisting there (the maps keep their state)';

const svc = (name: string, ip: string) => service(name, { clusterIP: ip, ports: [{ name: 'tcp', port: 80, targetPort: TCP_PORT }] });
const slice = (name: string) =>
  endpointSlice(`${name}-abc`, {
    service: name,
    ports: [{ name: 'tcp', port: TCP_PORT }],
    endpoints: POD_IPS.map((a) => ({ addresses: [a], nodeName: 'node' })),
  });

let c: Cluster;
let a: ApiServer;
let b: ApiServer;
let dir: string;
let ports: { metrics: number; health: number };
t.before(async () => {
  c = await startCluster([]);
  a = await startApiServer({
    objects: [node('node', { internalIP: '10.244.0.100' }), svc('web', WEB), slice('web'), svc('gone', GONE), slice('gone')],
    bookmarkIntervalMs: BOOKMARK_MS,
  });
  b = await startApiServer({ sameStoreAs: a, bookmarkIntervalMs: BOOKMARK_MS });
  dir = mkdtempSync(join(tmpdir(), 'svcmap-kubeconfig-'));
  const kubeconfig = await writeKubeconfig(join(dir, 'kubeconfig'), a);
  await c.startAgent(['--kubeconfig', kubeconfig, '--k8s-api-server', `${a.url},${b.url}`, '--k8s-api-stall-timeout', STALL]);
  const up = await c.agent.waitFor((l) => l.msg === 'serving metrics and health', { what: 'servers up' });
  ports = { metrics: up.metricsPort as number, health: up.healthPort as number };
});
t.teardown(async () => {
  await c?.destroy();
  await b?.close();
  await a?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** svcmap ARGS on the test's pin directory, without blocking the API servers in this process. */
async function svcmap(...args: string[]): Promise<string> {
  return (await promisify(execFile)(SVCMAP, [...args, '--pin-dir', c.pinDir], { encoding: 'utf8' })).stdout;
}

/** The frontend addresses svcmap dump lists. */
async function dumped(): Promise<string[]> {
  const d = JSON.parse(await svcmap('dump', '-o', 'json')) as { frontends: Array<{ address: string }> };
  return [...new Set(d.frontends.map((f) => f.address))].sort();
}

/** The agent's syncs after `from`, until the maps hold exactly these frontend addresses. */
async function synced(from: number, addresses: string[], what: string): Promise<void> {
  for (let at = from; ; ) {
    const l: LogLine = await c.agent.waitFor((l) => l.msg === 'sync done', { from: at, timeoutMs: HANG_GUARD_MS, what });
    if (JSON.stringify(await dumped()) === JSON.stringify([...addresses].sort())) return;
    at = c.agent.lines.indexOf(l) + 1;
  }
}

async function reached(ip: string, count = 30): Promise<string[]> {
  const r = await c.client.tcpConnect({ ip, port: 80, count, timeoutMs: 2000, concurrency: 4 });
  if (r.ok !== count) throw new Error(`connections to ${ip}:80 failed: ${JSON.stringify(r)}`);
  return Object.keys(r.byPod).sort();
}

/** What the operator sees: /healthz's apiServer fields, `svcmap status`'s agent line, the two metrics. */
async function reported(): Promise<{ healthz: unknown; status: string; info: string[]; failovers: string | undefined }> {
  const healthz = (await (await fetch(`http://127.0.0.1:${ports.health}/healthz`)).json()) as Record<string, unknown>;
  const status = (await svcmap('status', '--healthz-address', `127.0.0.1:${ports.health}`)).split('\n')[1]!;
  const metrics = await (await fetch(`http://127.0.0.1:${ports.metrics}/metrics`)).text();
  const info = metrics.split('\n').filter((l) => l.startsWith('svcmap_k8s_api_server_info{'));
  const failovers = metrics.split('\n').find((l) => l.startsWith('svcmap_k8s_api_failovers_total '));
  return { healthz: { apiServer: healthz.apiServer, apiServerFailovers: healthz.apiServerFailovers }, status, info, failovers };
}

t.test('two API servers: the agent watches through the first; /healthz, svcmap status and the metrics say so', async (t) => {
  t.same(await reached(WEB), POD_NAMES, 'web reaches the three pods');
  const r = await reported();
  t.same(r.healthz, { apiServer: a.url, apiServerFailovers: 0 }, '/healthz names A, no failover');
  t.equal(r.status, `agent: healthy, ready; API server ${a.url} (failovers: 0)`, 'svcmap status says the same');
  t.same(r.info, [`svcmap_k8s_api_server_info{url="${a.url}"} 1`], 'svcmap_k8s_api_server_info: A');
  t.equal(r.failovers, 'svcmap_k8s_api_failovers_total 0');
  t.ok(b.requests().length === 0, 'B has had no request yet');
});

t.test(
  'A killed during a loop of connections: 0 failures; the agent moves to B, and what changed after the kill reaches the maps',
  async (t) => {
    const loop = c.client.tcpLoop({ ip: WEB, port: 80, count: 1500, timeoutMs: 2000 });
    const from = c.agent.mark();
    const onB = b.mark();
    await a.stop(); // like kill -9: the port closes, every connection is destroyed
    a.create(svc('after', AFTER)); // written to the store both serve (A's process is gone; B serves it)
    a.create(slice('after'));
    a.delete('Service', 'default', 'gone');
    a.delete('EndpointSlice', 'default', 'gone-abc');
    const moved = await c.agent.waitFor((l) => l.msg === MOVED, { from, timeoutMs: HANG_GUARD_MS, what: 'the move to B' });
    t.match(moved, { from: a.url, to: b.url, failovers: 1 }, `moved from A to B (${String(moved.reason)})`);
    await synced(from, [WEB, AFTER], 'web and after, without gone');
    t.ok(b.lists('EndpointSlice', onB).length > 0 && b.lists('Service', onB).length > 0, 'the agent listed again on B');
    t.same(await reached(AFTER), POD_NAMES, 'the Service created after the kill is served');
    const r = await c.client.tcpConnect({ ip: GONE, port: 80, count: 1, timeoutMs: 500 });
    t.same([r.ok, r.byPod], [0, {}], 'the Service deleted after the kill is no longer translated');
    const l = await loop;
    t.equal(l.failed, 0, `connections during the kill and the move: ${JSON.stringify(l.errors)}`);
    t.equal(l.ok, 1500, 'every connection of the loop answered');
    const rep = await reported();
    t.same(rep.healthz, { apiServer: b.url, apiServerFailovers: 1 }, '/healthz names B, one failover');
    t.equal(rep.status, `agent: healthy, ready; API server ${b.url} (failovers: 1)`, 'svcmap status says the same');
    t.same(rep.info, [`svcmap_k8s_api_server_info{url="${b.url}"} 1`], 'svcmap_k8s_api_server_info: B only');
    t.equal(rep.failovers, 'svcmap_k8s_api_failovers_total 1');
  },
);

t.test(
  'B stalls (no answer, no bookmark): past the stall bound the agent moves back to A, and a change made meanwhile reaches the maps',
  async (t) => {
    await a.restart({ keepHistory: true });
    const from = c.agent.mark();
    const onA = a.mark();
    b.stall();
    t.teardown(() => b.stall(false));
    a.create(svc('stalled', STALLED)); // B's watches say nothing of it
    a.create(slice('stalled'));
    const moved = await c.agent.waitFor((l) => l.msg === MOVED, { from, timeoutMs: HANG_GUARD_MS, what: 'the move back to A' });
    t.match(
      moved,
      { from: b.url, to: a.url, failovers: 2, reason: /^no event for 10s and \/readyz unanswered/ },
      `moved from B to A (${String(moved.reason)})`,
    );
    await synced(from, [WEB, AFTER, STALLED], 'web, after and stalled');
    t.ok(a.lists('Service', onA).length > 0, 'the agent listed again on A');
    t.same(await reached(STALLED), POD_NAMES, 'the Service created while B stalled is served');
    t.same((await reported()).healthz, { apiServer: a.url, apiServerFailovers: 2 }, '/healthz names A, two failovers');
  },
);
