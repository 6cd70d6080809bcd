// The file source on a directory laid out as the kubelet mounts a ConfigMap
// volume, end to end: web.yaml -> ..data/web.yaml, ..data -> a versioned
// directory, and an update swaps ..data to a new directory in one rename
// (no event names web.yaml itself). The real agent (--manifests on that
// directory), real connections from a client pod in the hooks' cgroup: each
// swap is followed and what a user sees changes with it; a version whose
// file holds an invalid object is served without it, the object reported
// by file and field. Also two files defining one Service: the later file
// (by name) wins.
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { type Cluster, POD_IPS, POD_NAMES, echoService, startCluster } from './fixtures/cluster.ts';
import { invalidSliceYaml, serviceYaml } from './fixtures/manifests.ts';

const VIP = '10.96.0.50';
const OTHER = '10.96.0.51';
/** Generous guards against a hang (an agent that never syncs): each wait ends on the agent's log line, not on time. */
const HANG_GUARD_MS = 120_000;
const web = (pods: readonly string[]) => serviceYaml(echoService('web', VIP, { endpoints: pods.map((ip) => ({ ip })) }));

let c: Cluster;
let version = 0;

/** Writes ConfigMap version n (its files in ..<n>) and points ..data at it with one rename, as the kubelet's atomic writer does. */
function publish(files: Record<string, string>): void {
  const dir = join(c.manifests, `..v${++version}`);
  mkdirSync(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  symlinkSync(`..v${version}`, join(c.manifests, '..data_tmp'));
  renameSync(join(c.manifests, '..data_tmp'), join(c.manifests, '..data'));
  if (version > 1) rmSync(join(c.manifests, `..v${version - 1}`), { recursive: true });
}

/** The agent's next sync after `from` that leaves `pods` pods behind web's two ports (TCP and UDP: a backend each). */
function synced(from: number, pods: number, what: string) {
  return c.agent.waitFor((l) => l.msg === 'sync done' && (l.entries as { backends: number }).backends === 2 * pods, {
    from,
    timeoutMs: HANG_GUARD_MS,
    what,
  });
}

async function reached(ip: string, count = 60): Promise<string[]> {
  const r = await c.client.tcpConnect({ ip, port: 80, count, timeoutMs: 2000, concurrency: 4 });
  if (r.ok !== count) throw new Error(`connections to ${ip}:80 failed: ${JSON.stringify(r)}`);
  return Object.keys(r.byPod).sort();
}

t.before(async () => {
  c = await startCluster([]);
  publish({ 'web.yaml': web(POD_IPS) });
  symlinkSync('..data/web.yaml', join(c.manifests, 'web.yaml'));
  await c.startAgent();
});
t.teardown(async () => {
  await c?.destroy();
});

t.test('a ConfigMap volume: the first version is served, each ..data swap is followed', async (t) => {
  t.same(await reached(VIP), POD_NAMES, 'version 1: the three pods');
  let from = c.agent.mark();
  publish({ 'web.yaml': web([POD_IPS[0]!, POD_IPS[2]!]) });
  await synced(from, 2, 'version 2 synced');
  t.same(await reached(VIP), [POD_NAMES[0], POD_NAMES[2]], 'version 2: pod-b gone');
  from = c.agent.mark();
  publish({ 'web.yaml': web(POD_IPS) });
  await synced(from, 3, 'version 3 synced');
  t.same(await reached(VIP), POD_NAMES, 'version 3: all three again');
});

t.test('a version with an invalid object is reported with the file and field; the rest of the file is served', async (t) => {
  let from = c.agent.mark();
  publish({ 'web.yaml': `${web(POD_IPS)}---\n${invalidSliceYaml('web-broken', 'web')}` });
  const report = await c.agent.waitFor((l) => typeof l.msg === 'string' && l.msg.includes('web-broken'), {
    from,
    timeoutMs: HANG_GUARD_MS,
    what: 'the report of web-broken',
  });
  t.match(report.msg, /web\.yaml/, 'names the file');
  t.match(report.msg, /ports\[0\]\.port|endpoints\[0\]\.addresses\[0\]/, 'names the field');
  t.same(await reached(VIP), POD_NAMES, 'web with its valid slice still reaches the three pods');
  from = c.agent.mark();
  publish({ 'web.yaml': web([POD_IPS[1]!]) });
  await synced(from, 1, 'the good version synced');
  t.same(await reached(VIP), [POD_NAMES[1]], 'the next version: pod-b only');
});

t.test('two files defining one Service: the later file (by name) wins', async (t) => {
  const from = c.agent.mark();
  writeFileSync(join(c.manifests, 'zz-web.yaml'), serviceYaml(echoService('web', OTHER, { endpoints: POD_IPS.map((ip) => ({ ip })) })));
  await synced(from, 3, 'zz-web.yaml synced');
  t.same(await reached(OTHER), POD_NAMES, 'zz-web.yaml (after web.yaml) decides: web at its ClusterIP with all three pods');
  const old = await c.client.tcpConnect({ ip: VIP, port: 80, count: 1, timeoutMs: 500 });
  t.same([old.ok, old.byPod], [0, {}], "the earlier file's ClusterIP is no longer translated");
});
