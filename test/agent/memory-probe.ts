// The measurement behind memory.test.ts, run as a plain Node process of its
// own (the API server out of tap's test process, tap's loaders not inherited).
// Starts lab/apiserver with N Services x E endpoints (make bench's workload),
// the real agent against it on a lab cgroup and pin directory of its own, and
// prints {"frontends", "rssMiB", "rssAtSyncMiB", "fullSyncMs", "startToSyncMs", "datapathUpToSyncMs"}
// once the agent's first full sync is done: rssMiB once it has settled after
// it (bench/agent.ts settledRss), rssAtSyncMiB as the sync is logged (the
// times are for reading by hand: the check asserts memory only).
//   node test/agent/memory-probe.ts N E
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { memoryOf, settledRss, startAgent, stopAgent } from '../../bench/agent.ts';
import { serviceObject, sliceObject } from '../../bench/manifests.ts';
import { makeServices } from '../../bench/workload.ts';
import { type AgentProcess, assertBuilt } from '../../lab/agent-process.ts';
import { type ApiServer, startApiServer, writeKubeconfig } from '../../lab/apiserver/index.ts';
import { Lab, registerTeardown, unregisterTeardown } from '../../lab/index.ts';
import { ensureBpffs, labPinDir, removePinDir } from '../../lab/pins.ts';

const services = Number(process.argv[2] ?? 1000);
const endpoints = Number(process.argv[3] ?? 10);
assertBuilt();
ensureBpffs();
const lab = await Lab.create({ prefix: 'mem' });
const pinDir = labPinDir(lab.id, 'mem');
const work = mkdtempSync(join(tmpdir(), 'svcmap-mem-'));
let agent: AgentProcess | undefined;
let api: ApiServer | undefined;
const teardown = { emergency: () => agent?.kill('SIGKILL') };
registerTeardown(teardown);
try {
  const cgroup = await lab.cgroup('agent');
  mkdirSync(pinDir, { recursive: true });
  const objects: object[] = [];
  for (const s of makeServices(services, endpoints)) objects.push(serviceObject(s), sliceObject(s));
  api = await startApiServer({ objects });
  const kubeconfig = await writeKubeconfig(join(work, 'kubeconfig'), api);
  // Map sizes as make bench gives them.
  const entries = Math.ceil(services * (endpoints + 1) * 1.05) + 1024;
  const started = await startAgent(
    [
      '--kubeconfig',
      kubeconfig,
      '--node-name',
      'mem-node',
      '--cgroup',
      cgroup,
      '--pin-dir',
      join(pinDir, 'agent'),
      '--max-services',
      String(entries),
      '--max-backends',
      String(entries),
      '--metrics-bind-address',
      '127.0.0.1:0',
      '--healthz-bind-address',
      '127.0.0.1:0',
    ],
    services,
    150_000,
    (a) => {
      agent = a;
    },
  );
  const rssAtSyncMiB = memoryOf(started.pid).rss / 2 ** 20;
  // What bin/svcmap gave the agent's environment (glibc reads it as the process starts).
  const env = readFileSync(`/proc/${started.pid}/environ`, 'utf8').split('\0');
  const mallocArenaMax = env.find((e) => e.startsWith('MALLOC_ARENA_MAX='))?.slice('MALLOC_ARENA_MAX='.length);
  const rssMiB = (await settledRss(started)) / 2 ** 20;
  const fullSyncMs = Number(started.firstSync.durationMs);
  // From the agent's "datapath up" (BPF loaded, the informers start) to the first full sync: the lists, validation, model and sync.
  const up = started.agent.lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('datapath up'));
  const datapathUpToSyncMs = up ? Number(started.firstSync.time) - Number(up.time) : undefined;
  process.stdout.write(
    `${JSON.stringify({ frontends: Number(started.firstSync.frontends), mallocArenaMax, rssMiB, rssAtSyncMiB, fullSyncMs, startToSyncMs: Math.round(started.startToSyncMs), datapathUpToSyncMs })}\n`,
  );
} finally {
  await stopAgent(agent);
  await api?.close();
  try {
    removePinDir(pinDir);
  } catch {
    /* the lab's sweep removes what is left */
  }
  rmSync(work, { recursive: true, force: true });
  unregisterTeardown(teardown);
  await lab.destroy();
}
