// Datapath: connections per second and connect() latency from a client pod to
// the last-programmed service's VIP, for N services of 4 endpoints each,
// through (a) svcmap's socket LB, (b) kube-proxy's iptables shape, (c) its
// nftables shape, and (d) straight to the pod IPs (the floor). Client and
// servers share one CPU; runs of the modes are interleaved (the order rotates
// each round) and conntrack is flushed in the client's namespace before each.
// At the sizes asked for, one service per other load-balancing algorithm
// (svcmap.io/lb-algorithm, on the same 4 pods) among the N: the datapath cost
// of each, as a ratio to random, each run paired with a run of random.
import type { LabPod } from '../lab/index.ts';
import { BpfStats } from './bpf-stats.ts';
import { fmtDuration, type Budget } from './budget.ts';
import { BACKEND_IPS, BACKEND_IPS6, type BenchCluster } from './cluster.ts';
import { NetfilterNs, TimeoutError } from './netfilter.ts';
import { runProgram } from './proc.ts';
import { median, pairedMedianRatio } from './stats.ts';
import { type BenchService, PORT, TARGET_PORT, ipNum, ipStr, makeServices, makeServices6 } from './workload.ts';

export const MODES = ['direct', 'svcmap', 'iptables', 'nftables'] as const;
export type Mode = (typeof MODES)[number];

export interface ClientRun {
  ok: number;
  failed: number;
  errors: Record<string, number>;
  seconds: number;
  connPerSec: number;
  connectUs: { mean: number; p50: number; p90: number; p99: number; p999: number; max: number };
  /** Conntrack entries flushed before the run (-1: conntrack not in use in that namespace). */
  conntrackFlushed: number;
}

export interface ModeResult {
  mode: Mode;
  /** Medians over the runs. */
  connPerSec: number;
  p50Us: number;
  p99Us: number;
  /**
   * Cost relative to direct: time per connection (direct conn/s / this
   * conn/s), p50 and p99 latency ratios, each the median over the rounds of
   * the ratio within one round (see pairedCost()).
   */
  vsDirect?: { perConn: number; p50: number; p99: number };
  runs: ClientRun[];
}

/** One algorithm's service, each run paired with one of random's (the svcmap mode's service, the node default). */
export interface AlgorithmResult {
  algorithm: string;
  vip: string;
  connPerSec: number;
  p50Us: number;
  p99Us: number;
  /** Time per connection and p50/p99 relative to random, each the median of the ratios within a pair of runs. */
  vsRandom: { perConn: number; p50: number; p99: number };
  runs: ClientRun[];
  /** The random runs it was paired with, in order. */
  randomRuns: ClientRun[];
  /**
   * The socket LB programs' own run time per call (the kernel's BPF
   * statistics, bench/bpfstats.c): medians over the runs, this algorithm's
   * and random's. Steadier than the rates (a busy machine adds less to a
   * program's few microseconds than to a connection's tens), and it says
   * where the cost is; it leaves out what the kernel does around the
   * programs (freeing a socket's storage, say).
   */
  bpfNs?: { connect4: number; sockRelease: number; randomConnect4: number; randomSockRelease: number };
}

export interface Skipped {
  mode: Mode;
  skipped: string;
}

export interface DatapathPoint {
  n: number;
  /** 6: IPv6-only Services, reached over IPv6 (direct and svcmap only); absent: IPv4. */
  family?: 6;
  endpointsPerService: number;
  /** How long each datapath took to be programmed with the N services (not a like-for-like comparison: see the control plane section). */
  programming: Partial<Record<Mode, { ms: number; note: string }>>;
  results: Array<ModeResult | Skipped>;
  /** The other algorithms beside random (only at DatapathOptions.algorithms.sizes). */
  algorithms?: AlgorithmResult[];
}

