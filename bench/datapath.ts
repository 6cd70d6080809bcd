// Datapath: connections per second and connect() latency from a client pod to
// the last-programmed service's VIP, for N services of 4 endpoints each,
// through (a) svcmap's socket LB, (b) kube-proxy's iptables shape, (c) its
// nftables shape, and (d) straight to the pod IPs (the floor). Client and
// servers share one CPU; runs of the modes are interleaved (the order rotates
// each round) and conntrack is flushed in the client's namespace before each.
import type { LabPod } from '../lab/index.ts';
import { fmtDuration, type Budget } from './budget.ts';
import { BACKEND_IPS, BACKEND_IPS6, type BenchCluster } from './cluster.ts';
import { NetfilterNs, TimeoutError } from './netfilter.ts';
import { runProgram } from './proc.ts';
import { median, pairedMedianRatio } from './stats.ts';
import { PORT, TARGET_PORT, makeServices, makeServices6 } from './workload.ts';

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
   * the ratio within one round (see vsDirect()).
   */
  vsDirect?: { perConn: number; p50: number; p99: number };
  runs: ClientRun[];
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
}

export interface DatapathOptions {
  sizes: number[];
  reps: number;
  durationMs: number;
  warmupMs: number;
  agentTimeoutMs: number;
  budget: Budget;
  workDir: string;
  log: (s: string) => void;
  /** 6: the IPv6 rows (IPv6-only Services and pods' IPv6 addresses; kube-proxy's rule shapes here are IPv4's, so direct and svcmap only). */
  family?: 4 | 6;
}

export function isSkipped(r: ModeResult | Skipped): r is Skipped {
  return 'skipped' in r;
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
    const point: DatapathPoint = { n, ...(v6 ? { family: 6 as const } : {}), endpointsPerService: pods.length, programming: {}, results: [] };
    const available = new Map<Mode, { ns: LabPod; cgroup: string; ips: string; port: number }>();
    available.set('direct', { ns: c.clientSm, cgroup: c.cgPlain, ips: pods.join(','), port: TARGET_PORT });
    const skipped = new Map<Mode, string>();
    const tag = v6 ? `datapath IPv6 N=${n}` : `datapath N=${n}`;

    o.log(`${tag}: programming svcmap`);
    const sm = await c.programSvcmap(services, o.agentTimeoutMs);
    point.programming.svcmap = { ms: sm.startToSyncMs, note: `agent start to first full sync (file source; sync itself ${fmtDuration(sm.syncMs)})` };
    available.set('svcmap', { ns: c.clientSm, cgroup: c.cgSvcmap, ips: vip, port: PORT });

    for (const [mode, nf, op] of [['iptables', ipt, 'dp-iptables'], ['nftables', nft, 'dp-nftables']] as const) {
      if (v6) {
        skipped.set(mode, 'not run: the bench\'s kube-proxy rule shapes are IPv4 ones');
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
        const ms = mode === 'iptables' ? await nf.iptablesReplace(services, o.budget.hardLimitMs) : await nf.nftFull(services, o.budget.hardLimitMs);
        o.budget.record(op, n, ms);
        point.programming[mode] = { ms, note: mode === 'iptables' ? 'iptables-restore of the whole nat+filter tables (no --noflush), from empty' : 'nft -f, from empty' };
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
      for (const mode of rotated) {
        const t = available.get(mode)!;
        const flushed = await flushConntrack(c, t.ns);
        const out = await runProgram(c.lab, t.ns, c.bins.client, [t.ips, String(t.port), String(o.durationMs), String(o.warmupMs)], {
          cgroup: t.cgroup, cpu: c.cpu, timeoutMs: o.durationMs + o.warmupMs + 60_000,
        });
        const run = { ...(JSON.parse(out) as Omit<ClientRun, 'conntrackFlushed'>), conntrackFlushed: flushed };
        if (run.ok === 0) throw new Error(`${tag} ${mode}: no connection succeeded (${JSON.stringify(run.errors)})`);
        (runs.get(mode) ?? runs.set(mode, []).get(mode)!).push(run);
      }
    }
    const direct = summarize('direct', runs.get('direct')!);
    for (const mode of MODES) {
      const rs = runs.get(mode);
      if (!rs) {
        point.results.push({ mode, skipped: skipped.get(mode) ?? 'not run' });
        continue;
      }
      const s = summarize(mode, rs);
      if (mode !== 'direct') s.vsDirect = vsDirect(direct.runs, rs);
      point.results.push(s);
    }
    for (const r of point.results) {
      o.log(isSkipped(r) ? `  ${r.mode.padEnd(9)} skipped: ${r.skipped}` : `  ${r.mode.padEnd(9)} ${r.connPerSec.toFixed(0).padStart(7)} conn/s  p50 ${r.p50Us.toFixed(1)} µs  p99 ${r.p99Us.toFixed(1)} µs${r.vsDirect ? `  x${r.vsDirect.perConn.toFixed(3)} vs direct` : ''}`);
    }
    points.push(point);
  }
  await ipt.flush();
  await nft.flush();
  return points;
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

/** Ratios to direct, paired by round: runs[i] of every mode ran in round i. */
export function vsDirect(direct: readonly ClientRun[], runs: readonly ClientRun[]): NonNullable<ModeResult['vsDirect']> {
  return {
    perConn: pairedMedianRatio(direct.map((r) => r.connPerSec), runs.map((r) => r.connPerSec)),
    p50: pairedMedianRatio(runs.map((r) => r.connectUs.p50), direct.map((r) => r.connectUs.p50)),
    p99: pairedMedianRatio(runs.map((r) => r.connectUs.p99), direct.map((r) => r.connectUs.p99)),
  };
}

/** Flushes conntrack in the client's namespace; returns how many entries there were (-1: none tracked). */
async function flushConntrack(c: BenchCluster, ns: LabPod): Promise<number> {
  const out = await c.lab.exec(ns, c.bins.ctflush, [], { timeoutMs: 30_000 });
  const r = JSON.parse(out) as { flushed: boolean; before: number; error?: string };
  if (!r.flushed) throw new Error(`conntrack flush in ${ns.name} failed: ${r.error}`);
  return r.before;
}
