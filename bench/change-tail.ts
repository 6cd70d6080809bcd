// Where one change's tail goes: the agent with the Kubernetes source at N
// services x 10 endpoints (as bench/cp-agent.ts runs it), then single
// EndpointSlice changes one at a time, each timed in parts: the bench's own
// apply (the API server writes the watch event), the agent's log line
// (its pino time, ms), the line's arrival here; with the agent's --trace-gc
// lines and this process's own GC pauses that fall inside each change.
//
//   node bench/change-tail.ts [--n 10000] [--reps 300]
// (the agent's GC trace: SVCMAP_BIN, a wrapper that runs node --trace-gc)
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { assertBuilt } from '../lab/agent-process.ts';
import { startApiServer, writeKubeconfig } from '../lab/apiserver/index.ts';
import { Lab, registerTeardown, unregisterTeardown } from '../lab/index.ts';
import { ensureBpffs, labPinDir, removePinDir } from '../lab/pins.ts';
import { isSyncDone, startAgent, stopAgent } from './agent.ts';
import { agentArgs } from './cp-agent.ts';
import { serviceObject, sliceObject } from './manifests.ts';
import { percentile } from './stats.ts';
import { makeServices, withChangedEndpoint } from './workload.ts';
import type { AgentProcess } from '../lab/agent-process.ts';

const { values } = parseArgs({
  options: { n: { type: 'string', default: '10000' }, reps: { type: 'string', default: '300' } },
});
if (!process.env.SVCMAP_BIN) assertBuilt();
const n = Number(values.n);
const reps = Number(values.reps);
const extra = process.env.SVCMAP_NODE_OPTIONS;
if (extra) process.env.NODE_OPTIONS = extra;
const benchGc: Array<{ start: number; ms: number }> = [];
new PerformanceObserver((l) => {
  for (const e of l.getEntries()) benchGc.push({ start: e.startTime, ms: e.duration });
}).observe({ entryTypes: ['gc'] });

ensureBpffs();
const lab = await Lab.create({ prefix: 'ct' });
const pinRoot = labPinDir(lab.id, '', 'bench');
const workDir = mkdtempSync(join(tmpdir(), `svcmap-change-tail-${lab.id}-`));
mkdirSync(pinRoot, { recursive: true });
let agent: AgentProcess | undefined;
const teardown = {
  emergency() {
    agent?.kill('SIGKILL');
    removePinDir(pinRoot);
    rmSync(workDir, { recursive: true, force: true });
  },
};
registerTeardown(teardown);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
try {
  const services = makeServices(n, 10);
  const objects: object[] = [];
  for (const s of services) objects.push(serviceObject(s), sliceObject(s));
  const api = await startApiServer({ objects, historyLimit: 100_000 });
  objects.length = 0;
  const kubeconfig = await writeKubeconfig(join(workDir, 'kubeconfig'), api);
  const started = await startAgent(
    ['--kubeconfig', kubeconfig, '--node-name', 'bench-node', ...agentArgs(await lab.cgroup('agent'), join(pinRoot, 'agent'), n, 10)],
    n,
    600_000,
    (a) => (agent = a),
  );
  await sleep(15_000); // past the heap reclaim after the first sync
  const running = started.agent;
  const rows: Array<{ wall: number; apply: number; toLog: number; sync: number; agentGc: string[]; benchGcMs: number }> = [];
  let changeNo = 2_000_000;
  for (let r = 0; r < reps; r++) {
    const i = (r * 7919) % n;
    const next = withChangedEndpoint(services[i]!, changeNo++);
    services[i] = next;
    const obj = sliceObject(next, new Date());
    const from = running.mark();
    const gcFrom = benchGc.length;
    const epoch0 = Date.now();
    const t0 = performance.now();
    api.apply(obj);
    const t1 = performance.now();
    const line = await running.waitFor((l) => isSyncDone(l) && l.full === false, { from, timeoutMs: 30_000, what: 'a partial sync' });
    const t2 = performance.now();
    await sleep(5);
    const agentGc = running.lines
      .slice(from, running.lines.indexOf(line))
      .filter((l) => l.raw)
      .map((l) => String(l.msg));
    const benchGcMs = benchGc.slice(gcFrom).reduce((s, g) => s + (g.start < t2 ? g.ms : 0), 0);
    rows.push({ wall: t2 - t0, apply: t1 - t0, toLog: Number(line.time) - epoch0, sync: Number(line.durationMs), agentGc, benchGcMs });
    await sleep(10);
  }
  const q = (k: 'wall' | 'apply' | 'toLog' | 'sync' | 'benchGcMs') => {
    const v = rows.map((x) => x[k]);
    return `${k}: p50 ${percentile(v, 0.5).toFixed(2)} p90 ${percentile(v, 0.9).toFixed(2)} p99 ${percentile(v, 0.99).toFixed(2)} max ${Math.max(...v).toFixed(2)}`;
  };
  for (const k of ['wall', 'apply', 'toLog', 'sync', 'benchGcMs'] as const) console.log(q(k));
  const slow = [...rows].sort((a, b) => b.wall - a.wall).slice(0, Math.max(5, Math.ceil(reps / 50)));
  console.log('slowest:');
  for (const s of slow)
    console.log(
      `  wall ${s.wall.toFixed(2)} apply ${s.apply.toFixed(2)} toLog ${s.toLog} sync ${s.sync} benchGc ${s.benchGcMs.toFixed(2)} agentGc ${s.agentGc.join(' | ')}`,
    );
  const withGc = rows.filter((r) => r.agentGc.length);
  console.log(
    `changes with an agent GC inside: ${withGc.length}/${rows.length}; their wall p50 ${percentile(
      withGc.map((r) => r.wall),
      0.5,
    ).toFixed(2)}`,
  );
  await stopAgent(agent);
  await api.close();
} finally {
  await stopAgent(agent);
  await lab.destroy();
  teardown.emergency();
  unregisterTeardown(teardown);
}