export interface DatapathOptions {
  sizes: number[];
  reps: number;
  durationMs: number;
  warmupMs: number;
  agentTimeoutMs: number;
  budget: Budget;
  /** Which algorithms (besides random, the svcmap mode) to measure, at which N, in how many pairs of runs each. */
  algorithms?: { names: readonly string[]; sizes: readonly number[]; reps: number };
  workDir: string;
  log: (s: string) => void;
  /** 6: the IPv6 rows (IPv6-only Services and pods' IPv6 addresses; kube-proxy's rule shapes here are IPv4's, so direct and svcmap only). */
  family?: 4 | 6;
}

export function isSkipped(r: ModeResult | Skipped): r is Skipped {
  return 'skipped' in r;
}

/** Where the algorithm services live: 10.110.0.x, inside the service CIDR and apart from vipOf()'s range. */
const ALG_VIP_BASE = ipNum('10.110.0.1');

/** One service per algorithm, on the measured pods (the node default, random, is the svcmap mode's own). */
export function algorithmServices(names: readonly string[], firstIndex: number): BenchService[] {
  return names.map((algorithm, k) => ({
    index: firstIndex + k,
    name: `alg-${algorithm}`,
    vip: ipStr(ALG_VIP_BASE + k),
    endpoints: [...BACKEND_IPS],
    annotations: { 'svcmap.io/lb-algorithm': algorithm },
  }));
}

export async function runDatapath(c: BenchCluster, o: DatapathOptions): Promise<DatapathPoint[]> {
  const ipt = new NetfilterNs(c.lab, c.clientIpt, o.workDir);
  const nft = new NetfilterNs(c.lab, c.clientNft, o.workDir);
  const points: DatapathPoint[] = [];
  for (const n of o.sizes) {
    const v6 = o.family === 6;
    const pods = v6 ? BACKEND_IPS6 : BACKEND_IPS;
    const services = v6 ? makeServices6(n, pods.length, pods) : makeServices(n, pods.length, pods);
    const vip = services.at(-1)!.vip;
    const point: DatapathPoint = {
      n,
      ...(v6 ? { family: 6 as const } : {}),
      endpointsPerService: pods.length,
      programming: {},
      results: [],
    };
    const available = new Map<Mode, { ns: LabPod; cgroup: string; ips: string; port: number }>();
    available.set('direct', { ns: c.clientSm, cgroup: c.cgPlain, ips: pods.join(','), port: TARGET_PORT });
    const skipped = new Map<Mode, string>();
    const tag = v6 ? `datapath IPv6 N=${n}` : `datapath N=${n}`;

    // The other algorithms' services are IPv4 ones (their cost is measured beside random over IPv4).
    const algs = !v6 && o.algorithms && o.algorithms.sizes.includes(n) ? algorithmServices(o.algorithms.names, n) : [];
    o.log(`${tag}: programming svcmap${algs.length ? ` (and ${algs.length} services of the other algorithms)` : ''}`);
    const sm = await c.programSvcmap([...services, ...algs], o.agentTimeoutMs);
    point.programming.svcmap = {
      ms: sm.startToSyncMs,
      note: `agent start to first full sync (file source; sync itself ${fmtDuration(sm.syncMs)})`,
    };
    available.set('svcmap', { ns: c.clientSm, cgroup: c.cgSvcmap, ips: vip, port: PORT });

    for (const [mode, nf, op] of [
      ['iptables', ipt, 'dp-iptables'],
      ['nftables', nft, 'dp-nftables'],
    ] as const) {
      if (v6) {
        skipped.set(mode, "not run: the bench's kube-proxy rule shapes are IPv4 ones");
        continue;
      }
      await nf.flush();
      const a = o.budget.attempt(op, n);
      if (!a.run) {
        skipped.set(mode, `not loaded: ${a.reason}`);
        o.log(`datapath N=${n}: ${mode} skipped (${a.reason})`);
        continue;
      }
      o.log(`datapath N=${n}: loading ${mode} rules${a.predictedMs ? ` (predicted ${fmtDuration(a.predictedMs)})` : ''}`);
      try {
        const ms =
          mode === 'iptables' ? await nf.iptablesReplace(services, o.budget.hardLimitMs) : await nf.nftFull(services, o.budget.hardLimitMs);
        o.budget.record(op, n, ms);
        point.programming[mode] = {
          ms,
          note: mode === 'iptables' ? 'iptables-restore of the whole nat+filter tables (no --noflush), from empty' : 'nft -f, from empty',
        };
        available.set(mode, { ns: mode === 'iptables' ? c.clientIpt : c.clientNft, cgroup: c.cgPlain, ips: vip, port: PORT });
      } catch (err) {
        if (!(err instanceof TimeoutError)) throw err;
        o.budget.kill(op, n);
        skipped.set(mode, `not loaded: did not finish within ${fmtDuration(o.budget.hardLimitMs)}`);
        await nf.flush();
      }
    }

    const runs = new Map<Mode, ClientRun[]>();
    const order = MODES.filter((m) => available.has(m));
    for (let r = 0; r < o.reps; r++) {
      const rotated = [...order.slice(r % order.length), ...order.slice(0, r % order.length)];
      for (const mode of rotated)
        (runs.get(mode) ?? runs.set(mode, []).get(mode)!).push(await runClient(c, o, available.get(mode)!, `${tag} ${mode}`));
    }
    const direct = summarize('direct', runs.get('direct')!);
    for (const mode of MODES) {
      const rs = runs.get(mode);
      if (!rs) {
        point.results.push({ mode, skipped: skipped.get(mode) ?? 'not run' });
        continue;
      }
      const s = summarize(mode, rs);
      if (mode !== 'direct') s.vsDirect = pairedCost(direct.runs, rs);
      point.results.push(s);
    }
    for (const r of point.results) {
      o.log(
        isSkipped(r)
          ? `  ${r.mode.padEnd(9)} skipped: ${r.skipped}`
          : `  ${r.mode.padEnd(9)} ${r.connPerSec.toFixed(0).padStart(7)} conn/s  p50 ${r.p50Us.toFixed(1)} µs  p99 ${r.p99Us.toFixed(1)} µs${r.vsDirect ? `  x${r.vsDirect.perConn.toFixed(3)} vs direct` : ''}`,
      );
    }
    if (algs.length) {
      o.log(`datapath N=${n}: ${algs.length} algorithms, each paired with random`);
      point.algorithms = await algorithmCosts(c, o, n, available.get('svcmap')!, algs);
      for (const a of point.algorithms)
        o.log(
          `  ${a.algorithm.padEnd(9)} ${a.connPerSec.toFixed(0).padStart(7)} conn/s  p50 ${a.p50Us.toFixed(1)} µs  x${a.vsRandom.perConn.toFixed(3)} vs random`,
        );
    }
    points.push(point);
  }
  await ipt.flush();
  await nft.flush();
  return points;
}

