// The agent's metrics and health servers as an operator meets them: the real
// agent in the node's namespace, its servers where the flags (or their
// defaults) put them, scraped over HTTP from the node and from a pod.
// Defaults: /metrics on the node's loopback only, /healthz on every address;
// kube-proxy's series beside svcmap's, every family with HELP text; a
// Service change moves last_queued, last_timestamp follows; a sync that
// really fails (the kernel refuses the write: the services map is full of
// entries the agent did not write) makes /healthz and /livez 503 with
// kube-proxy's JSON once the change has waited --healthz-timeout, and 200
// again once the agent's full resync has repaired the map. Then an IPv6
// bind: metrics on [::1], health on [::] (both families).
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { type Sample, parseSamples, sampleValue } from '../../bench/prom.ts';
import type { LabNs } from '../../lab/index.ts';
import { DatapathMaps } from '../../src/maps/datapath-maps.ts';
import { IPPROTO_TCP, SVC_SCOPE_EXT } from '../../src/maps/constants.ts';
import { type Cluster, NODE_IP, NODE_IP6, echoService, startCluster } from './fixtures/cluster.ts';
import { serviceYaml } from './fixtures/manifests.ts';

const VIP = '10.96.0.70';
const VIP2 = '10.96.0.71';
/** A short health timeout, so that a stuck sync shows within the test. */
const HEALTH_TIMEOUT = '2s';
/** Room for the test's Services only: the test fills the rest. */
const MAX_SERVICES = 64;

/** kube-proxy's series (Kubernetes 1.34) that svcmap exports under the same names. */
const KUBE_PROXY_SERIES = [
  'kubeproxy_sync_proxy_rules_duration_seconds',
  'kubeproxy_sync_full_proxy_rules_duration_seconds',
  'kubeproxy_sync_partial_proxy_rules_duration_seconds',
  'kubeproxy_sync_proxy_rules_last_timestamp_seconds',
  'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds',
  'kubeproxy_network_programming_duration_seconds',
  'kubeproxy_sync_proxy_rules_endpoint_changes_total',
  'kubeproxy_sync_proxy_rules_service_changes_total',
];

let c: Cluster;
t.before(async () => {
  c = await startCluster([echoService('web', VIP)], { ipv6: true });
});
t.teardown(async () => {
  await c?.destroy();
});

interface Reply {
  status?: number;
  body?: string;
  error?: string;
}

/** GET url from inside a namespace (a fresh node process there): the status and body, or the connection error's code. */
async function get(ns: LabNs, url: string): Promise<Reply> {
  const script = `fetch(${JSON.stringify(url)}).then(async (r) => console.log(JSON.stringify({ status: r.status, body: await r.text() })),
    (e) => console.log(JSON.stringify({ error: e.cause?.code ?? String(e) })))`;
  return JSON.parse(await c.lab.exec(ns, process.execPath, ['-e', script])) as Reply;
}

const metricsIn = async (url: string): Promise<{ text: string; samples: Sample[] }> => {
  const r = await get(c.node, url);
  if (r.status !== 200) throw new Error(`${url}: ${JSON.stringify(r)}`);
  return { text: r.body!, samples: parseSamples(r.body!) };
};

/** Polls (each request an event of its own) until the reply satisfies `done`; tap's timeout bounds it. */
async function until(ns: LabNs, url: string, done: (r: Reply) => boolean): Promise<Reply> {
  for (;;) {
    const r = await get(ns, url);
    if (done(r)) return r;
  }
}

/**
 * From the node's namespace: polls urls[0] until it answers 503, then GETs
 * the others at once (one process, milliseconds apart); the replies in order.
 */
async function whenStuck(urls: string[]): Promise<Reply[]> {
  const script = `(async () => { const [first, ...rest] = ${JSON.stringify(urls)};
    const read = async (u) => { const r = await fetch(u); return { status: r.status, body: await r.text() }; };
    for (;;) { const r = await read(first); if (r.status === 503) { console.log(JSON.stringify([r, ...(await Promise.all(rest.map(read)))])); return; } }
  })()`;
  return JSON.parse(await c.lab.exec(c.node, process.execPath, ['-e', script])) as Reply[];
}

