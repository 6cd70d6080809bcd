// The file source through the real agent: N services (x E endpoints) in a
// manifest directory (JSON Lists of 1000 services each; or YAML, one file
// holding them all as a kind: List, or a file per service: bench/manifests.ts),
// `svcmap agent --manifests DIR` on a cgroup of the bench's own. Measures
// spawn -> first full sync, the agent's own manifests -> synced (from its
// "datapath up" log line, when it starts reading, to the first full "sync
// done"), and one changed file: one service's endpoint changed in its file
// (rewritten atomically: temp file + rename, as editors do) until the agent
// logs the sync that carries it (wall time seen by the bench, what kind of
// sync it was, and the sync's own duration).
import { cleanupPins } from '../src/cli/cleanup.ts';
import type { AgentProcess } from '../lab/agent-process.ts';
import { registerTeardown, unregisterTeardown } from '../lab/index.ts';
import { isSyncDone, memoryOf, settledRss, startAgent, stopAgent } from './agent.ts';
import { agentArgs } from './cp-agent.ts';
import { type ManifestLayout, rewriteServiceFile, writeManifestDir } from './manifests.ts';
import { median, percentile } from './stats.ts';
import { type BenchService, withChangedEndpoint } from './workload.ts';

export interface FileSourceResult {
  n: number;
  /** How the manifests lie (absent in runs before YAML was measured: json). */
  layout?: ManifestLayout;
  endpointsPerService: number;
  files: number;
  /** Agent spawn -> first full "sync done". */
  startToSyncMs: number;
  /** The agent's "datapath up" (it starts reading the manifests) -> first full "sync done", by its log's timestamps. */
  manifestsToSyncMs: number;
  fullSyncMs: number;
  rssAfterSync: number;
  /** One changed file (the file holding one changed service, rewritten whole) -> the agent's next "sync done". */
  change: { wallP50: number; wallP99: number; syncP50: number; syncP99: number; partial: number; reps: number };
}

export interface FileSourceOptions {
  services: readonly BenchService[];
  endpointsPerService: number;
  layout: ManifestLayout;
  dir: string;
  cgroup: string;
  pinDir: string;
  changeReps: number;
  timeoutMs: number;
  log: (s: string) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runFileSource(o: FileSourceOptions): Promise<FileSourceResult> {
  const n = o.services.length;
  const files = writeManifestDir(o.dir, o.services, o.layout);
  let agent: AgentProcess | undefined;
  const teardown = { emergency: () => agent?.kill('SIGKILL') };
  registerTeardown(teardown);
  try {
    const started = await startAgent(
      ['--manifests', o.dir, ...agentArgs(o.cgroup, o.pinDir, n, o.endpointsPerService)],
      n,
      o.timeoutMs,
      (a) => {
        agent = a;
      },
    );
    const running = started.agent;
    const up = running.lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('datapath up'));
    const manifestsToSyncMs = Number(started.firstSync.time) - Number(up?.time);
    const rssAfterSync = await settledRss(started);
    await sleep(500); // the watcher's own burst after the start, if any, is over

    const current = [...o.services];
    let changeNo = 3_000_000;
    const wall: number[] = [];
    const sync: number[] = [];
    let partial = 0;
    for (let r = 0; r < o.changeReps; r++) {
      const i = (r * 7919) % n;
      const next = withChangedEndpoint(current[i]!, changeNo++);
      current[i] = next;
      const from = running.mark();
      const t0 = performance.now();
      rewriteServiceFile(o.dir, current, next, o.layout);
      const line = await running.waitFor((l) => isSyncDone(l), { from, timeoutMs: 60_000, what: 'the sync of a changed file' });
      wall.push(performance.now() - t0);
      sync.push(Number(line.durationMs));
      if (line.full === false) partial++;
      await sleep(200);
    }
    o.log(
      `file source N=${n} (${o.layout}): start -> synced ${started.startToSyncMs.toFixed(0)} ms (manifests -> synced ${manifestsToSyncMs.toFixed(0)} ms), one changed file -> sync p50 ${median(wall).toFixed(1)} ms`,
    );
    return {
      n,
      layout: o.layout,
      endpointsPerService: o.endpointsPerService,
      files,
      startToSyncMs: started.startToSyncMs,
      manifestsToSyncMs,
      fullSyncMs: Number(started.firstSync.durationMs),
      rssAfterSync: rssAfterSync || memoryOf(started.pid).rss,
      change: {
        wallP50: median(wall),
        wallP99: percentile(wall, 0.99),
        syncP50: median(sync),
        syncP99: percentile(sync, 0.99),
        partial,
        reps: wall.length,
      },
    };
  } finally {
    await stopAgent(agent);
    unregisterTeardown(teardown);
    cleanupPins(o.pinDir);
  }
}

const ms = (x: number) => (x >= 1000 ? `${(x / 1000).toFixed(2)} s` : `${x.toFixed(x < 10 ? 2 : 0)} ms`);
const mib = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;

const LAYOUT_NAMES: Record<ManifestLayout, string> = {
  json: 'JSON, Lists of 1000',
  'yaml-one-file': 'YAML, one kind: List file',
  'yaml-file-each': 'YAML, a file per service',
};

export function fileSourceTable(rs: readonly FileSourceResult[]): string {
  const rows = rs.map(
    (r) =>
      `| ${r.n} x ${r.endpointsPerService} | ${LAYOUT_NAMES[r.layout ?? 'json']} (${r.files} files) | ${ms(r.startToSyncMs)} | ${ms(r.manifestsToSyncMs)} | ${ms(r.fullSyncMs)} | ${mib(r.rssAfterSync)} | ${ms(r.change.wallP50)} / ${ms(r.change.wallP99)} | ${ms(r.change.syncP50)} | ${r.change.partial}/${r.change.reps} |`,
  );
  return [
    '| services | manifests | spawn -> synced | manifests -> synced (target <= 1 s at 10k) | first full sync | RSS after reading | one changed file -> synced p50 / p99 | that sync | partial syncs |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}