interface Target {
  ns: LabPod;
  cgroup: string;
  ips: string;
  port: number;
}

/** One client run against t, conntrack flushed first. */
async function runClient(c: BenchCluster, o: DatapathOptions, t: Target, what: string): Promise<ClientRun> {
  const flushed = await flushConntrack(c, t.ns);
  const out = await runProgram(c.lab, t.ns, c.bins.client, [t.ips, String(t.port), String(o.durationMs), String(o.warmupMs)], {
    cgroup: t.cgroup,
    cpu: c.cpu,
    timeoutMs: o.durationMs + o.warmupMs + 60_000,
  });
  const run = { ...(JSON.parse(out) as Omit<ClientRun, 'conntrackFlushed'>), conntrackFlushed: flushed };
  if (run.ok === 0) throw new Error(`${what}: no connection succeeded (${JSON.stringify(run.errors)})`);
  return run;
}

/**
 * Each algorithm's service run right beside a run of random (the measured
 * service of the N, the node default), the pair's order alternating: a
 * ratio within one pair is two runs a second apart, tighter than a round of
 * every mode (this VM's rates jump between levels for seconds at a time).
 */
async function algorithmCosts(
  c: BenchCluster,
  o: DatapathOptions,
  n: number,
  random: Target,
  algs: readonly BenchService[],
): Promise<AlgorithmResult[]> {
  type Side = { runs: ClientRun[]; ns: Array<{ connect4: number; sockRelease: number }> };
  const pairs = algs.map(() => ({ random: { runs: [], ns: [] } as Side, alg: { runs: [], ns: [] } as Side }));
  const stats = await BpfStats.start<ProgTotals>(c.bins.bpfstats, [c.cgSvcmap]);
  const measure = async (side: Side, t: Target, what: string) => {
    const before = await stats?.sample();
    side.runs.push(await runClient(c, o, t, what));
    const after = await stats?.sample();
    if (before && after) side.ns.push(perCall(before, after));
  };
  try {
    for (let r = 0; r < o.algorithms!.reps; r++) {
      for (let j = 0; j < algs.length; j++) {
        const k = (j + r) % algs.length;
        const a = algs[k]!;
        const target = { ...random, ips: a.vip };
        const what = `N=${n} ${a.name}`;
        if ((r + j) % 2 === 0) {
          await measure(pairs[k]!.random, random, what);
          await measure(pairs[k]!.alg, target, what);
        } else {
          await measure(pairs[k]!.alg, target, what);
          await measure(pairs[k]!.random, random, what);
        }
      }
    }
  } finally {
    stats?.stop();
  }
  return algs.map((a, k) => {
    const { random: rnd, alg } = pairs[k]!;
    const s = summarize('svcmap', alg.runs);
    const ns = (side: Side, f: 'connect4' | 'sockRelease') => median(side.ns.map((x) => x[f]));
    return {
      algorithm: a.annotations!['svcmap.io/lb-algorithm']!,
      vip: a.vip,
      connPerSec: s.connPerSec,
      p50Us: s.p50Us,
      p99Us: s.p99Us,
      vsRandom: pairedCost(rnd.runs, alg.runs),
      runs: alg.runs,
      randomRuns: rnd.runs,
      ...(alg.ns.length
        ? {
            bpfNs: {
              connect4: ns(alg, 'connect4'),
              sockRelease: ns(alg, 'sockRelease'),
              randomConnect4: ns(rnd, 'connect4'),
              randomSockRelease: ns(rnd, 'sockRelease'),
            },
          }
        : {}),
    };
  });
}

