// The Kubernetes source on the real API server: the real client-node
// informers (src/sources/kubernetes) and the agent's sync loop, down to real
// BPF maps (fixtures.ts startSync, which checks every intermediate map state
// a reader could see), against Kubernetes' own etcd, kube-apiserver and
// kube-controller-manager (lab/cluster, v1.34, no kubelets). The test writes
// Pods and their status as kubelets would (fixtures-cluster.ts); every
// EndpointSlice is written by the real endpointslice controller from them.
//
// Scenarios, one namespace each, on one control plane for the whole file:
//   - create, scale up, a Pod turning unready, scale down, delete
//   - multi-slice: more Pods than the controller puts in one slice (100)
//   - terminating endpoints (graceful Pod deletion, never confirmed by a kubelet)
//   - start against existing objects; kube-apiserver kill -9 + restart
//   - a real 410 Gone: watches cut, changes made, etcd compacted, watches resumed
//   - network programming latency from the controller's trigger-time annotation
//   - kube-proxy's two labels put on a served Service and taken off again
// The faults a real server cannot make (objects it would refuse, a stream cut
// mid-event, a stall, 503 answers) stay on lab/apiserver: sync.test.ts.
import t, { type Test } from 'tap';
import { HEADLESS_LABEL, SERVICE_PROXY_NAME_LABEL } from '../../src/model/proxied.ts';
import { type SyncHarness, eventually, startSync } from './fixtures.ts';
import { NODE, type RealApiServer, Workload, recordRequests, recordWatchErrors, startRealApiServer } from './fixtures-cluster.ts';

let api: RealApiServer;
t.before(async () => {
  const t0 = Date.now();
  api = await startRealApiServer();
  t.comment(`control plane up in ${((Date.now() - t0) / 1000).toFixed(1)} s:\n${api.log.join('\n')}`);
});
t.teardown(async () => {
  await api?.down();
});

const ips = (n: number, from = 1, subnet = 1) => Array.from({ length: n }, (_, i) => `10.244.${subnet}.${from + i}`);
const backends = (addrs: readonly string[], state = 'active') => addrs.map((a) => `${a}:8080 ${state}`).sort();
const ready = (addrs: readonly string[]) => addrs.map((a) => `${a} RS-`);

/** Starts the harness on the forwarded API server; stopped in teardown. */
function harness(t: Test): SyncHarness {
  const h = startSync(api.kubeConfig(), NODE);
  t.teardown(() => h.stop());
  return h;
}

/** Waits until the frontend VIP:80/TCP has exactly these backends (undefined: no such frontend). */
async function reach(t: Test, h: SyncHarness, vip: string, want: string[] | undefined, what: string, limitMs = 20_000): Promise<void> {
  const t0 = Date.now();
  await eventually(() => {
    const got = h.frontends().get(`${vip}:80/TCP`);
    return JSON.stringify(got) === JSON.stringify(want) ? undefined : `${what}: ${JSON.stringify(got)}`;
  }, limitMs);
  t.pass(`${what} (${Date.now() - t0} ms)`);
}

