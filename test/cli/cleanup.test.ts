// svcmap cleanup asks for --force while an agent runs on the pin directory,
// and only then; with --done-file (the chart's cleanup DaemonSet) it reports
// done through a file and waits for SIGTERM: the real agent on the e2e fixture (namespaces, echo pods, a
// client pod in the test's own cgroup, a pin directory of its own), and the
// compiled CLI. An agent killed with SIGKILL leaves nothing that reads as
// running (the kernel drops its lock with its last descriptor).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { type Cluster, echoService, startCluster } from '../e2e/fixtures/cluster.ts';
import { SVCMAP } from '../../lab/agent-process.ts';
import { runSvcmap } from './run.ts';

const VIP = '10.96.0.90';

let c: Cluster;
t.before(async () => {
  c = await startCluster([echoService('web', VIP)]);
  await c.startAgent();
});
t.teardown(async () => {
  await c?.destroy();
});

const cleanup = (...flags: string[]) => runSvcmap(['cleanup', ...flags, '--pin-dir', c.pinDir]);
const translated = async () => (await c.client.tcpConnect({ ip: VIP, port: 80, count: 3, timeoutMs: 1000 })).ok;

t.test('with the agent running: refused, exit 1, one line naming --force and what it would break; nothing removed', async (t) => {
  const r = cleanup();
  t.equal(r.status, 1, r.stderr);
  t.equal(r.stdout, '');
  t.equal(r.stderr.split('\n').length, 2, 'one line');
  t.match(
    r.stderr,
    new RegExp(
      `^svcmap cleanup: an agent is running on ${c.pinDir} \\(pid ${c.agent.child.pid}\\): .*every Service on this node stops being translated.*pass --force\\n$`,
    ),
  );
  t.ok(existsSync(c.pinDir), 'the pins stay');
  t.equal(await translated(), 3, 'and the Service is still translated');
});

t.test('with the agent stopped (SIGKILL: no chance to tidy up): proceeds without --force', async (t) => {
  c.agent.kill('SIGKILL');
  await c.agent.exited;
  t.ok(existsSync(c.pinDir), 'the agent left its pins');
  const r = cleanup();
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /^removed:\n/);
  t.notOk(existsSync(c.pinDir), 'the pins are gone');
  t.equal(await translated(), 0, 'nothing translates the VIP any more');
});

t.test('with the agent running again: --force proceeds', async (t) => {
  await c.startAgent();
  t.equal(await translated(), 3, 'the agent translates again');
  t.equal(cleanup().status, 1, 'refused without --force');
  const r = cleanup('--force');
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /^removed:\n/);
  t.notOk(existsSync(c.pinDir), 'the pins are gone');
  t.equal(await translated(), 0, 'the Service is no longer translated, as the refusal said');
  t.equal(c.agent.child.exitCode, null, 'the agent itself runs on');
});

t.test(
  '--done-file (the chart cleanup DaemonSet): cleans up under a running agent, creates the file, runs until SIGTERM, exits 0',
  async (t) => {
    c.agent.kill('SIGKILL');
    await c.agent.exited;
    await c.startAgent();
    t.equal(await translated(), 3, 'the agent translates again');
    const dir = mkdtempSync(join(tmpdir(), 'svcmap-cleanup-done-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const done = join(dir, 'done');
    writeFileSync(done, ''); // a previous pod's: removed first, so it never reads as this run's
    const { NODE_OPTIONS: _, SVCMAP_DEBUG: __, ...env } = process.env;
    const p = spawn('env', ['-u', 'NODE_OPTIONS', SVCMAP, 'cleanup', '--force', '--pin-dir', c.pinDir, '--done-file', done], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const exited = new Promise<number | null>((resolve) => p.on('exit', (code) => resolve(code)));
    // Waits for the line that says it is done (or for an early exit).
    await new Promise<void>((resolve) => {
      p.stdout.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        if (out.includes('waiting for SIGTERM')) resolve();
      });
      void exited.then(() => resolve());
    });
    t.equal(p.exitCode, null, `still running after the cleanup${err ? `: ${err}` : ''}`);
    t.match(out, /^removed:\n[\s\S]*done: created .*; waiting for SIGTERM\n$/);
    t.ok(existsSync(done), 'the done file exists (the readiness probe turns ready)');
    t.notOk(existsSync(c.pinDir), 'the pins are gone');
    t.equal(await translated(), 0, 'the Service is no longer translated');
    p.kill('SIGTERM');
    t.equal(await exited, 0, 'SIGTERM: exit 0 (the hook deleting its pod)');
  },
);
