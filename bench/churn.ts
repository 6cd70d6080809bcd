// The churn soak: does the agent's memory stay flat under steady change? The
// real agent and the Kubernetes source against the bench's API server
// (lab/apiserver) holding N services x E endpoints; EndpointSlice changes at
// a steady rate (each one service's endpoint replaced, services in turn) for
// a warm-up and then the measured minutes; the agent's RSS (and V8's used
// heap, from its metrics) sampled every `sampleMs`. The growth is the last
// sample against the first one after the warm-up, in %: flat when under
// `flatPct` (the target: < 2% from minute 2 to minute 30). With
// NODE_OPTIONS=--heapsnapshot-signal=SIGUSR2 in the bench's environment, a
// `kill -USR2` of the agent writes heap snapshots to compare.
import { join } from 'node:path';
import type { AgentProcess } from '../lab/agent-process.ts';
import { startApiServer, writeKubeconfig } from '../lab/apiserver/index.ts';
import { registerTeardown, unregisterTeardown } from '../lab/index.ts';
import { cleanupPins } from '../src/cli/cleanup.ts';
import { memoryOf, scrape, startAgent, stopAgent } from './agent.ts';
import { agentArgs } from './cp-agent.ts';
import { serviceObject, sliceObject } from './manifests.ts';
import { type BenchService, withChangedEndpoint } from './workload.ts';

export interface ChurnSample {
  /** Seconds since the first full sync. */
  atS: number;
  rss: number;
  heapUsed: number;
  changes: number;
}

export interface ChurnResult {
  n: number;
  endpointsPerService: number;
  ratePerSec: number;
  warmupS: number;
  measuredS: number;
  changes: number;
  /** Achieved change rate over the whole run. */
  achievedPerSec: number;
  samples: ChurnSample[];
  /** RSS growth from the end of the warm-up to the end, % of the RSS then; and V8's used heap likewise. */
  rssGrowthPct: number;
  /** The highest RSS in the last quarter of the measured time against the highest in its first
   * quarter, in %: the trend of the envelope, which the phase of V8's collections at the two
   * single samples does not decide (RSS rises and falls by tens of MiB with them). */
  rssPeakGrowthPct: number;
  heapGrowthPct: number;
  flatPct: number;
  flat: boolean;
  /** The load average (1 min) at the start and at the end. */
  loadavg: [number, number];
}

export interface ChurnOptions {
  services: readonly BenchService[];
  endpointsPerService: number;
  ratePerSec: number;
  warmupMs: number;
  durationMs: number;
  sampleMs: number;
  flatPct: number;
  cgroup: string;
  pinDir: string;
  workDir: string;
  timeoutMs: number;
  loadavg: () => number;
  log: (s: string) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function heapUsedOf(metrics: string): number {
  return Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(metrics)?.[1] ?? NaN);
}