interface ProgTotals {
  connect4: { ns: number; cnt: number };
  sockRelease: { ns: number; cnt: number };
}

function perCall(a: ProgTotals, b: ProgTotals): { connect4: number; sockRelease: number } {
  const one = (x: ProgTotals['connect4'], y: ProgTotals['connect4']) => (y.ns - x.ns) / Math.max(1, y.cnt - x.cnt);
  return { connect4: one(a.connect4, b.connect4), sockRelease: one(a.sockRelease, b.sockRelease) };
}

function summarize(mode: Mode, runs: ClientRun[]): ModeResult {
  return {
    mode,
    connPerSec: median(runs.map((r) => r.connPerSec)),
    p50Us: median(runs.map((r) => r.connectUs.p50)),
    p99Us: median(runs.map((r) => r.connectUs.p99)),
    runs,
  };
}

/** Cost relative to `base` (direct, or random), paired by round: runs[i] of every mode ran in round i. */
export function pairedCost(base: readonly ClientRun[], runs: readonly ClientRun[]): NonNullable<ModeResult['vsDirect']> {
  return {
    perConn: pairedMedianRatio(
      base.map((r) => r.connPerSec),
      runs.map((r) => r.connPerSec),
    ),
    p50: pairedMedianRatio(
      runs.map((r) => r.connectUs.p50),
      base.map((r) => r.connectUs.p50),
    ),
    p99: pairedMedianRatio(
      runs.map((r) => r.connectUs.p99),
      base.map((r) => r.connectUs.p99),
    ),
  };
}

/** Flushes conntrack in the client's namespace; returns how many entries there were (-1: none tracked). */
async function flushConntrack(c: BenchCluster, ns: LabPod): Promise<number> {
  const out = await c.lab.exec(ns, c.bins.ctflush, [], { timeoutMs: 30_000 });
  const r = JSON.parse(out) as { flushed: boolean; before: number; error?: string };
  if (!r.flushed) throw new Error(`conntrack flush in ${ns.name} failed: ${r.error}`);
  return r.before;
}
