// The control part's agent row alone (bench/cp-agent.ts): the agent with the
// Kubernetes source against the bench's API server at N services x 10
// endpoints, once, printed as one JSON line. For side-by-side runs of two
// builds (SVCMAP_BIN=<other checkout>/bin/svcmap picks the agent binary) and
// for profiles (SVCMAP_NODE_OPTIONS, e.g. --cpu-prof, reaches the agent's node
// through NODE_OPTIONS):
//
//   node bench/agent-alone.ts [--n 10000] [--change-reps 30] [--stream]
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { assertBuilt, SVCMAP } from '../lab/agent-process.ts';
import { Lab, registerTeardown, unregisterTeardown } from '../lab/index.ts';
import { ensureBpffs, labPinDir, removePinDir } from '../lab/pins.ts';
import { runAgentControlPlane } from './cp-agent.ts';
import { makeServices } from './workload.ts';

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '10000' },
    'change-reps': { type: 'string', default: '30' },
    stream: { type: 'boolean', default: false },
  },
});
if (process.getuid?.() !== 0) throw new Error('needs root (cgroups, BPF)');
if (!process.env.SVCMAP_BIN) assertBuilt();
const n = Number(values.n);
const extra = process.env.SVCMAP_NODE_OPTIONS;
if (extra) process.env.NODE_OPTIONS = extra;
ensureBpffs();
const lab = await Lab.create({ prefix: 'ba' });
const pinRoot = labPinDir(lab.id, '', 'bench');
const workDir = mkdtempSync(join(tmpdir(), `svcmap-agent-alone-${lab.id}-`));
mkdirSync(pinRoot, { recursive: true });
const teardown = {
  emergency() {
    removePinDir(pinRoot);
    rmSync(workDir, { recursive: true, force: true });
  },
};
registerTeardown(teardown);
try {
  const r = await runAgentControlPlane({
    services: makeServices(n, 10),
    endpointsPerService: 10,
    cgroup: await lab.cgroup('agent'),
    pinDir: join(pinRoot, 'agent'),
    workDir,
    changeReps: Number(values['change-reps']),
    timeoutMs: 600_000,
    log: (s) => process.stderr.write(`${s}\n`),
    ...(values.stream ? { stream: { changes: 1000, ratePerSec: 100 } } : {}),
  });
  process.stdout.write(`${JSON.stringify({ bin: SVCMAP, ...r })}\n`);
} finally {
  await lab.destroy();
  teardown.emergency();
  unregisterTeardown(teardown);
}
