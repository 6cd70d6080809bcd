// API-server failover on a real cluster (make e2e): a highly available
// control plane of two kube-apiservers on one etcd (lab/cluster
// secondApiserver: the second on another port of the same address; the
// controllers, kubelets and kubectl use it), svcmap installed by its chart
// with k8sServiceHost = the first and k8sServiceHostFallbacks = the second.
// While a client pod loops through a ClusterIP and the echo Deployment is
// scaled, the first API server (the one the agents use) is killed -9: the
// loop's failures are counted and printed, every agent moves to the second
// (svcmap status and the metric say so), and a Service created after the kill
// reaches both nodes' maps and answers; the time from the kill to that
// Service in each node's maps is printed (no bound is asserted: timings are
// for bench/). On failure: the agents' logs and svcmap status of each node.
import { join } from 'node:path';
import t from 'tap';
import { Cluster } from '../../lab/cluster/cluster.ts';
import { EVENT_TIMEOUT_MS, waitUntil } from '../../lab/cluster/component.ts';
import { API_PORT, SECOND_API_PORT } from '../../lab/cluster/control-plane.ts';
import { buildImages } from '../../lab/cluster/images/index.ts';
import { REPO_ROOT } from '../../lab/cluster/paths.ts';
import { installSvcmap, PIN_DIR, splitRef, svcmapDiagnostics } from '../../lab/cluster/svcmap.ts';
import { clientPod, NS, PORTS, workloads } from './fixtures/workloads.ts';

const log = (l: string) => t.comment(l);
const images = await buildImages({ only: ['pause', 'labtool', 'svcmap'], log });
const ref = (name: 'pause' | 'labtool' | 'svcmap') => images.get(name)!.ref;
const cluster = await Cluster.up({ images: [...images.values()].map((i) => i.archive), secondApiserver: true, log });
t.teardown(async () => {
  if (!t.passing()) t.comment(await svcmapDiagnostics(cluster));
  await cluster.down();
});
const k = cluster.kubectl;
const ip = cluster.net.nodes[0]!.ip;
const FIRST = `https://${ip}:${API_PORT}`;
const SECOND = `https://${ip}:${SECOND_API_PORT}`;
/** The chart's default healthPort and metricsPort, on each node (the agents run with hostNetwork). */
const HEALTH = '127.0.0.1:10256';
const METRICS = 'http://127.0.0.1:10249/metrics';
const AFTER = 'after-kill';
const lines = (s: string) =>
  s
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
const svcmap = (node: (typeof cluster.nodes)[0], args: readonly string[]) =>
  node.exec(join(REPO_ROOT, 'bin', 'svcmap'), [...args, '--pin-dir', PIN_DIR], { timeoutMs: 30_000 });
/** `svcmap status`'s agent line on a node. */
const agentLine = async (node: (typeof cluster.nodes)[0]) =>
  lines(await svcmap(node, ['status', '--healthz-address', HEALTH])).find((l) => l.startsWith('agent:')) ?? '(no agent line)';
/** The frontend addresses in a node's maps. */
const frontends = async (node: (typeof cluster.nodes)[0]) =>
  (JSON.parse(await svcmap(node, ['dump', '-o', 'json'])) as { frontends: Array<{ address: string }> }).frontends.map((f) => f.address);
const vip = async (svc: string) => (await k.run(['-n', NS, 'get', 'service', svc, '-o', 'jsonpath={.spec.clusterIP}'])).trim();

await installSvcmap(cluster, splitRef(ref('svcmap')));

t.test('both agents watch through the first API server', async (t) => {
  for (const n of cluster.nodes) t.equal(await agentLine(n), `agent: healthy, ready; API server ${FIRST} (failovers: 0)`, n.name);
});

t.test(
  'the first API server killed -9 while a client loops and echo scales down and up: the agents move to the second; a Service created after the kill reaches the maps',
  async (t) => {
    await k.apply(workloads(ref('labtool')));
    await k.run(['-n', NS, 'rollout', 'status', 'deployment/echo', '--timeout=120s'], { timeoutMs: 130_000 });
    const echo = await vip('echo');
    await k.apply(
      JSON.stringify(
        clientPod(
          'looper',
          ref('labtool'),
          ['/labtool', 'loop', echo, String(PORTS.tcp.port), '--until-file', '/tmp/stop', '--interval', '5ms'],
          'Never',
        ),
      ),
    );
    await k.run(['-n', NS, 'wait', '--for=condition=Ready', 'pod/looper', '--timeout=60s'], { timeoutMs: 70_000 });
    // Pods churn: echo (one pod per node: anti-affinity) shrinks to 1 through the second API server while the first is killed.
    await k.run(['-n', NS, 'scale', 'deployment/echo', '--replicas=1']);
    const killedAt = Date.now();
    await cluster.controlPlane.apiserver.kill();
    await k.apply(
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: AFTER, namespace: NS },
        spec: { selector: { app: 'echo' }, ports: [{ name: 'tcp', port: PORTS.tcp.port, targetPort: PORTS.tcp.target }] },
      }),
    );
    const after = await vip(AFTER);
    for (const n of cluster.nodes) {
      await waitUntil(`${AFTER} (${after}) in ${n.name}'s maps`, async () => (await frontends(n)).includes(after), {
        timeoutMs: 120_000,
        intervalMs: 100,
      });
      t.comment(`${n.name}: from the kill to ${AFTER} in the maps: ${Date.now() - killedAt} ms`);
      t.pass(`${n.name}: the Service created after the kill is in the maps`);
    }
    const answered = lines(await k.run(['-n', NS, 'exec', 'client', '--', '/labtool', 'tcp', after, String(PORTS.tcp.port), '20']));
    t.equal(answered.length, 20, `20 connections to ${AFTER} answered (${[...new Set(answered)].join(', ')})`);
    await k.run(['-n', NS, 'rollout', 'status', 'deployment/echo', '--timeout=300s'], { timeoutMs: 310_000 });
    await k.run(['-n', NS, 'scale', 'deployment/echo', '--replicas=2']); // and grows back
    await k.run(['-n', NS, 'rollout', 'status', 'deployment/echo', '--timeout=300s'], { timeoutMs: 310_000 });
    await k.run(['-n', NS, 'exec', 'looper', '--', 'touch', '/tmp/stop']);
    await waitUntil(
      'the looping client to finish',
      async () => (await k.run(['-n', NS, 'get', 'pod', 'looper', '-o', 'jsonpath={.status.phase}'])).trim() === 'Succeeded',
      { timeoutMs: EVENT_TIMEOUT_MS },
    );
    const summary = JSON.parse(lines(await k.run(['-n', NS, 'logs', 'looper'])).at(-1)!) as { ok: number; failed: number };
    t.comment(`looper through the kill and the scaling: ${JSON.stringify(summary)}`);
    t.ok(summary.ok > 100, `${summary.ok} connections`);
    t.equal(summary.failed, 0, '0 failed connections');
    for (const n of cluster.nodes) {
      t.equal(
        await agentLine(n),
        `agent: healthy, ready; API server ${SECOND} (failovers: 1)`,
        `${n.name}: svcmap status names the second`,
      );
      const metrics = await n.exec('curl', ['-s', '--max-time', '5', METRICS], { timeoutMs: 10_000 });
      t.match(metrics, new RegExp(`^svcmap_k8s_api_server_info\\{url="${SECOND}"\\} 1$`, 'm'), `${n.name}: svcmap_k8s_api_server_info`);
      t.match(metrics, /^svcmap_k8s_api_failovers_total 1$/m, `${n.name}: svcmap_k8s_api_failovers_total`);
    }
  },
);
