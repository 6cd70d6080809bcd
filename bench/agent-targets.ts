// The agent's memory and control-plane targets (issue 11), evaluated against
// one bench run: what the control part, the file source, the churn soak and
// the real kube-proxy part measured. A row whose part did not run (or ran at
// other sizes) says so and is neither met nor missed.
import { fmtDuration as ms } from './budget.ts';
import type { ChurnResult } from './churn.ts';
import type { ControlPlaneResult } from './control-plane.ts';
import type { AgentCpResult } from './cp-agent.ts';
import type { FileSourceResult } from './cp-files.ts';
import { isRealSkipped, type RealKpResult, type RealProxyResult } from './kube-proxy-real.ts';

export interface AgentTarget {
  what: string;
  target: string;
  measured: string;
  met: boolean | undefined;
}

export interface AgentTargetInputs {
  controlPlane: ControlPlaneResult | undefined;
  fileSource?: readonly FileSourceResult[];
  churn?: ChurnResult;
  realKubeProxy?: RealKpResult;
}

const MiB = 2 ** 20;
const mib = (b: number) => `${(b / MiB).toFixed(0)} MiB`;
const notMeasured = (why: string) => ({ measured: `not measured (${why})`, met: undefined });

export function agentTargets(r: AgentTargetInputs): AgentTarget[] {
  const agents = (r.controlPlane?.agent ?? []).filter((a): a is AgentCpResult => !('skipped' in a));
  const at = (n: number) => agents.find((a) => a.n === n);
  const rss = (a: AgentCpResult) => Math.max(a.rssAfterSync, a.rssAfterChanges);
  const out: AgentTarget[] = [];
  const row = (what: string, target: string, m: { measured: string; met: boolean | undefined }) => out.push({ what, target, ...m });

  const idle = at(1);
  row(
    'Agent RSS idle (synced, 1 service)',
    '<= 80 MiB',
    idle
      ? { measured: `${mib(idle.rssAfterSync)} after the sync, ${mib(idle.rssAfterChanges)} after the changes`, met: rss(idle) <= 80 * MiB }
      : notMeasured('N=1 not in this run'),
  );

  const a10k = at(10_000);
  const kp10k = realRss(r.realKubeProxy, 10_000);
  row(
    'Agent RSS at 10k services x 10, and <= the real kube-proxy at 10k',
    '<= 150 MiB',
    a10k
      ? {
          measured: `${mib(a10k.rssAfterSync)} after the sync, ${mib(a10k.rssAfterChanges)} after the changes; ${kp10k.length ? kp10k.map((k) => `kube-proxy ${k.proxy} ${mib(k.rssAfterSync)}`).join(', ') : 'the real kube-proxy not measured at 10k'}`,
          met: rss(a10k) <= 150 * MiB && kp10k.every((k) => rss(a10k) <= Math.max(k.rssAfterSync, k.rssAfterChanges)),
        }
      : notMeasured('N=10k not in this run'),
  );

  const a100k = at(100_000);
  row(
    'Agent RSS at 100k services x 10',
    '<= 800 MiB',
    a100k
      ? {
          measured: `${mib(a100k.rssAfterSync)} after the sync, ${mib(a100k.rssAfterChanges)} after the changes`,
          met: rss(a100k) <= 800 * MiB,
        }
      : notMeasured('N=100k not in this run'),
  );

  row(
    'Full sync of 10k x 10 (plan + writes, "sync done")',
    '<= 200 ms',
    a10k ? { measured: ms(a10k.fullSyncMs), met: a10k.fullSyncMs <= 200 } : notMeasured('N=10k not in this run'),
  );
  row(
    'Start -> synced at 10k x 10',
    '<= 2 s',
    a10k ? { measured: ms(a10k.startToSyncMs), met: a10k.startToSyncMs <= 2000 } : notMeasured('N=10k not in this run'),
  );

  const change = [a10k, a100k].filter((a): a is AgentCpResult => a !== undefined);
  row(
    'One change end to end (API write -> maps), p99 at 10k / 100k',
    '<= 5 / 10 ms',
    change.length
      ? {
          measured: change
            .map(
              (a) => `N=${a.n / 1000}k ${a.change.wallP99.toFixed(1)} ms (p50 ${a.change.wallP50.toFixed(1)} ms, ${a.change.reps} changes)`,
            )
            .join('; '),
          met: change.length === 2 ? a10k!.change.wallP99 <= 5 && a100k!.change.wallP99 <= 10 : undefined,
        }
      : notMeasured('N=10k and 100k not in this run'),
  );

  // The same change at every size: its cost must follow the change, not the cluster.
  const a1k = at(1000);
  const scaling = [a1k, a10k, a100k].filter((a): a is AgentCpResult => a !== undefined);
  row(
    "One change at 1k / 10k / 100k costs what it costs at 1k (wall p50 / p99 and the partial sync's p99; 100k within 2x of 1k)",
    '100k <= 2x 1k',
    scaling.length
      ? {
          measured: scaling
            .map(
              (a) =>
                `N=${a.n / 1000}k ${a.change.wallP50.toFixed(1)} / ${a.change.wallP99.toFixed(1)} ms (sync p99 ${a.change.syncP99.toFixed(2)} ms)`,
            )
            .join('; '),
          met: a1k && a100k ? a100k.change.wallP99 <= 2 * a1k.change.wallP99 && a100k.change.syncP99 <= 2 * a1k.change.syncP99 : undefined,
        }
      : notMeasured('N=1k, 10k and 100k not in this run'),
  );

  const f10k = r.fileSource?.find((f) => f.n === 10_000 && (f.layout ?? 'json') === 'json');
  row(
    'File source: 10k services from a manifest directory (JSON) to synced',
    '<= 1 s',
    f10k
      ? {
          measured: `${ms(f10k.manifestsToSyncMs)} (one changed file: p50 ${ms(f10k.change.wallP50)}, its sync ${f10k.change.syncP50.toFixed(2)} ms)`,
          met: f10k.manifestsToSyncMs <= 1000,
        }
      : notMeasured('the file source at 10k not in this run'),
  );

  const y10k = r.fileSource?.find((f) => f.n === 10_000 && f.layout === 'yaml-one-file');
  const notY10k = notMeasured('one 10k-Service YAML file not in this run');
  row(
    'One 10k-Service YAML file (a kind: List) -> synced',
    '<= 1 s',
    y10k ? { measured: ms(y10k.manifestsToSyncMs), met: y10k.manifestsToSyncMs <= 1000 } : notY10k,
  );
  row(
    'RSS after reading that file',
    '<= 200 MiB',
    y10k ? { measured: mib(y10k.rssAfterSync), met: y10k.rssAfterSync <= 200 * MiB } : notY10k,
  );

  const c = r.churn;
  row(
    `RSS growth under churn (${c ? `${c.n} services, ${c.ratePerSec} changes/s, ${(c.measuredS / 60).toFixed(0)} min after a ${(c.warmupS / 60).toFixed(0)} min warm-up` : 'the churn soak'})`,
    '< 2%',
    c
      ? {
          measured: `${c.rssGrowthPct.toFixed(1)}% (envelope ${c.rssPeakGrowthPct.toFixed(1)}%)`,
          met: c.rssGrowthPct < c.flatPct && c.rssPeakGrowthPct < c.flatPct,
        }
      : notMeasured('the churn soak not in this run'),
  );
  return out;
}

function realRss(k: RealKpResult | undefined, n: number): RealProxyResult[] {
  const p = k?.points.find((x) => x.n === n);
  return (p?.proxies ?? []).filter((x): x is RealProxyResult => !isRealSkipped(x) && x.proxy !== 'svcmap');
}
