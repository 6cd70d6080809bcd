// The control plane through the real agent and the real Kubernetes source:
// a test API server (lab/apiserver, list/watch over HTTP) holding N Services
// and their EndpointSlices, `svcmap agent --kubeconfig` against it on a cgroup
// of the bench's own (with no process in it) and a pin directory of its own.
// Measures start -> first full sync, the sync itself (the agent's "sync done"
// log line), RSS, single EndpointSlice changes (partial syncs), and the
// network programming latency metric under a stream of changes (each slice
// carries endpoints.kubernetes.io/last-change-trigger-time, as the
// EndpointSlice controller sets it).
import { join } from 'node:path';
import { startApiServer, writeKubeconfig } from '../lab/apiserver/index.ts';
import { registerTeardown, unregisterTeardown } from '../lab/index.ts';
import { cleanupPins } from '../src/cli/cleanup.ts';
import {
  cpuOf,
  diffHistogram,
  histogramQuantile,
  isSyncDone,
  memoryOf,
  parseHistogram,
  scrape,
  settledRss,
  startAgent,
  stopAgent,
} from './agent.ts';
import { serviceObject, sliceObject } from './manifests.ts';
import { median, percentile } from './stats.ts';
import { type BenchService, withChangedEndpoint } from './workload.ts';
import type { AgentProcess } from '../lab/agent-process.ts';

const LATENCY_METRIC = 'svcmap_network_programming_duration_seconds';

export interface StreamResult {
  changes: number;
  ratePerSec: number;
  /** Observations of the metric during the stream. */
  observed: number;
  /** histogram_quantile (linear inside a bucket) and the bucket's upper bound, seconds. */
  p50: { value: number; bucketLe: number } | undefined;
  p99: { value: number; bucketLe: number } | undefined;
  /** The partial syncs' own durations during the stream ("sync done" durationMs). */
  syncMs: { p50: number; p99: number; syncs: number };
}

export interface AgentCpResult {
  n: number;
  endpointsPerService: number;
  source: 'kubernetes (lab/apiserver)';
  /** Agent spawn -> first full "sync done" (process start, BPF load, informer lists, model, sync). */
  startToSyncMs: number;
  /** The agent's CPU time from its start to the first full sync (read as the bench sees the sync's log line), ms. */
  cpuToSync?: { userMs: number; sysMs: number };
  /** The full sync's own duration (plan + batched map writes), from its log line. */
  fullSyncMs: number;
  /** RSS as the first full sync is logged, and once the agent has settled after it (bench/agent.ts settledRss). */
  rssAtSync: number;
  rssAfterSync: number;
  rssAfterChanges: number;
  /** One EndpointSlice update -> the agent's partial "sync done": wall time seen by the bench, and the sync's own duration. */
  change: { wallP50: number; wallP99: number; syncP50: number; syncP99: number; reps: number };
  stream?: StreamResult;
}