export async function runChurn(o: ChurnOptions): Promise<ChurnResult> {
  const n = o.services.length;
  const objects: object[] = [];
  for (const s of o.services) objects.push(serviceObject(s), sliceObject(s));
  // The server's watch history is bounded: a long soak must not grow the bench's own process without end.
  const api = await startApiServer({ objects, historyLimit: 10_000 });
  objects.length = 0;
  let agent: AgentProcess | undefined;
  const teardown = { emergency: () => agent?.kill('SIGKILL') };
  registerTeardown(teardown);
  const load0 = o.loadavg();
  try {
    const kubeconfig = await writeKubeconfig(join(o.workDir, 'kubeconfig-churn'), api);
    const started = await startAgent(
      ['--kubeconfig', kubeconfig, '--node-name', 'bench-node', ...agentArgs(o.cgroup, o.pinDir, n, o.endpointsPerService)],
      n,
      o.timeoutMs,
      (a) => {
        agent = a;
      },
    );
    const port = started.metricsPort;
    const current = [...o.services];
    let changeNo = 4_000_000;
    let changes = 0;
    const samples: ChurnSample[] = [];
    const t0 = performance.now();
    const total = o.warmupMs + o.durationMs;
    const sample = async () => {
      const heapUsed = port === undefined ? NaN : heapUsedOf(await scrape(port));
      const s = { atS: (performance.now() - t0) / 1000, rss: memoryOf(started.pid).rss, heapUsed, changes };
      samples.push(s);
      o.log(
        `churn: ${s.atS.toFixed(0)} s, ${changes} changes, RSS ${(s.rss / 2 ** 20).toFixed(1)} MiB, heap used ${(heapUsed / 2 ** 20).toFixed(1)} MiB`,
      );
    };
    await sample();
    let nextSample = t0 + o.sampleMs;
    const stride = n > 1 ? 104729 % n || 1 : 1;
    const interval = 1000 / o.ratePerSec;
    for (let c = 0; ; c++) {
      const due = t0 + c * interval;
      if (due - t0 > total) break;
      if (due >= nextSample) {
        await sample();
        nextSample += o.sampleMs;
      }
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const i = (c * stride) % n;
      const next = withChangedEndpoint(current[i]!, changeNo++);
      current[i] = next;
      api.apply(sliceObject(next, new Date()));
      changes++;
    }
    await sample();
    const warm = samples.find((s) => s.atS * 1000 >= o.warmupMs) ?? samples.at(-1)!;
    const last = samples.at(-1)!;
    const rssGrowthPct = ((last.rss - warm.rss) / warm.rss) * 100;
    const rssPeakGrowthPct = peakGrowthPct(samples, warm.atS);
    const heapGrowthPct = ((last.heapUsed - warm.heapUsed) / warm.heapUsed) * 100;
    return {
      n,
      endpointsPerService: o.endpointsPerService,
      ratePerSec: o.ratePerSec,
      warmupS: o.warmupMs / 1000,
      measuredS: last.atS - warm.atS,
      changes,
      achievedPerSec: changes / last.atS,
      samples,
      rssGrowthPct,
      rssPeakGrowthPct,
      heapGrowthPct,
      flatPct: o.flatPct,
      flat: rssGrowthPct < o.flatPct,
      loadavg: [load0, o.loadavg()],
    };
  } finally {
    await stopAgent(agent);
    unregisterTeardown(teardown);
    cleanupPins(o.pinDir);
    await api.close();
  }
}

/** The highest RSS in the first and in the last quarter of the samples from fromS on. */
export function quarterPeaks(samples: readonly ChurnSample[], fromS: number): { first: number; last: number } {
  const measured = samples.filter((s) => s.atS >= fromS);
  const q = Math.max(1, Math.floor(measured.length / 4));
  const peak = (xs: readonly ChurnSample[]) => Math.max(...xs.map((s) => s.rss));
  return { first: peak(measured.slice(0, q)), last: peak(measured.slice(-q)) };
}

export function peakGrowthPct(samples: readonly ChurnSample[], fromS: number): number {
  const { first, last } = quarterPeaks(samples, fromS);
  return ((last - first) / first) * 100;
}

const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;

export function churnTable(r: ChurnResult): string {
  const warm = r.samples.find((s) => s.atS >= r.warmupS) ?? r.samples.at(-1)!;
  const last = r.samples.at(-1)!;
  const peaks = quarterPeaks(r.samples, warm.atS);
  return [
    `${r.n} services x ${r.endpointsPerService} endpoints, EndpointSlice changes at ${r.achievedPerSec.toFixed(0)}/s (${r.changes} in all), ${r.warmupS} s warm-up then ${r.measuredS.toFixed(0)} s measured; load average ${r.loadavg[0].toFixed(2)} -> ${r.loadavg[1].toFixed(2)}.`,
    '',
    '| | after the warm-up | at the end | growth | flat (< ' + r.flatPct + '%) |',
    '| --- | --- | --- | --- | --- |',
    `| RSS | ${mib(warm.rss)} | ${mib(last.rss)} | ${r.rssGrowthPct.toFixed(2)}% | ${r.flat ? 'yes' : '**no**'} |`,
    `| RSS, highest in the first / last quarter | ${mib(peaks.first)} | ${mib(peaks.last)} | ${r.rssPeakGrowthPct.toFixed(2)}% | ${r.rssPeakGrowthPct < r.flatPct ? 'yes' : '**no**'} |`,
    `| V8 heap used | ${mib(warm.heapUsed)} | ${mib(last.heapUsed)} | ${r.heapGrowthPct.toFixed(2)}% | |`,
    '',
    `RSS every ${((r.samples[1]?.atS ?? 0) - (r.samples[0]?.atS ?? 0)).toFixed(0)} s (MiB): ${r.samples.map((s) => (s.rss / 2 ** 20).toFixed(0)).join(' ')}`,
  ].join('\n');
}