const METRICS = 'http://127.0.0.1:10249/metrics';
const podA = () => c.pods[0]!;

t.test("defaults: /metrics on the node's loopback only, /healthz and /livez on every address", async (t) => {
  await c.startAgent(['--max-services', String(MAX_SERVICES), '--healthz-timeout', HEALTH_TIMEOUT], { inNode: true });
  const up = await c.agent.waitFor((l) => l.msg === 'serving metrics and health', { what: 'servers up' });
  t.match(up, { metricsAddress: '127.0.0.1', metricsPort: 10249, healthAddress: '0.0.0.0', healthPort: 10256 }, "kube-proxy's addresses");

  t.equal((await get(c.node, METRICS)).status, 200, '/metrics from the node');
  t.same(await get(podA(), `http://${NODE_IP}:10249/metrics`), { error: 'ECONNREFUSED' }, 'not from a pod: loopback only');
  for (const path of ['/healthz', '/livez', '/readyz']) {
    const r = await get(podA(), `http://${NODE_IP}:10256${path}`);
    t.equal(r.status, 200, `${path} from a pod`);
  }
  const healthz = JSON.parse((await get(podA(), `http://${NODE_IP}:10256/healthz`)).body!) as Record<string, unknown>;
  t.match(
    healthz,
    { healthy: true, nodeEligible: true, status: { IPv4: { healthy: true }, IPv6: { healthy: true } } },
    "kube-proxy's /healthz body",
  );
  t.ok(
    Math.abs(Date.parse(String(healthz.lastUpdated)) - Date.parse(String(healthz.currentTime))) < 1000,
    "lastUpdated is now while healthy (as kube-proxy's)",
  );
  const livez = JSON.parse((await get(podA(), `http://${NODE_IP}:10256/livez`)).body!) as Record<string, unknown>;
  t.notOk('nodeEligible' in livez, '/livez does not speak of the node');
});

