// The control plane of kube-proxy's two shapes, timed as kube-proxy runs
// them, in bare lab namespaces of their own:
//  - iptables: the first sync from empty (`iptables-restore --noflush` of
//    every KUBE-* chain, after the one-time jumps), a replace of the whole
//    tables (no --noflush; the fastest way in, as a lower bound), and one
//    endpoint change as a full resync (every chain rewritten, the stale
//    KUBE-SEP deleted: kube-proxy before 1.27, and its periodic resync since)
//    and as a partial restore (kube-proxy >= 1.27: KUBE-SERVICES in full plus
//    the changed service's chains).
//  - nftables: the first sync (`nft -f` of the table) and one endpoint change
//    as the delta transaction kube-proxy's nftables mode sends.
// Every operation goes through the budget: predicted over it -> skipped.
import type { Lab, LabNs } from '../lab/index.ts';
import { type Budget, fmtDuration } from './budget.ts';
import { iptablesFull, iptablesPartial, iptablesRuleCount, staleSepChains } from './iptables.ts';
import { NetfilterNs, TimeoutError } from './netfilter.ts';
import { nftDelta, nftObjectCount } from './nftables.ts';
import { median } from './stats.ts';
import { type BenchService, withChangedEndpoint } from './workload.ts';

export type Op = { ms: number; reps: number; all: number[] } | { skipped: string };

export interface NetfilterCpPoint {
  n: number;
  endpointsPerService: number;
  iptables: { rules: number; fullNoflush: Op; fullReplace: Op; changeFull: Op; changePartial: Op };
  nftables: { chains: number; rules: number; full: Op; changeDelta: Op };
}

export function isOp(o: Op): o is { ms: number; reps: number; all: number[] } {
  return 'ms' in o;
}

export interface NetfilterCpOptions {
  lab: Lab;
  iptNs: LabNs;
  nftNs: LabNs;
  workDir: string;
  budget: Budget;
  changeReps: number;
  log: (s: string) => void;
}

/** Runs fn under the budget for op at size n: reps times (median), or skipped. */
async function measure(
  o: NetfilterCpOptions,
  op: string,
  n: number,
  reps: number,
  fn: (rep: number) => Promise<number>,
  gate?: string,
): Promise<Op> {
  if (gate) return { skipped: gate };
  const a = o.budget.attempt(op, n);
  if (!a.run) return { skipped: a.reason ?? 'over budget' };
  o.log(`control plane N=${n}: ${op}${a.predictedMs ? ` (predicted ${fmtDuration(a.predictedMs)})` : ''}`);
  const all: number[] = [];
  try {
    for (let r = 0; r < reps; r++) all.push(await fn(r));
  } catch (err) {
    if (!(err instanceof TimeoutError)) throw err;
    o.budget.kill(op, n);
    return { skipped: `did not finish within ${fmtDuration(o.budget.hardLimitMs)}` };
  }
  const ms = median(all);
  o.budget.record(op, n, ms);
  return { ms, reps: all.length, all };
}

export async function runNetfilterControlPlane(
  o: NetfilterCpOptions,
  services: readonly BenchService[],
  endpointsPerService: number,
): Promise<NetfilterCpPoint> {
  const n = services.length;
  const hard = o.budget.hardLimitMs;
  const ipt = new NetfilterNs(o.lab, o.iptNs, o.workDir);
  const nft = new NetfilterNs(o.lab, o.nftNs, o.workDir);

  // iptables
  await ipt.flush();
  let loaded = false;
  const fullReplace = await measure(o, 'cp-iptables-replace', n, 1, async () => {
    await ipt.flush();
    const ms = await ipt.iptablesReplace(services, hard);
    loaded = true;
    return ms;
  });
  const fullNoflush = await measure(o, 'cp-iptables-noflush', n, 1, async () => {
    await ipt.flush();
    loaded = false;
    await ipt.iptablesSetup();
    const ms = await ipt.iptablesNoflush('full.rules', (out) => iptablesFull(out, services), hard);
    loaded = true;
    return ms;
  });
  if (!loaded && isOp(fullReplace)) {
    await ipt.flush();
    await ipt.iptablesReplace(services, hard);
    loaded = true;
  }
  const current = [...services];
  let changeNo = 3_000_000;
  const notLoaded = loaded ? undefined : 'no table to change (loading it was skipped)';
  const changeFull = await measure(
    o,
    'cp-iptables-change-full',
    n,
    o.changeReps,
    async (r) => {
      const i = (r * 7919) % n;
      const next = withChangedEndpoint(current[i]!, changeNo++);
      const stale = staleSepChains(current[i]!, next);
      current[i] = next;
      return ipt.iptablesNoflush('change-full.rules', (out) => iptablesFull(out, current, stale), hard);
    },
    notLoaded ?? (isOp(fullNoflush) ? undefined : `as slow as the first sync, which was skipped (${fullNoflush.skipped})`),
  );
  const changePartial = await measure(
    o,
    'cp-iptables-change-partial',
    n,
    o.changeReps,
    async (r) => {
      const i = (r * 104729) % n;
      const next = withChangedEndpoint(current[i]!, changeNo++);
      const stale = staleSepChains(current[i]!, next);
      current[i] = next;
      return ipt.iptablesNoflush('change-partial.rules', (out) => iptablesPartial(out, current, new Set([i]), stale), hard);
    },
    notLoaded,
  );
  await ipt.flush();

  // nftables
  await nft.flush();
  let nftLoaded = false;
  const full = await measure(o, 'cp-nftables-full', n, 1, async () => {
    const ms = await nft.nftFull(services, hard);
    nftLoaded = true;
    return ms;
  });
  const nftCurrent = [...services];
  const changeDelta = await measure(
    o,
    'cp-nftables-delta',
    n,
    o.changeReps,
    async (r) => {
      const i = (r * 7919) % n;
      const prev = nftCurrent[i]!;
      const next = withChangedEndpoint(prev, changeNo++);
      nftCurrent[i] = next;
      return nft.nft('delta.nft', (out) => nftDelta(out, prev, next), hard);
    },
    nftLoaded ? undefined : 'no table to change (loading it was skipped)',
  );
  await nft.flush();

  const counts = nftObjectCount(services);
  return {
    n,
    endpointsPerService,
    iptables: { rules: iptablesRuleCount(services), fullNoflush, fullReplace, changeFull, changePartial },
    nftables: { chains: counts.chains, rules: counts.rules, full, changeDelta },
  };
}
