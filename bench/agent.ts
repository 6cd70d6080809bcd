// The real svcmap agent (bin/svcmap, via lab/agent-process.ts) as the bench
// drives it: start with flags, wait for syncs, read its RSS from /proc and
// its Prometheus histograms from /metrics, stop it.
import { readFileSync } from 'node:fs';
import { AgentProcess, type LogLine } from '../lab/agent-process.ts';

export interface StartedAgent {
  agent: AgentProcess;
  pid: number;
  metricsPort: number | undefined;
  /** ms from spawn to the first full sync. */
  startToSyncMs: number;
  firstSync: LogLine;
}

export function isSyncDone(l: LogLine): boolean {
  return l.msg === 'sync done';
}

/**
 * Starts the agent and waits for its first full sync that programmed `frontends`
 * frontends (an earlier, smaller one - e.g. before every informer listed - is skipped).
 */
export async function startAgent(
  args: string[],
  frontends: number,
  timeoutMs: number,
  onSpawn?: (a: AgentProcess) => void,
): Promise<StartedAgent> {
  const t0 = performance.now();
  const agent = new AgentProcess(args);
  onSpawn?.(agent); // so that teardown on a signal finds it while it starts
  try {
    const line = await agent.waitFor((l) => isSyncDone(l) && l.full === true && Number(l.frontends) >= frontends, {
      timeoutMs,
      what: `"sync done" with ${frontends} frontends`,
    });
    const startToSyncMs = performance.now() - t0;
    const serving = agent.lines.find((l) => l.msg === 'serving metrics and health');
    const port = serving?.metricsPort;
    return { agent, pid: agent.child.pid!, metricsPort: typeof port === 'number' ? port : undefined, startToSyncMs, firstSync: line };
  } catch (err) {
    await stopAgent(agent);
    throw err;
  }
}

export async function stopAgent(agent: AgentProcess | undefined): Promise<void> {
  if (!agent) return;
  agent.kill('SIGTERM');
  await Promise.race([agent.exited, new Promise((r) => setTimeout(r, 5000))]);
  agent.kill('SIGKILL');
  await Promise.race([agent.exited, new Promise((r) => setTimeout(r, 2000))]);
}

export const HEAP_RECLAIMED = 'heap reclaimed after a full sync';

/** How long settledRss keeps watching after the collection: past one conntrack GC pass (--ct-gc-interval, 10 s by default). */
export const SETTLE_HOLD_MS = 12_000;

/**
 * The agent's RSS once it has settled after its first full sync: the highest
 * reading, every 500 ms, over `holdMs` from the collection that follows a
 * sync that grew the heap (src/agent/loops/heap.ts), or from `timeoutMs` after the
 * sync when none comes (a small heap, or no --expose-gc). The hold covers
 * what an idle agent does next (a conntrack GC pass): read right at the
 * collection, an agent whose periodic work grew it again (it did, by ~200
 * MiB at 10k) would look smaller than it runs.
 */
export async function settledRss(started: StartedAgent, timeoutMs = 10_000, holdMs = SETTLE_HOLD_MS): Promise<number> {
  const from = started.agent.lines.indexOf(started.firstSync);
  await started.agent.waitFor((l) => l.msg === HEAP_RECLAIMED, { from, timeoutMs, what: HEAP_RECLAIMED }).catch(() => undefined);
  let rss = memoryOf(started.pid).rss;
  for (let waited = 0; waited < holdMs; waited += 500) {
    await new Promise((r) => setTimeout(r, 500));
    rss = Math.max(rss, memoryOf(started.pid).rss);
  }
  return rss;
}

/** Resident set size (VmRSS) and its peak (VmHWM) of a process, in bytes. */
export function memoryOf(pid: number): { rss: number; hwm: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/** CPU time (user, system) the process has used so far, ms: on a shared machine it says what the work cost where wall time says how busy the machine was. */
export function cpuOf(pid: number): { userMs: number; sysMs: number } {
  // Fields after the command (which may hold spaces) in /proc/PID/stat; utime and stime are the 14th and 15th, in clock ticks (USER_HZ, 100 on Linux).
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { userMs: Number(f[11]) * 10, sysMs: Number(f[12]) * 10 };
}

export interface Histogram {
  /** Cumulative counts by upper bound (le), ascending; the last is +Inf. */
  buckets: Array<[number, number]>;
  sum: number;
  count: number;
}

export async function scrape(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  if (!res.ok) throw new Error(`GET /metrics: ${res.status}`);
  return res.text();
}

/** One histogram (without labels) from Prometheus text. */
export function parseHistogram(text: string, name: string): Histogram {
  const buckets: Array<[number, number]> = [];
  let sum = 0;
  let count = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}_bucket{`)) {
      const m = /le="([^"]+)"\}\s+(\S+)/.exec(line);
      if (m) buckets.push([m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])]);
    } else if (line.startsWith(`${name}_sum `)) sum = Number(line.split(' ')[1]);
    else if (line.startsWith(`${name}_count `)) count = Number(line.split(' ')[1]);
  }
  buckets.sort((a, b) => a[0] - b[0]);
  return { buckets, sum, count };
}

/** after - before, bucket by bucket (observations made in between). */
export function diffHistogram(after: Histogram, before: Histogram): Histogram {
  const prev = new Map(before.buckets);
  return {
    buckets: after.buckets.map(([le, c]) => [le, c - (prev.get(le) ?? 0)]),
    sum: after.sum - before.sum,
    count: after.count - before.count,
  };
}

/**
 * histogram_quantile as Prometheus computes it: linear interpolation inside
 * the bucket that holds the q-th observation. Also returns that bucket's
 * upper bound, which is all a histogram really knows.
 */
export function histogramQuantile(h: Histogram, q: number): { value: number; bucketLe: number } | undefined {
  const total = h.buckets.at(-1)?.[1] ?? 0;
  if (total === 0) return undefined;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const [le, c] of h.buckets) {
    if (c >= rank) {
      if (le === Infinity) return { value: prevLe, bucketLe: le };
      const inBucket = c - prevCount;
      const value = inBucket > 0 ? prevLe + ((le - prevLe) * (rank - prevCount)) / inBucket : le;
      return { value, bucketLe: le };
    }
    prevLe = le;
    prevCount = c;
  }
  return undefined;
}
