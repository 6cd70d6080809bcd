// Control plane, for N services x 10 endpoints at each N: the sync engine
// in-process against real maps, the real agent through the Kubernetes
// source, and kube-proxy's iptables and nftables shapes.
import { join } from 'node:path';
import type { Lab } from '../lab/index.ts';
import type { Budget } from './budget.ts';
import { type AgentCpResult, runAgentControlPlane } from './cp-agent.ts';
import { type NetfilterCpPoint, runNetfilterControlPlane } from './cp-netfilter.ts';
import { type EngineResult, runEngine } from './engine.ts';
import { makeServices } from './workload.ts';

export interface ControlPlaneResult {
  endpointsPerService: number;
  engine: EngineResult[];
  agent: Array<AgentCpResult | { n: number; skipped: string }>;
  netfilter: NetfilterCpPoint[];
}

export interface ControlPlaneOptions {
  lab: Lab;
  sizes: number[];
  endpointsPerService: number;
  engineReps: { partial: number; full: number };
  agentChangeReps: number;
  netfilterChangeReps: number;
  /** The N at which the stream of changes runs, and its shape. */
  stream: { n: number; changes: number; ratePerSec: number };
  agentTimeoutMs: number;
  budget: Budget;
  workDir: string;
  pinRoot: string;
  log: (s: string) => void;
}

export async function runControlPlane(o: ControlPlaneOptions): Promise<ControlPlaneResult> {
  const cgroup = await o.lab.cgroup('cp-agent');
  const iptNs = await o.lab.netns('cp-iptables');
  const nftNs = await o.lab.netns('cp-nftables');
  const out: ControlPlaneResult = { endpointsPerService: o.endpointsPerService, engine: [], agent: [], netfilter: [] };
  for (const n of o.sizes) {
    const services = makeServices(n, o.endpointsPerService);
    o.log(`control plane N=${n} x ${o.endpointsPerService}: sync engine in-process`);
    const e = runEngine({
      pinDir: join(o.pinRoot, `engine-${n}`),
      services,
      endpointsPerService: o.endpointsPerService,
      partialReps: o.engineReps.partial,
      fullReps: o.engineReps.full,
    });
    o.log(
      `  engine: full sync ${e.fullSyncMs.toFixed(1)} ms, one change ${e.changePartialMs.p50.toFixed(3)} ms (partial) / ${e.changeFullMs.p50.toFixed(1)} ms (full plan)`,
    );
    out.engine.push(e);

    o.log(`control plane N=${n}: agent with the Kubernetes source`);
    try {
      const a = await runAgentControlPlane({
        services,
        endpointsPerService: o.endpointsPerService,
        cgroup,
        pinDir: join(o.pinRoot, `agent-${n}`),
        workDir: o.workDir,
        changeReps: o.agentChangeReps,
        timeoutMs: o.agentTimeoutMs,
        log: o.log,
        ...(n === o.stream.n ? { stream: { changes: o.stream.changes, ratePerSec: o.stream.ratePerSec } } : {}),
      });
      o.log(
        `  agent: start->synced ${a.startToSyncMs.toFixed(0)} ms, sync ${a.fullSyncMs.toFixed(1)} ms, RSS ${(a.rssAfterSync / 2 ** 20).toFixed(0)} MiB, one change p50 ${a.change.wallP50.toFixed(2)} ms`,
      );
      out.agent.push(a);
    } catch (err) {
      // A failing agent at one size is a result too (e.g. too slow to list 100k services); the rest goes on.
      const msg = (err as Error).message.split('\n')[0] ?? String(err);
      o.log(`  agent failed at N=${n}: ${msg}`);
      out.agent.push({ n, skipped: `failed: ${msg}` });
    }

    out.netfilter.push(
      await runNetfilterControlPlane(
        { lab: o.lab, iptNs, nftNs, workDir: o.workDir, budget: o.budget, changeReps: o.netfilterChangeReps, log: o.log },
        services,
        o.endpointsPerService,
      ),
    );
  }
  return out;
}
