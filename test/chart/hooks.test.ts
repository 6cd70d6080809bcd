// The chart's moving parts beyond the agent DaemonSet: the pre-delete
// cleanup hook (DaemonSet + waiting Job), the helm test Pod, NOTES.txt, and
// the node scripts they run, executed here with a stand-in API server; the
// readiness probe of the cleanup DaemonSet run as the kubelet would. What
// the svcmap subcommands they run do is tested in test/cli (cleanup,
// mount-host-fs).
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allFlags } from '../../src/cli/args.ts';
import { cleanupCommand } from '../../src/cli/cleanup.ts';
import {
  CHART,
  type Manifest,
  type PodSpec,
  container,
  envValue,
  helm,
  helmMissingMessage,
  isHook,
  one,
  parseManifests,
  podSpec,
  render,
  sorted,
  templateArgs,
} from './helm.ts';

const HOST = '192.0.2.10';
const FILES = join(CHART, 'files');

function tempDir(t: { teardown: (fn: () => void) => void }, prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), `svcmap-chart-${prefix}-`));
  t.teardown(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

function annotations(m: Manifest): Record<string, string> {
  return m.metadata.annotations ?? {};
}

t.test('helm is installed (make chart-deps)', async (t) => {
  t.equal(helmMissingMessage(), undefined);
});

t.test('pre-delete cleanup hook', async (t) => {
  const ms = render({ set: [`k8sServiceHost=${HOST}`] });
  const agent = podSpec(one(ms, 'DaemonSet', 'svcmap')) as PodSpec;
  const cds = one(ms, 'DaemonSet', 'svcmap-cleanup');
  const job = one(ms, 'Job', 'svcmap-cleanup-wait');

  t.test('ordering: RBAC, then the DaemonSet, then the Job helm waits for', async (t) => {
    const weight = (m: Manifest) => Number(annotations(m)['helm.sh/hook-weight']);
    for (const m of [cds, job, one(ms, 'Role', 'svcmap-cleanup'), one(ms, 'ServiceAccount', 'svcmap-cleanup')]) {
      t.ok(isHook(m, 'pre-delete'), `${m.kind} is a pre-delete hook`);
      t.equal(annotations(m)['helm.sh/hook-delete-policy'], 'before-hook-creation,hook-succeeded');
    }
    t.ok(weight(one(ms, 'Role', 'svcmap-cleanup')) < weight(cds), 'RBAC before the DaemonSet');
    t.ok(weight(cds) < weight(job), 'DaemonSet before the Job');
  });

  t.test("cleanup DaemonSet runs `svcmap cleanup` where the agent runs, with the agent's privileges", async (t) => {
    const spec = podSpec(cds) as PodSpec;
    const c = container(spec, 'cleanup');
    const a = container(agent, 'agent');
    t.same(c.command, ['svcmap']);
    const args = c.args ?? [];
    t.same(
      args.slice(0, 4),
      ['cleanup', '--force', '--pin-dir', '/sys/fs/bpf/svcmap'],
      '--force: a pre-delete hook runs while the agents still do',
    );
    for (const flag of args.filter((a) => a.startsWith('--')))
      t.ok(flag.slice(2) in allFlags(cleanupCommand), `svcmap cleanup takes ${flag}`);
    const done = args[args.indexOf('--done-file') + 1]!;
    t.match(done, /^\/tmp\//, '--done-file');
    t.ok(
      c.volumeMounts?.some((m) => m.mountPath === '/tmp' && spec.volumes?.find((v) => v.name === m.name)?.emptyDir),
      'on an emptyDir, writable whatever the root file system is',
    );
    // The agent's, without SYS_PTRACE: only stale-socket termination needs it.
    t.same(sorted(c.securityContext?.capabilities?.add), sorted(a.securityContext?.capabilities?.add?.filter((x) => x !== 'SYS_PTRACE')));
    t.ok(a.securityContext?.capabilities?.add?.includes('SYS_PTRACE'), 'which the agent has by default');
    t.not(c.securityContext?.privileged, true);
    // The probe, run as the kubelet runs it (the image's node is this Node 24): ready = done file written.
    const probe = c.readinessProbe?.exec?.command ?? [];
    t.equal(probe[0], 'node', 'the image has no shell and no test(1): node checks');
    t.ok(probe.includes(done), 'checks the done file');
    const dir = tempDir(t, 'probe');
    const at = probe.map((a) => (a === done ? join(dir, 'done') : a));
    const probeExit = () => spawnSync(process.execPath, at.slice(1), { encoding: 'utf8', cwd: dir }).status;
    t.equal(probeExit(), 1, 'not ready before');
    writeFileSync(join(dir, 'done'), '');
    t.equal(probeExit(), 0, 'ready after');
    for (const path of ['/sys/fs/bpf', '/run/svcmap/cgroupv2']) {
      const cm = c.volumeMounts?.find((v) => v.mountPath === path);
      const am = a.volumeMounts?.find((v) => v.mountPath === path);
      t.same(cm, am, `${path} mounted as in the agent`);
      t.same(
        spec.volumes?.find((v) => v.name === cm?.name),
        agent.volumes?.find((v) => v.name === am?.name),
        `${path} from the same host path`,
      );
    }
    t.equal(spec.hostNetwork, true, "tc detach happens in the host's network namespace");
    t.same(spec.tolerations, agent.tolerations);
    t.same(spec.nodeSelector, agent.nodeSelector);
    t.equal(spec.automountServiceAccountToken, false, 'no API access');
    const sel = (cds.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
    t.equal(sel['app.kubernetes.io/component'], 'cleanup', 'selector apart from the agent');
  });

  t.test('the Job talks to the real API server and runs unprivileged', async (t) => {
    const spec = podSpec(job) as PodSpec;
    const w = container(spec, 'wait');
    t.same(w.command, ['node', '/svcmap-scripts/cleanup-wait.mjs']);
    t.equal(envValue(w, 'API_SERVER'), `https://${HOST}:6443`);
    t.equal(envValue(w, 'DAEMONSET'), 'svcmap-cleanup');
    t.equal(envValue(w, 'NAMESPACE'), 'kube-system');
    t.equal(spec.dnsPolicy, 'Default');
    t.match(spec.securityContext, { runAsNonRoot: true });
    t.equal(w.securityContext?.allowPrivilegeEscalation, false);
    t.same(w.securityContext?.capabilities, { drop: ['ALL'] });
    t.match(job.spec, { backoffLimit: 0, activeDeadlineSeconds: 360 });
  });

  t.test('the cleanup DaemonSet follows securityContext.capabilities', async (t) => {
    const caps = ['BPF', 'NET_ADMIN', 'PERFMON', 'SYS_ADMIN', 'SYS_RESOURCE'];
    const over = render({ set: [`k8sServiceHost=${HOST}`, `securityContext.capabilities={${caps.join(',')}}`] });
    const c = container(podSpec(one(over, 'DaemonSet', 'svcmap-cleanup')) as PodSpec, 'cleanup');
    const a = container(podSpec(one(over, 'DaemonSet', 'svcmap')) as PodSpec, 'agent');
    t.same(c.securityContext?.capabilities, { add: caps, drop: ['ALL'] });
    t.same(
      c.securityContext?.capabilities,
      { ...a.securityContext?.capabilities, add: a.securityContext?.capabilities?.add?.filter((x) => x !== 'SYS_PTRACE') },
      "the agent's, but SYS_PTRACE",
    );
    const dflt = container(podSpec(cds) as PodSpec, 'cleanup');
    t.notOk(dflt.securityContext?.capabilities?.add?.includes('SYS_RESOURCE'), 'no SYS_RESOURCE by default');
  });

  t.test('cleanup.enabled=false drops every hook resource', async (t) => {
    const off = render({ set: [`k8sServiceHost=${HOST}`, 'cleanup.enabled=false'] });
    t.same(
      off.filter((m) => isHook(m, 'pre-delete')).map((m) => m.kind),
      [],
    );
  });
});

t.test('helm test Pod', async (t) => {
  const ms = render({ set: [`k8sServiceHost=${HOST}`] });
  const pod = one(ms, 'Pod', 'svcmap-test-service');
  t.ok(isHook(pod, 'test'));
  const spec = podSpec(pod) as PodSpec;
  t.notOk(spec.hostNetwork, 'an ordinary pod: its sockets go through the cgroup hooks');
  t.notOk(spec.dnsPolicy, 'cluster DNS (ClusterFirst), i.e. through the kube-dns Service');
  const c = container(spec, 'test');
  t.same(c.command, ['node', '/svcmap-scripts/helm-test.mjs']);
  t.not(c.securityContext?.privileged, true);
  t.same(c.securityContext?.capabilities, { drop: ['ALL'] });
  t.match(spec.securityContext, { runAsNonRoot: true });
  t.equal(spec.restartPolicy, 'Never');
});

t.test('NOTES.txt says how to check the install', async (t) => {
  // helm renders NOTES.txt only on install/upgrade, which need a cluster.
  // Render a copy of the chart in which the same text goes through `tpl`
  // into a ConfigMap (helm template output must be YAML).
  const dir = tempDir(t, 'notes');
  const chart = join(dir, 'svcmap');
  cpSync(CHART, chart, { recursive: true });
  renameSync(join(chart, 'templates', 'NOTES.txt'), join(chart, 'files', 'notes.txt'));
  writeFileSync(
    join(chart, 'templates', 'notes-render.yaml'),
    [
      'apiVersion: v1',
      'kind: ConfigMap',
      'metadata:',
      '  name: notes',
      'data:',
      '  notes: {{ tpl (.Files.Get "files/notes.txt") . | quote }}',
      '',
    ].join('\n'),
  );
  const r = helm(
    templateArgs({
      chart,
      release: 'proxy',
      namespace: 'net-system',
      set: [`k8sServiceHost=${HOST}`],
      extra: ['--show-only', 'templates/notes-render.yaml'],
    }),
  );
  t.equal(r.status, 0, r.stderr);
  const notes = String((parseManifests(r.stdout)[0]?.data as { notes?: string } | undefined)?.notes);
  t.match(notes, 'kubectl -n net-system rollout status daemonset/proxy-svcmap');
  t.match(notes, /kubectl -n net-system exec \S+ -c agent -- svcmap status --pin-dir \/sys\/fs\/bpf\/svcmap/);
  t.match(notes, /kubectl -n net-system exec \S+ -c agent -- svcmap dump -o yaml/);
  t.match(notes, 'helm test proxy -n net-system');
  t.match(notes, `https://${HOST}:6443`);
  t.match(notes, 'Migration', 'points at the kube-proxy removal notes');
  t.match(
    notes,
    /stuck in Init .*\n[\s\S]*kubectl -n net-system logs "\$POD" -c preflight/,
    'says where a node that cannot run svcmap says why',
  );
});

t.test('no shell anywhere: every command, argument list and exec probe of every container', async (t) => {
  const shells = /^(\/(usr\/)?bin\/)?(sh|bash|ash|dash|test|\[)$/;
  for (const values of [[`k8sServiceHost=${HOST}`], [`k8sServiceHost=${HOST}`, 'bpf.autoMount=false', 'cgroup.autoMount=false']]) {
    for (const m of render({ set: values })) {
      const spec = podSpec(m) as PodSpec | undefined;
      for (const c of [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])]) {
        const argv = [...(c.command ?? []), ...[c.readinessProbe, c.livenessProbe, c.startupProbe].flatMap((p) => p?.exec?.command ?? [])];
        t.notOk(
          argv.some((a) => shells.test(a)),
          `${m.kind}/${m.metadata.name} ${c.name}: ${argv.join(' ')}`,
        );
      }
    }
  }
  t.same(
    readdirSync(FILES).filter((f) => /\.(sh|bash)$/.test(f)),
    [],
    'no shell script in the chart',
  );
});

t.test('chart scripts: node --check on the .mjs files', async (t) => {
  for (const f of ['cleanup-wait.mjs', 'helm-test.mjs']) {
    const r = spawnSync(process.execPath, ['--check', join(FILES, f)], { encoding: 'utf8' });
    t.equal(r.status, 0, `${f}: ${r.stderr}`);
  }
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], env: Record<string, string>, timeoutMs = 20_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env } });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('error', reject);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

