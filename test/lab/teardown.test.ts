// destroy() removes everything; so do exit, uncaught exceptions and signals; and
// sweepStale() cleans up after a run that was SIGKILLed.

import t from 'tap';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Lab, sweepStale, listNetns } from '../../lab/index.ts';
import { alive, leftovers, NOTHING } from './fixtures/helpers.ts';

const CHILD = fileURLToPath(new URL('./fixtures/lab-child.ts', import.meta.url));

interface ChildState {
  id: string;
  prefix: string;
  namespaces: string[];
  cgroups: string[];
  pids: number[];
  ok: number;
}

/** Runs the fixture; resolves with its state line, and a promise of how it exits. */
function runChild(
  args: string[],
): Promise<{ state: ChildState; exit: Promise<{ code: number | null; signal: string | null; stderr: string }>; pid: number }> {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const child = spawn(process.execPath, [CHILD, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exit = new Promise<{ code: number | null; signal: string | null; stderr: string }>((resolve) =>
    child.on('exit', (code, signal) => setTimeout(() => resolve({ code, signal, stderr }), 20)),
  );
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) resolve({ state: JSON.parse(out.slice(0, nl)) as ChildState, exit, pid: child.pid! });
    });
    void exit.then((e) => reject(new Error(`fixture exited early (${e.code ?? e.signal}): ${e.stderr}`)));
  });
}

/** Polls until every pid is gone (helpers die via PDEATHSIG / their stdin closing). */
async function pidsGone(pids: number[], ms = 3000): Promise<number[]> {
  const end = Date.now() + ms;
  while (pids.some(alive) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return pids.filter(alive);
}

t.test('destroy removes namespaces, cgroups and processes, twice', async (t) => {
  const lab = await Lab.create();
  const node = await lab.node('node', { cidr: '10.253.0.0/24' });
  const pod = await lab.pod(node, 'pod', '10.253.0.10');
  const cg = await lab.cgroup();
  const server = await lab.echoServer(pod, { tcpPorts: [80] });
  const client = await lab.client(pod, { cgroup: cg });
  // A process the lab did not start itself but that lives in a lab namespace.
  const stray = Number((await lab.exec(pod, 'sh', ['-c', 'sleep 60 >/dev/null 2>&1 & echo $!'])).trim());
  t.ok(alive(stray));
  const state = { id: lab.id, prefix: lab.prefix, cgroups: lab.cgroups, pids: [server.pid, client.pid, stray] };
  t.equal(listNetns().filter((n) => n.startsWith(`sm${lab.id}-`)).length, 2);
  t.ok(existsSync(`/run/svcmap-lab/${lab.id}.json`), 'run record written');
  await Promise.all([lab.destroy(), lab.destroy()]);
  await lab.destroy();
  t.same(leftovers({ ...state, pids: await pidsGone(state.pids) }), NOTHING, 'nothing left');
  t.ok(lab.destroyed);
});

t.test('SIGTERM mid-test leaves nothing behind and still dies of SIGTERM', async (t) => {
  const { state, exit, pid } = await runChild(['wait']);
  t.equal(state.ok, 1, 'the lab worked');
  t.equal(state.namespaces.length, 3);
  t.equal(leftovers(state).netns.length, 3);
  process.kill(pid, 'SIGTERM');
  const e = await exit;
  t.equal(e.signal, 'SIGTERM', 'exit status is the signal');
  t.same(leftovers({ ...state, pids: await pidsGone(state.pids) }), NOTHING, 'nothing left');
});

// tap's test processes carry signal-exit handlers, and tap ends a test that timed out
// with SIGALRM (then SIGKILL 500 ms later); SIGINT is ^C.
for (const sig of ['SIGALRM', 'SIGINT'] as const) {
  t.test(`${sig} with a signal-exit handler (like tap): both run, then the signal`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'svcmap-lab-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const marker = join(dir, 'marker.json');
    const { state, exit, pid } = await runChild(['signal-exit', marker]);
    process.kill(pid, sig);
    const e = await exit;
    t.equal(e.signal, sig, 'the process still dies of the signal');
    t.same(JSON.parse(readFileSync(marker, 'utf8')), { code: null, signal: sig }, "signal-exit's handler ran");
    t.same(leftovers({ ...state, pids: await pidsGone(state.pids) }), NOTHING, 'nothing left');
  });
}

t.test('uncaught exception leaves nothing behind', async (t) => {
  const { state, exit } = await runChild(['throw']);
  const e = await exit;
  t.equal(e.code, 1);
  t.match(e.stderr, /boom/);
  t.same(leftovers({ ...state, pids: await pidsGone(state.pids) }), NOTHING, 'nothing left');
});

t.test('SIGKILL: helpers die with their parent, sweepStale removes the rest', async (t) => {
  const { state, exit, pid } = await runChild(['wait']);
  process.kill(pid, 'SIGKILL');
  await exit;
  t.same(await pidsGone(state.pids), [], 'helpers died with their parent (PDEATHSIG)');
  const left = leftovers(state);
  t.equal(left.netns.length, 3, 'namespaces survive a SIGKILL');
  t.ok(left.record, 'the run record names the dead owner');
  const report = sweepStale();
  t.ok(report.runs.includes(state.id), `swept ${state.id}`);
  t.same(leftovers(state), NOTHING, 'nothing left after the sweep');
  t.notOk(sweepStale().runs.includes(state.id), 'a second sweep finds nothing of it');
});

t.test('orphans (lab names without a record) go only when asked', async (t) => {
  const id = 'f0f0f0';
  const ns = `sm${id}-orph`;
  t.teardown(() => {
    try {
      execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
    } catch {
      /* already gone */
    }
  });
  execFileSync('ip', ['netns', 'add', ns]);
  t.ok(listNetns().includes(ns));
  t.notOk(sweepStale().runs.includes(id), 'not swept by default');
  t.ok(listNetns().includes(ns));
  t.ok(sweepStale('sm', { orphans: true }).runs.includes(id), 'swept with orphans: true');
  t.notOk(listNetns().includes(ns));
});

t.test('sweepStale leaves live runs alone', async (t) => {
  const lab = await Lab.create();
  t.teardown(() => lab.destroy());
  await lab.netns('keep');
  const cg = await lab.cgroup();
  const report = sweepStale(undefined, { orphans: true });
  t.notOk(report.runs.includes(lab.id));
  t.equal(leftovers({ id: lab.id, prefix: lab.prefix, cgroups: [cg], pids: [] }).netns.length, 1);
  t.ok(existsSync(cg));
});
