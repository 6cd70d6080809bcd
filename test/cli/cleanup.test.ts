// svcmap cleanup asks for --force while an agent runs on the pin directory,
// and only then: the real agent on the e2e fixture (namespaces, echo pods, a
// client pod in the test's own cgroup, a pin directory of its own), and the
// compiled CLI. An agent killed with SIGKILL leaves nothing that reads as
// running (the kernel drops its lock with its last descriptor).
import { existsSync } from 'node:fs';
import t from 'tap';
import { type Cluster, echoService, startCluster } from '../e2e/fixtures/cluster.ts';
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
