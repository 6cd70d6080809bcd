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
import { type ForwardingResult, isFwdSkipped } from './forwarding.ts';

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
  /** Forwarded packets/s and CPU per packet beside kube-proxy (absent from runs before it, or without --only forwarding). */
  forwarding?: ForwardingResult;
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

export function evaluateTargets(r: Pick<BenchResults, 'datapath' | 'controlPlane' | 'snat' | 'forwarding'> & AgentTargetInputs): Target[] {
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
  if (r.snat && sm && kp) {
    t.push({
      what: "New SNATed flows per second, svcmap over kube-proxy's MASQUERADE (same run, paired rounds)",
      target: '>= 1.2x',
      measured: `${r.snat.svcmapVsIptables.toFixed(2)}x`,
      met: r.snat.durationMs >= 30_000 ? r.snat.svcmapVsIptables >= 1.2 : undefined,
    });
  }
  t.push(...forwardingTargets(r.forwarding));
  t.push(...agentTargets(r));
  return t;
}

/** The forwarding part's targets (issue 23): packets per core beside kube-proxy nftables, XDP's CPU per packet beside plain routing. */
function forwardingTargets(f: ForwardingResult | undefined): Target[] {
  if (!f) return [];
  // Judged on full runs only: the smoke run's 0.3 s rounds say nothing about rates.
  const judged = f.durationMs >= 1000;
  const row = (name: string) => {
    const x = f.rows.find((y) => y.row === name);
    return x && !isFwdSkipped(x) ? x : undefined;
  };
  const why = (name: string) => {
    const x = f.rows.find((y) => y.row === name);
    return x && isFwdSkipped(x) ? x.skipped : 'not run';
  };
  const nft = row('kube-proxy-nftables');
  const perCore = (x: { perCorePps: number } | undefined) => (x ? `${Math.round(x.perCorePps).toLocaleString('en-US')} pps/core` : 'n/a');
  const out: Target[] = [];
  const tc = row('svcmap-tc');
  out.push({
    what: 'Forwarded UDP packets per core through a NodePort (remote backend, DNAT + SNAT), svcmap tc over kube-proxy nftables',
    target: '>= 1.5x',
    measured:
      f.ratios.tcVsNftables !== undefined
        ? `${f.ratios.tcVsNftables.toFixed(2)}x (tc ${perCore(tc)}, nftables ${perCore(nft)})`
        : `not measured (${!tc ? why('svcmap-tc') : why('kube-proxy-nftables')})`,
    met: judged && f.ratios.tcVsNftables !== undefined ? f.ratios.tcVsNftables >= 1.5 : undefined,
  });
  const xdp = row('svcmap-xdp');
  out.push({
    what: 'Forwarded UDP packets per core through a NodePort, svcmap XDP over kube-proxy nftables',
    target: '>= 4x',
    measured:
      f.ratios.xdpVsNftables !== undefined
        ? `${f.ratios.xdpVsNftables.toFixed(2)}x (XDP ${perCore(xdp)}, nftables ${perCore(nft)})`
        : `not measured (${!xdp ? why('svcmap-xdp') : why('kube-proxy-nftables')})`,
    met: judged && f.ratios.xdpVsNftables !== undefined ? f.ratios.xdpVsNftables >= 4 : undefined,
  });
  out.push({
    what: "Node CPU per forwarded packet, svcmap XDP over plain routing's (no Service)",
    target: '<= 1.3x',
    measured:
      f.ratios.xdpCpuVsRouting !== undefined
        ? `${f.ratios.xdpCpuVsRouting.toFixed(2)}x (XDP ${Math.round(xdp?.nsPerPacket ?? 0)} ns, routing ${Math.round(row('routing')?.nsPerPacket ?? 0)} ns)`
        : `not measured (${why('svcmap-xdp')})`,
    met: judged && f.ratios.xdpCpuVsRouting !== undefined ? f.ratios.xdpCpuVsRouting <= 1.3 : undefined,
  });
  return out;
}
