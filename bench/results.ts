// The shape of a bench run's results (bench/results/<timestamp>.json) and
// the performance targets of DESIGN.md evaluated against them.
import { type AgentTargetInputs, agentTargets } from './agent-targets.ts';
import type { ControlPlaneResult } from './control-plane.ts';
import type { AgentCpResult } from './cp-agent.ts';
import { type DatapathPoint, isSkipped, type ModeResult } from './datapath.ts';
import type { LbResult } from './lb-quality.ts';
import type { MaglevDisruption } from './maglev-disruption.ts';
import type { Machine } from './machine.ts';
import type { SnatResult } from './snat.ts';

export interface BenchResults {
  schema: 'svcmap-bench/1';
  mode: 'full' | 'smoke';
  startedAt: string;
  finishedAt: string;
  durationS: number;
  machine: Machine & { loadavgAtEnd: number };
  config: Record<string, unknown>;
  datapath: DatapathPoint[];
  /** The IPv6 rows: IPv6-only Services, direct vs svcmap (datapath6). */
  datapath6?: DatapathPoint[];
  controlPlane: ControlPlaneResult | undefined;
  lb: LbResult[];
  /** Maglev's disruption when one of 10 backends goes (with the lb part; absent from runs before it). */
  maglev?: MaglevDisruption;
  /** New SNATed flows/s beside MASQUERADE (absent from runs before it, or without --only snat). */
  snat?: SnatResult;
  targets: Target[];
  notes: string[];
}

export interface Target {
  what: string;
  target: string;
  measured: string;
  /** undefined: not measurable in this run (e.g. smoke sizes). */
  met: boolean | undefined;
}

export function isAgentResult(a: AgentCpResult | { n: number; skipped: string }): a is AgentCpResult {
  return !('skipped' in a);
}

export function modeResult(p: DatapathPoint, mode: string): ModeResult | undefined {
  const r = p.results.find((x) => x.mode === mode);
  return r && !isSkipped(r) ? r : undefined;
}

export function evaluateTargets(r: Pick<BenchResults, 'datapath' | 'controlPlane' | 'snat'> & AgentTargetInputs): Target[] {
  const t: Target[] = [];
  const ratios = r.datapath.flatMap((p) => {
    const s = modeResult(p, 'svcmap');
    return s?.vsDirect ? [{ n: p.n, perConn: s.vsDirect.perConn, p50: s.vsDirect.p50 }] : [];
  });
  if (ratios.length) {
    t.push({
      what: 'Datapath: svcmap vs direct to the pod, at every N',
      target: '<= 1.05x',
      measured: ratios.map((x) => `N=${x.n}: ${x.perConn.toFixed(3)}x/conn, p50 ${x.p50.toFixed(3)}x`).join('; '),
      met: ratios.every((x) => x.perConn <= 1.05 && x.p50 <= 1.05),
    });
  }
  const cp = r.controlPlane;
  const agent10k = cp?.agent.filter(isAgentResult).find((a) => a.n === 10_000);
  const engine10k = cp?.engine.find((e) => e.n === 10_000);
  t.push({
    what: `Full sync of 10k services x ${cp?.endpointsPerService ?? 10} endpoints`,
    target: '< 1 s',
    measured: agent10k
      ? `agent "sync done" ${agent10k.fullSyncMs.toFixed(0)} ms (start -> synced ${(agent10k.startToSyncMs / 1000).toFixed(2)} s); engine in-process ${engine10k ? `${engine10k.fullSyncMs.toFixed(0)} ms` : 'n/a'}`
      : 'not measured (N=10k not in this run)',
    met: agent10k ? agent10k.fullSyncMs < 1000 : undefined,
  });
  const stream = cp?.agent.filter(isAgentResult).find((a) => a.stream)?.stream;
  const streamN = cp?.agent.filter(isAgentResult).find((a) => a.stream)?.n;
  t.push({
    what: 'One EndpointSlice change reflected in the maps, p99',
    target: '< 10 ms',
    measured: stream?.p99
      ? `network programming latency p99 ${(stream.p99.value * 1000).toFixed(2)} ms (bucket <= ${(stream.p99.bucketLe * 1000).toFixed(1)} ms), ${stream.changes} changes at ${stream.ratePerSec}/s, N=${streamN}`
      : 'not measured',
    met: stream?.p99 ? stream.p99.bucketLe <= 0.01 : undefined,
  });
  const sm = r.snat?.modes.find((m) => m.mode === 'svcmap');
  const kp = r.snat?.modes.find((m) => m.mode === 'iptables');
  if (r.snat && sm && kp) {
    const sustained = r.snat.durationMs >= 30_000;
    t.push({
      what: 'New SNATed TCP flows to one remote backend through a NodePort, sustained 30 s, 0 failed',
      target: '>= 50k/s',
      measured: `${Math.round(sm.connPerSec).toLocaleString('en-US')}/s, ${sm.failed} failed (kube-proxy MASQUERADE ${Math.round(kp.connPerSec).toLocaleString('en-US')}/s, ${kp.failed} failed; ${r.snat.processes} clients, ${r.snat.durationMs / 1000} s x ${r.snat.reps})`,
      met: sustained ? sm.connPerSec >= 50_000 && sm.failed === 0 : undefined,
    });
  }
  t.push(...agentTargets(r));
  return t;
}
