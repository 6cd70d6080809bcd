// start -> synced of the agent against lab/apiserver, alone: N Services x 10
// endpoints, `svcmap agent --kubeconfig` as bench/cp-agent.ts runs it, no
// changes and no RSS hold, `--reps` times; SVCMAP_BIN runs another build (a
// before/after). Prints spawn -> synced, datapath up -> synced (informer
// lists, validation, model, first full sync) and that sync's own duration.
//   node bench/probe-k8s-start.ts [--n 10000] [--reps 3]
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startApiServer, writeKubeconfig } from '../lab/apiserver/index.ts';
import { Lab } from '../lab/index.ts';
import { ensureBpffs, labPinDir, removePinDir } from '../lab/pins.ts';
import { cleanupPins } from '../src/cli/cleanup.ts';
import { startAgent, stopAgent } from './agent.ts';
import { agentArgs } from './cp-agent.ts';
import { serviceObject, sliceObject } from './manifests.ts';
import { makeServices } from './workload.ts';
import type { AgentProcess } from '../lab/agent-process.ts';

const { values } = parseArgs({ options: { n: { type: 'string', default: '10000' }, reps: { type: 'string', default: '3' } } });
const n = Number(values.n);
ensureBpffs();
const services = makeServices(n, 10);
const objects: object[] = [];
for (const s of services) objects.push(serviceObject(s), sliceObject(s));
const api = await startApiServer({ objects, historyLimit: 100_000 });
const lab = await Lab.create({ prefix: 'bp' });
const pinRoot = labPinDir(lab.id, '', 'bench');
mkdirSync(pinRoot, { recursive: true });
const workDir = mkdtempSync(join(tmpdir(), 'svcmap-probe-'));
try {
  const cgroup = await lab.cgroup('probe');
  const kubeconfig = await writeKubeconfig(join(workDir, 'kubeconfig'), api);
  for (let r = 0; r < Number(values.reps); r++) {
    const pinDir = join(pinRoot, `agent-${r}`);
    let agent: AgentProcess | undefined;
    try {
      const started = await startAgent(['--kubeconfig', kubeconfig, '--node-name', 'bench-node', ...agentArgs(cgroup, pinDir, n, 10)], n, 300_000, (a) => { agent = a; });
      const up = started.agent.lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('datapath up'));
      console.log(`N=${n} load ${(await import('node:os')).loadavg()[0]!.toFixed(2)}: spawn -> synced ${started.startToSyncMs.toFixed(0)} ms, datapath up -> synced ${(Number(started.firstSync.time) - Number(up?.time)).toFixed(0)} ms, full sync ${Number(started.firstSync.durationMs).toFixed(0)} ms`);
    } finally {
      await stopAgent(agent);
      cleanupPins(pinDir);
    }
  }
} finally {
  await api.close();
  removePinDir(pinRoot);
  rmSync(workDir, { recursive: true, force: true });
  await lab.destroy();
}