export interface AgentCpOptions {
  services: readonly BenchService[];
  endpointsPerService: number;
  cgroup: string;
  pinDir: string;
  workDir: string;
  changeReps: number;
  stream?: { changes: number; ratePerSec: number };
  timeoutMs: number;
  log: (s: string) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The agent's flags besides its source: its cgroup and pins, maps sized for n services x endpoints, metrics on a free port. */
export function agentArgs(cgroup: string, pinDir: string, n: number, endpointsPerService: number): string[] {
  const svcEntries = Math.ceil(n * (1 + endpointsPerService) * 1.05) + 1024;
  const beEntries = Math.ceil(n * endpointsPerService * 1.05) + 1024;
  return [
    '--cgroup',
    cgroup,
    '--pin-dir',
    pinDir,
    '--max-services',
    String(svcEntries),
    '--max-backends',
    String(beEntries),
    '--metrics-bind-address',
    '127.0.0.1:0',
    '--healthz-bind-address',
    '127.0.0.1:0',
  ];
}

export async function runAgentControlPlane(o: AgentCpOptions): Promise<AgentCpResult> {
  const n = o.services.length;
  const objects: object[] = [];
  for (const s of o.services) objects.push(serviceObject(s), sliceObject(s));
  const api = await startApiServer({ objects, historyLimit: 100_000 });
  objects.length = 0;
  let agent: AgentProcess | undefined;
  // On a signal or a crash the lab's teardown runs this too: the agent is no lab process.
  const teardown = { emergency: () => agent?.kill('SIGKILL') };
  registerTeardown(teardown);
  try {
    const kubeconfig = await writeKubeconfig(join(o.workDir, 'kubeconfig'), api);
    const started = await startAgent(
      ['--kubeconfig', kubeconfig, '--node-name', 'bench-node', ...agentArgs(o.cgroup, o.pinDir, n, o.endpointsPerService)],
      n,
      o.timeoutMs,
      (a) => {
        agent = a;
      },
    );
    const running = started.agent;
    const cpuToSync = cpuOf(started.pid);
    const rssAtSync = memoryOf(started.pid).rss;
    const rssAfterSync = await settledRss(started);

    const current = [...o.services];
    let changeNo = 2_000_000;
    const change = (i: number): void => {
      const next = withChangedEndpoint(current[i]!, changeNo++);
      current[i] = next;
      api.apply(sliceObject(next, new Date()));
    };

    // Single changes, one at a time.
    const wall: number[] = [];
    const sync: number[] = [];
    for (let r = 0; r < o.changeReps; r++) {
      const from = running.mark();
      const t0 = performance.now();
      change((r * 7919) % n);
      const line = await running.waitFor((l) => isSyncDone(l) && l.full === false, { from, timeoutMs: 30_000, what: 'a partial sync' });
      wall.push(performance.now() - t0);
      sync.push(Number(line.durationMs));
      await sleep(10);
    }

    let stream: StreamResult | undefined;
    if (o.stream && started.metricsPort !== undefined) {
      const port = started.metricsPort;
      const before = parseHistogram(await scrape(port), LATENCY_METRIC);
      const from = running.mark();
      const interval = 1000 / o.stream.ratePerSec;
      const t0 = performance.now();
      // Distinct services, so that every change reaches the maps on its own sync and is observed once (a trigger time is observed when the write that carries it succeeds).
      const stride = n > 1 ? 104729 % n || 1 : 1;
      const count = Math.min(o.stream.changes, n);
      for (let c = 0; c < count; c++) {
        const due = t0 + c * interval;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        change((c * stride) % n);
      }
      const deadline = performance.now() + 30_000;
      let after = parseHistogram(await scrape(port), LATENCY_METRIC);
      while (after.count - before.count < count && performance.now() < deadline) {
        await sleep(50);
        after = parseHistogram(await scrape(port), LATENCY_METRIC);
      }
      const h = diffHistogram(after, before);
      const syncs = running.lines
        .slice(from)
        .filter((l) => isSyncDone(l) && l.full === false)
        .map((l) => Number(l.durationMs));
      stream = {
        changes: count,
        ratePerSec: o.stream.ratePerSec,
        observed: h.count,
        p50: histogramQuantile(h, 0.5),
        p99: histogramQuantile(h, 0.99),
        syncMs: { p50: median(syncs), p99: percentile(syncs, 0.99), syncs: syncs.length },
      };
    }
    const rssAfterChanges = memoryOf(started.pid).rss;
    return {
      n,
      endpointsPerService: o.endpointsPerService,
      source: 'kubernetes (lab/apiserver)',
      startToSyncMs: started.startToSyncMs,
      cpuToSync,
      fullSyncMs: Number(started.firstSync.durationMs),
      rssAtSync,
      rssAfterSync,
      rssAfterChanges,
      change: {
        wallP50: median(wall),
        wallP99: percentile(wall, 0.99),
        syncP50: median(sync),
        syncP99: percentile(sync, 0.99),
        reps: wall.length,
      },
      ...(stream ? { stream } : {}),
    };
  } finally {
    await stopAgent(agent);
    unregisterTeardown(teardown);
    cleanupPins(o.pinDir);
    await api.close();
  }
}