async function until(check: () => Promise<boolean>, what: string, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${limitMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test("create, scale up, unready, scale down, delete: the controller's slices reach the maps", async (t) => {
  const ns = await api.namespace('lifecycle');
  const web = new Workload(api, ns, 'web', '10.96.100.1');
  const h = harness(t);
  t.equal(h.status.health.ready, false, 'not ready before the informers listed');
  await h.source.synced;
  await eventually(() => (h.status.health.ready ? undefined : 'no full sync yet'));
  t.ok(h.status.health.lastSyncAt > 0, 'ready after the first full sync');
  t.same(h.frontends().get('10.96.0.1:443/TCP')?.length, 1, "the cluster's own `kubernetes` Service is in the maps");

  await web.createService();
  await reach(t, h, web.clusterIP, [], 'a Service without Pods: a frontend with no backends');

  await web.addPods(ips(3));
  await reach(t, h, web.clusterIP, backends(ips(3)), 'create: 3 ready Pods, 3 backends');

  await web.addPods(ips(2, 4));
  await reach(t, h, web.clusterIP, backends(ips(5)), 'scale up to 5');

  await web.setStatus(['10.244.1.2'], { ready: false });
  await web.waitEndpoints([...ready(ips(5)).filter((e) => !e.startsWith('10.244.1.2 ')), '10.244.1.2 ---']);
  await reach(
    t,
    h,
    web.clusterIP,
    backends(ips(5).filter((a) => a !== '10.244.1.2')),
    'a Pod turning unready (ready=false, serving=false) is dropped',
  );

  await web.setStatus(['10.244.1.2']);
  await reach(t, h, web.clusterIP, backends(ips(5)), 'and taken back when it is ready again');

  await web.deletePods(ips(3, 3));
  await reach(t, h, web.clusterIP, backends(ips(2)), 'scale down to 2');

  await web.deleteService();
  await reach(t, h, web.clusterIP, undefined, 'deleting the Service removes its frontend');
  t.same(h.syncer.violations, [], 'no reader ever saw fewer backends than before and after a sync');
  t.ok(h.syncer.syncs >= 7, `${h.syncer.syncs} syncs checked`);
});

t.test("multi-slice: a Service over the controller's 100 endpoints per slice", async (t) => {
  const ns = await api.namespace('multi');
  const big = new Workload(api, ns, 'big', '10.96.100.2');
  const h = harness(t);
  await h.source.synced;
  await big.createService();
  const all = ips(130, 1, 2);
  await big.addPods(all);
  await big.waitEndpoints(ready(all));
  const slices = await big.slices();
  t.ok(
    slices.length >= 2,
    `the controller split 130 endpoints over ${slices.length} slices (${slices.map((s) => s.endpoints?.length ?? 0).join(' + ')})`,
  );
  await reach(t, h, big.clusterIP, backends(all), 'every endpoint of every slice is a backend');

  // Scale down across both slices: the controller rewrites them (and may move
  // endpoints between them); the union is what counts.
  const gone = all.filter((_, i) => i % 3 !== 0);
  const kept = all.filter((_, i) => i % 3 === 0);
  await big.deletePods(gone);
  await reach(t, h, big.clusterIP, backends(kept), `scaled down to ${kept.length} across the slices`);

  // Back over 100: a second slice again.
  const more = ips(70, 1, 3);
  await big.addPods(more);
  await big.waitEndpoints(ready([...kept, ...more]));
  t.ok((await big.slices()).length >= 2, 'two slices again');
  await reach(t, h, big.clusterIP, backends([...kept, ...more]), `scaled up to ${kept.length + more.length}`);
  t.same(h.syncer.violations, [], 'no reader ever saw fewer backends than before and after a sync');
});

t.test('terminating endpoints, from graceful Pod deletion', async (t) => {
  const ns = await api.namespace('terminating');
  const web = new Workload(api, ns, 'web', '10.96.100.3');
  const h = harness(t);
  await h.source.synced;
  await web.createService();
  await web.addPods(ips(3));
  await reach(t, h, web.clusterIP, backends(ips(3)), '3 ready');

  // Deleted with a grace period: the Pod stays, with a deletionTimestamp, until
  // its kubelet confirms (never, here); the controller marks it terminating.
  await web.deletePods(['10.244.1.1'], { graceful: true });
  await web.waitEndpoints(['10.244.1.1 -ST', '10.244.1.2 RS-', '10.244.1.3 RS-']);
  t.pass('the controller wrote 10.244.1.1 ready=false serving=true terminating=true');
  await reach(t, h, web.clusterIP, backends(['10.244.1.2', '10.244.1.3']), 'a terminating endpoint is not used while others are ready');

  await web.deletePods(['10.244.1.2', '10.244.1.3'], { graceful: true });
  await web.waitEndpoints(['10.244.1.1 -ST', '10.244.1.2 -ST', '10.244.1.3 -ST']);
  await reach(t, h, web.clusterIP, backends(ips(3), 'terminating'), 'all terminating: the serving ones are used, marked terminating');

  await web.setStatus(['10.244.1.3'], { ready: false });
  await web.waitEndpoints(['10.244.1.1 -ST', '10.244.1.2 -ST', '10.244.1.3 --T']);
  await reach(
    t,
    h,
    web.clusterIP,
    backends(['10.244.1.1', '10.244.1.2'], 'terminating'),
    'a terminating Pod that stops serving is dropped',
  );

  await web.addPods(['10.244.1.4']);
  await reach(t, h, web.clusterIP, backends(['10.244.1.4']), 'a new ready Pod: only it is used');

  await web.deletePods([...ips(4)]);
  await reach(t, h, web.clusterIP, [], 'every Pod gone: the frontend stays, with no backends');
  t.same(h.syncer.violations, [], 'no reader ever saw fewer backends than before and after a sync');
});

t.test('an agent started on existing objects; kube-apiserver killed (-9) and restarted', async (t) => {
  const ns = await api.namespace('restart');
  const web = new Workload(api, ns, 'web', '10.96.100.4');
  await web.createService();
  await web.addPods(ips(4));
  await web.waitEndpoints(ready(ips(4)));

  // Everything exists before the agent starts: nothing is pruned or synced
  // before every informer has listed, so the first sync already has all 4.
  const h = harness(t);
  await h.source.synced;
  await reach(t, h, web.clusterIP, backends(ips(4)), 'the first sync has the existing state');
  t.same(h.syncer.violations, [], 'no reader ever saw fewer backends');
  const errorsBefore = h.informerErrors.length;

  // While the API server is down and coming back, the maps keep their content.
  const samples: string[] = [];
  const sampler = setInterval(() => samples.push(JSON.stringify(h.frontends().get(`${web.clusterIP}:80/TCP`))), 20);
  const t0 = Date.now();
  try {
    await api.cluster.controlPlane.restartApiserver();
  } finally {
    clearInterval(sampler);
  }
  t.comment(`kube-apiserver killed and ready again in ${Date.now() - t0} ms`);
  t.ok(samples.length > 10, `${samples.length} samples of the maps while it was down`);
  t.same([...new Set(samples)], [JSON.stringify(backends(ips(4)))], 'every sample: the 4 backends');
  await eventually(() => (h.informerErrors.length > errorsBefore ? undefined : 'no informer error'), 10_000);
  t.pass(`the informers noticed (${h.informerErrors.length - errorsBefore} errors, e.g. ${h.informerErrors.at(-1)})`);

  // Changes made after the restart arrive.
  const api2 = new Workload(api, ns, 'api', '10.96.100.5');
  await web.addPods(ips(2, 5));
  await web.deletePods(['10.244.1.1']);
  await api2.createService();
  await api2.addPods(ips(1, 1, 4));
  await reach(t, h, web.clusterIP, backends(ips(5, 2)), 'after the restart: web scaled to 5', 30_000);
  await reach(t, h, api2.clusterIP, backends(['10.244.4.1']), 'after the restart: a new Service', 30_000);
  t.same(h.syncer.violations, [], 'no reader ever saw fewer backends than before and after a sync');
});

t.test('a real 410 Gone: watches cut, changes made, etcd compacted, watches resumed', async (t) => {
  const ns = await api.namespace('gone');
  const web = new Workload(api, ns, 'web', '10.96.100.6');
  const old = new Workload(api, ns, 'old', '10.96.100.7');
  const fresh = new Workload(api, ns, 'fresh', '10.96.100.8');
  await web.createService();
  await web.addPods(ips(3));
  await old.createService();
  await old.addPods(ips(2, 1, 5));
  const watchErrors = recordWatchErrors();
  t.teardown(() => watchErrors.restore());
  const kc = api.kubeConfig();
  const requests = recordRequests(kc);
  const h = startSync(kc, NODE);
  t.teardown(() => h.stop());
  await h.source.synced;
  await reach(t, h, web.clusterIP, backends(ips(3)), 'web: 3');
  await reach(t, h, old.clusterIP, backends(ips(2, 1, 5)), 'old: 2');
  const before = new Map(h.frontends());
  t.same(watchErrors.events, [], 'no watch error so far');

  // The watches are cut and no new connection gets through (the port stays).
  api.forward.pause();
  const paused = Date.now();
  try {
    await web.addPods(['10.244.1.4']);
    await web.deletePods(['10.244.1.1']);
    await old.deleteService();
    await fresh.createService();
    await fresh.addPods(ips(2, 1, 6));
    await web.waitEndpoints(ready(ips(3, 2)));
    await fresh.waitEndpoints(ready(ips(2, 1, 6)));
    await api.kubectl.run(['label', 'node', NODE, `svcmap-test/changed=${Date.now()}`]);
    // Every resourceVersion the informers hold is now history etcd has dropped.
    const rev = await api.cluster.controlPlane.compactEtcd();
    t.comment(`etcd compacted at revision ${rev}`);
    t.same(new Map(h.frontends()), before, 'while cut off, the maps keep their state');
    t.ok(h.informerErrors.length > 0, `the cut was noticed (${h.informerErrors.length} informer errors)`);
  } finally {
    api.forward.resume();
  }
  const resumed = Date.now();
  t.comment(`forward paused for ${resumed - paused} ms`);

  await reach(t, h, web.clusterIP, backends(ips(3, 2)), 'after the relist: web changed', 30_000);
  await reach(t, h, old.clusterIP, undefined, 'after the relist: the Service deleted meanwhile is gone', 30_000);
  await reach(t, h, fresh.clusterIP, backends(ips(2, 1, 6)), 'after the relist: the Service created meanwhile is in', 30_000);
  t.ok(h.frontends().has('10.96.0.1:443/TCP'), 'the rest is kept');

  // What happened on the wire: each informer's watch resumed from its old
  // resourceVersion, got ERROR 410 Expired from the real server, and relisted.
  // The maps above prove the Service and EndpointSlice relists happened; no
  // map shows the Node informer's, so its 410 and relist are waited for here.
  const kinds = ['/api/v1/services', '/apis/discovery.k8s.io/v1/endpointslices', '/api/v1/nodes'];
  const goneFor = (path: string) => watchErrors.events.find((x) => x.code === 410 && x.path.startsWith(path));
  const relistAfter = (path: string) => {
    const e = goneFor(path);
    return e && requests.find((r) => !r.watch && r.path === path && r.at >= e.at);
  };
  for (const path of kinds) {
    await eventually(
      () => (relistAfter(path) ? undefined : `${path}: ${goneFor(path) ? 'no list after the 410' : 'no 410 yet'}`),
      30_000,
    ).catch(() => undefined);
    const e = goneFor(path);
    t.match(
      e,
      { type: 'ERROR', code: 410, reason: 'Expired' },
      `${path}: the resumed watch got 410 Expired (from resourceVersion ${e?.resourceVersion})`,
    );
    t.ok(relistAfter(path), `${path}: relisted after the 410`);
  }
  t.same(h.syncer.violations, [], 'no reader ever saw fewer backends than before and after a sync, through the relist');
});

t.test(
  "kube-proxy's labels: a served Service that gains one leaves the maps (the watch's DELETED), and comes back when it loses it",
  async (t) => {
    const ns = await api.namespace('labels');
    const web = new Workload(api, ns, 'web', '10.96.100.10');
    const h = harness(t);
    await h.source.synced;
    await web.createService();
    await web.addPods(ips(2));
    await reach(t, h, web.clusterIP, backends(ips(2)), '2 ready');
    for (const [label, value] of [
      [HEADLESS_LABEL, ''],
      [SERVICE_PROXY_NAME_LABEL, 'foo-bar'],
    ] as const) {
      await web.kubectl.run(['label', 'service', web.app, '-n', ns, `${label}=${value}`]);
      await reach(t, h, web.clusterIP, undefined, `labelled ${label}: not programmed`);
      await web.kubectl.run(['label', 'service', web.app, '-n', ns, `${label}-`]);
      await reach(t, h, web.clusterIP, backends(ips(2)), `${label} removed: programmed again, both Pods`);
    }
    t.same(h.syncer.violations, [], 'no reader ever saw fewer backends than before and after a sync');
  },
);

t.test("network programming latency, from the controller's last-change-trigger-time", async (t) => {
  const ns = await api.namespace('latency');
  const web = new Workload(api, ns, 'web', '10.96.100.9');
  await web.createService();
  await until(async () => (await web.slices()).length > 0, "the controller's first (empty) slice");
  // Started after every slice so far exists: their trigger times are older than
  // the agent, so they are not observed (kube-proxy's rule).
  const h = harness(t);
  const startedAt = Date.now(); // just after the agent's loop started
  await h.source.synced;
  await eventually(() => (h.status.health.ready ? undefined : 'no full sync yet'));
  await reach(t, h, web.clusterIP, [], 'the Service, no Pods yet');
  const metric = () => h.metrics.registry.getSingleMetricAsString('svcmap_network_programming_duration_seconds');
  const bucket = (text: string, le: string) => Number(new RegExp(`_bucket\\{le="${le}"\\} (\\d+)`).exec(text)?.[1]);
  const count = (text: string) => Number(/_count (\d+)/.exec(text)?.[1]);
  const m0 = await metric();
  t.equal(count(m0), 0, 'the slices that existed before the start: not observed');

  // The controller takes the trigger time from the Pod's Ready transition: 10 s
  // ago, which has to be after the agent's start to count.
  await new Promise((r) => setTimeout(r, Math.max(0, startedAt + 11_000 - Date.now())));
  const since = new Date(Math.floor(Date.now() / 1000) * 1000 - 10_000);
  t.ok(since.getTime() > startedAt, "the Ready transition comes after the agent's start");
  await web.addPods(['10.244.1.1'], { readySince: since });
  await reach(t, h, web.clusterIP, backends(['10.244.1.1']), 'the Pod is in');
  const slice = (await web.slices()).find((s) => s.endpoints?.length);
  t.equal(
    slice?.metadata.annotations?.['endpoints.kubernetes.io/last-change-trigger-time'],
    since.toISOString().replace('.000Z', 'Z'),
    "the controller annotated the slice with the Pod's Ready transition",
  );
  const m1 = await metric();
  t.equal(count(m1) - count(m0), 1, 'one latency observed');
  t.equal(bucket(m1, '9') - bucket(m0, '9'), 0, 'not under 9 s: measured from the trigger time, not from arrival');
  t.equal(bucket(m1, '30') - bucket(m0, '30'), 1, 'under 30 s');
});