t.test('cleanup-wait.mjs against a fake API server', async (t) => {
  const dir = tempDir(t, 'wait');
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, 'tok-123\n');
  const seen: { url: string; auth: string | undefined }[] = [];
  // Scripted answers: 404 (not created yet), then partial, then done.
  let answers: { status: number; body: unknown }[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    seen.push({ url: req.url ?? '', auth: req.headers.authorization });
    const a = answers.length > 1 ? answers.shift() : answers[0];
    res.writeHead(a?.status ?? 500, { 'content-type': 'application/json' });
    res.end(JSON.stringify(a?.body ?? {}));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.address() as AddressInfo).port;
  const env = {
    API_SERVER: `http://127.0.0.1:${port}`,
    NAMESPACE: 'kube-system',
    DAEMONSET: 'svcmap-cleanup',
    TOKEN_FILE: tokenFile,
    CA_FILE: join(dir, 'none'),
    POLL_MS: '50',
  };
  const ds = (generation: number, observed: number, desired: number, ready: number) => ({
    metadata: { generation },
    status: { observedGeneration: observed, desiredNumberScheduled: desired, numberReady: ready, updatedNumberScheduled: desired },
  });

  t.test('exits 0 once every node is ready', async (t) => {
    seen.length = 0;
    answers = [
      { status: 404, body: { kind: 'Status', reason: 'NotFound' } },
      { status: 200, body: ds(1, 0, 0, 0) },
      { status: 200, body: ds(1, 1, 3, 1) },
      { status: 200, body: ds(1, 1, 3, 3) },
    ];
    const r = await run(process.execPath, [join(FILES, 'cleanup-wait.mjs')], { ...env, TIMEOUT_SECONDS: '20' });
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /not yet readable: .*HTTP 404/);
    t.match(r.stdout, /1\/3 nodes cleaned/);
    t.match(r.stdout, /every node is clean: 3\/3 nodes cleaned/);
    t.equal(seen[0]?.url, '/apis/apps/v1/namespaces/kube-system/daemonsets/svcmap-cleanup');
    t.equal(seen[0]?.auth, 'Bearer tok-123', 'service account token sent');
    t.equal(seen.length, 4, 'stops polling when done');
  });

  t.test('a stale status (old generation) is not taken as done', async (t) => {
    answers = [
      { status: 200, body: ds(2, 1, 2, 2) },
      { status: 200, body: ds(2, 2, 2, 2) },
    ];
    const r = await run(process.execPath, [join(FILES, 'cleanup-wait.mjs')], { ...env, TIMEOUT_SECONDS: '20' });
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /generation 1\/2/);
  });

  t.test('exits 1 with a pointer to the pods when time runs out', async (t) => {
    answers = [{ status: 200, body: ds(1, 1, 2, 1) }];
    const r = await run(process.execPath, [join(FILES, 'cleanup-wait.mjs')], { ...env, TIMEOUT_SECONDS: '0.3' });
    t.equal(r.code, 1);
    t.match(r.stderr, /timed out after 0\.3s: 1\/2 nodes cleaned/);
    t.match(r.stderr, /kubectl -n kube-system logs ds\/svcmap-cleanup/);
  });

  t.test('refuses to run without its settings', async (t) => {
    const r = await run(process.execPath, [join(FILES, 'cleanup-wait.mjs')], {});
    t.equal(r.code, 1);
    t.match(r.stderr, /API_SERVER, NAMESPACE and DAEMONSET must be set/);
  });
});