t.test("every metric has HELP text; kube-proxy's series, svcmap_build_info and the standard process names are there", async (t) => {
  const { text, samples } = await metricsIn(METRICS);
  const help = new Map<string, string>();
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
    if (m) (m[1] === 'HELP' ? help : types).set(m[2]!, m[3]!);
  }
  t.ok(types.size > 30, `${types.size} metric families`);
  for (const [name] of types) t.ok((help.get(name) ?? '').trim().length > 0, `${name} has HELP text`);
  const family = (sample: string) =>
    [...types.keys()].find((f) => sample === f || (sample.startsWith(`${f}_`) && /_(bucket|sum|count)$/.test(sample)));
  const orphans = [...new Set(samples.map((s) => s.name))].filter((n) => !family(n));
  t.same(orphans, [], 'every sample belongs to a declared family');

  for (const name of KUBE_PROXY_SERIES) t.ok(types.has(name), name);
  t.equal(types.get('kubeproxy_sync_proxy_rules_duration_seconds'), 'histogram');
  t.equal(types.get('kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds'), 'gauge');
  t.equal(types.get('kubeproxy_sync_proxy_rules_service_changes_total'), 'counter');
  const les = samples
    .filter((s) => s.name === 'kubeproxy_sync_proxy_rules_duration_seconds_bucket' && s.labels.ip_family === 'IPv4')
    .map((s) => s.labels.le);
  t.same(
    les,
    [
      '0.001',
      '0.002',
      '0.004',
      '0.008',
      '0.016',
      '0.032',
      '0.064',
      '0.128',
      '0.256',
      '0.512',
      '1.024',
      '2.048',
      '4.096',
      '8.192',
      '16.384',
      '+Inf',
    ],
    "kube-proxy's sync buckets",
  );
  for (const f of ['IPv4', 'IPv6']) {
    t.ok(
      (sampleValue(samples, 'kubeproxy_sync_full_proxy_rules_duration_seconds_count', { ip_family: f }) ?? 0) >= 1,
      `the first full sync, ${f}`,
    );
    t.ok((sampleValue(samples, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', { ip_family: f }) ?? 0) > 0, `last_timestamp ${f}`);
  }
  t.ok((sampleValue(samples, 'kubeproxy_sync_proxy_rules_service_changes_total') ?? 0) >= 1, 'the Service read counted');
  t.ok((sampleValue(samples, 'kubeproxy_sync_proxy_rules_endpoint_changes_total') ?? 0) >= 1, 'its EndpointSlice counted');

  const build = samples.find((s) => s.name === 'svcmap_build_info');
  t.match(
    build,
    { value: 1, labels: { version: /^\d+\.\d+\.\d+/, commit: /^([0-9a-f]{7}(-dirty)?|unknown)$/, node_version: /^v\d+\.\d+\.\d+$/ } },
    'svcmap_build_info',
  );
  t.ok(
    types.has('process_resident_memory_bytes') && types.has('nodejs_heap_size_used_bytes'),
    'process_* and nodejs_* under their standard names',
  );
  t.same(
    [...types.keys()].filter((n) => /^svcmap_(process|nodejs)_/.test(n)),
    [],
    'no prefixed process metrics',
  );
  t.equal(sampleValue(samples, 'svcmap_ready'), 1, 'svcmap_ready after the first full sync');

  // The chart's alerting rules read only what the agent exports (up is Prometheus' own).
  const rules = readFileSync(new URL('../../charts/svcmap/files/prometheus-rules.yaml', import.meta.url), 'utf8');
  const named = new Set([...rules.matchAll(/\b((?:svcmap|kubeproxy)_[a-z0-9_]+)\{/g)].map((m) => m[1]!.replace(/_bucket$/, '')));
  t.ok(named.size >= 8, `the rules name ${named.size} series`);
  for (const n of named) t.ok(types.has(n), `${n}, named by the rules, is exported`);
});

/** The two timestamps of the IPv4 family, in seconds. */
async function timestamps(): Promise<{ queued: number; synced: number; samples: Sample[] }> {
  const { samples } = await metricsIn(METRICS);
  return {
    queued: sampleValue(samples, 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', { ip_family: 'IPv4' })!,
    synced: sampleValue(samples, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', { ip_family: 'IPv4' })!,
    samples,
  };
}

t.test('a Service change moves last_queued; last_timestamp follows once it is in the maps', async (t) => {
  const before = await timestamps();
  t.ok(before.synced >= before.queued, 'idle: nothing waits');
  await c.writeService(echoService('web', VIP, { endpoints: [{ ip: '10.244.0.11' }] }));
  const after = await timestamps();
  t.ok(after.queued > before.synced, 'the change queued a sync after the last one');
  t.ok(after.synced >= after.queued, 'and the sync that took it in followed');
  const delta = (name: string) => sampleValue(after.samples, name)! - sampleValue(before.samples, name)!;
  t.equal(delta('kubeproxy_sync_proxy_rules_endpoint_changes_total'), 1, 'one EndpointSlice event');
  t.equal(delta('kubeproxy_sync_proxy_rules_service_changes_total'), 0, 'no Service event: its document is unchanged');
  t.ok(
    sampleValue(after.samples, 'kubeproxy_sync_partial_proxy_rules_duration_seconds_count', { ip_family: 'IPv4' })! >= 1,
    'a partial sync',
  );
});

t.test('a sync the kernel refuses: /healthz and /livez 503 once the change waited --healthz-timeout, 200 after the repair', async (t) => {
  // Fill the IPv4 services map to its max_entries with frontends the agent never wrote.
  const maps = DatapathMaps.openPinned(c.pinDir);
  let junk = 0;
  let full: unknown;
  try {
    for (; full === undefined; junk++) {
      try {
        maps.v4.services.put(
          { addr: `10.99.0.${junk + 1}`, port: 1, slot: 0, proto: IPPROTO_TCP, scope: SVC_SCOPE_EXT },
          { backend_id: 0, rev_nat_id: 0, count: 0, flags: 0, algorithm: 0, affinity_timeout: 0 },
        );
      } catch (err) {
        full = err;
      }
    }
  } finally {
    maps.close();
  }
  t.match(String(full), /E2BIG|too long/, `the kernel refuses entry ${junk}: the map is full`);
  t.ok(junk > 1 && junk <= MAX_SERVICES, `${junk - 1} foreign entries fill the map`);
  const queuedBefore = (await timestamps()).queued;

  // A new Service: its partial sync cannot write its frontend.
  const from = c.agent.mark();
  const tmp = `${c.manifests}.web2.tmp`;
  writeFileSync(tmp, serviceYaml(echoService('web2', VIP2)));
  renameSync(tmp, join(c.manifests, 'web2.yaml'));
  const failed = await c.agent.waitFor((l) => typeof l.msg === 'string' && l.msg.startsWith('partial sync failed'), {
    from,
    timeoutMs: 30000,
    what: 'the failed sync',
  });
  t.match(failed, { kind: 'partial', failures: 1 });

  // The agent repairs the map by itself (a few seconds later): /healthz, /livez and /metrics are read together, the moment /healthz says 503.
  const [stuck, livez, metrics] = await whenStuck(['http://127.0.0.1:10256/healthz', 'http://127.0.0.1:10256/livez', METRICS]);
  const body = JSON.parse(stuck!.body!) as Record<string, unknown>;
  t.match(
    body,
    { healthy: false, nodeEligible: true, status: { IPv4: { healthy: false } }, consecutiveSyncFailures: Number },
    "kube-proxy's 503 body, and svcmap's failure count",
  );
  t.ok(
    Date.parse(String(body.currentTime)) - Date.parse(String(body.lastUpdated)) >= 2000,
    'lastUpdated: when the maps were last up to date, not now',
  );
  t.equal(livez!.status, 503, '/livez too');
  const samples = parseSamples(metrics!.body!);
  const during = {
    queued: sampleValue(samples, 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', { ip_family: 'IPv4' })!,
    synced: sampleValue(samples, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', { ip_family: 'IPv4' })!,
  };
  t.ok(
    during.queued > queuedBefore && during.queued > during.synced,
    'last_queued moved; last_timestamp stays behind while the sync fails',
  );

  // The retries escalate to a full resync, which re-reads the map and removes what no Service holds.
  await c.agent.waitFor((l) => l.msg === 'sync succeeded after failed attempts', { from, timeoutMs: 60000, what: 'the repairing sync' });
  const healthy = await until(podA(), `http://${NODE_IP}:10256/healthz`, (r) => r.status === 200);
  t.match(JSON.parse(healthy.body!), { healthy: true });
  const after = await timestamps();
  t.ok(after.synced >= during.queued, 'last_timestamp caught up with last_queued');
  t.ok(sampleValue(after.samples, 'svcmap_sync_failures_total', { kind: 'partial' })! >= 1, 'the failures counted');
});

t.test('IPv6 binds: /metrics on [::1], health on [::] answering both families', async (t) => {
  c.agent.kill('SIGTERM');
  await c.agent.exited;
  await c.startAgent(['--metrics-bind-address', '[::1]:10249', '--healthz-bind-address', '[::]:10256'], { inNode: true });
  const up = await c.agent.waitFor((l) => l.msg === 'serving metrics and health', { what: 'servers up' });
  t.match(up, { metricsAddress: '::1', healthAddress: '::' });
  t.equal((await get(c.node, 'http://[::1]:10249/metrics')).status, 200, '/metrics on [::1] from the node');
  t.same(await get(c.node, METRICS), { error: 'ECONNREFUSED' }, 'not on 127.0.0.1');
  t.same(await get(podA(), `http://[${NODE_IP6}]:10249/metrics`), { error: 'ECONNREFUSED' }, 'nor from a pod');
  t.equal((await get(podA(), `http://[${NODE_IP6}]:10256/healthz`)).status, 200, '/healthz over IPv6 from a pod');
  t.equal((await get(podA(), `http://${NODE_IP}:10256/healthz`)).status, 200, 'and over IPv4: [::] is both families');
});
