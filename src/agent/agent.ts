// svcmap agent: datapath up, then every desired state from the source is
// synced into the maps. On SIGTERM the agent exits and leaves the datapath
// pinned and working; svcmap cleanup removes it.
import type { DesiredState, Problem } from '../model/types.ts';
import { FileSource } from '../sources/file/file-source.ts';
import { MapsAdapter } from '../sync/maps-adapter.ts';
import { Syncer } from '../sync/syncer.ts';
import { toTargets } from '../sync/targets.ts';
import { type DatapathOptions, bringUpDatapath } from './datapath.ts';
import type { Logger } from './log.ts';
import { ProblemReporter } from './problems-log.ts';

export interface AgentConfig extends DatapathOptions {
  manifests: string;
  nodeName?: string;
}

export async function runAgent(cfg: AgentConfig, log: Logger): Promise<{ stop(): void; stopped: Promise<void> }> {
  const dp = bringUpDatapath(cfg, (msg, fields) => log.info(fields ?? {}, msg));
  for (const n of dp.notes) log.warn(n);
  log.info({
    object: dp.objectPath, reusedMaps: dp.reusedMaps, links: dp.links, cgroup: cfg.cgroup, pinDir: cfg.pinDir,
  }, dp.reusedMaps.length ? 'datapath up (reusing pinned maps)' : 'datapath up');

  const syncer = new Syncer(new MapsAdapter(dp.maps));
  log.info({ frontends: syncer.state.frontends.size, backends: syncer.state.backends.size }, 'read current map state');
  const problems = new ProblemReporter(log);

  const apply = (state: DesiredState, found: Problem[]) => {
    problems.report(found);
    try {
      const r = syncer.sync(toTargets(state));
      for (const d of r.deferred) log.error({ frontend: d.id, service: d.label }, `not programmed: ${d.reason}; raise the map size (--max-services / --max-backends)`);
      log.info({ changed: r.changed, ops: r.ops, entries: r.entries, durationMs: Number(r.durationMs.toFixed(3)), frontends: state.frontends.size }, 'sync done');
    } catch (err) {
      log.error({ err }, 'sync failed; the maps were re-read and the next change retries');
    }
  };

  const source = new FileSource({
    dir: cfg.manifests,
    ...(cfg.nodeName ? { nodeName: cfg.nodeName } : {}),
    onError: (err) => log.error({ err }, 'reading manifests failed; keeping the last state'),
  });
  await source.start(apply);
  log.info({ manifests: cfg.manifests }, 'watching manifests');

  let resolveStopped!: () => void;
  const stopped = new Promise<void>((r) => (resolveStopped = r));
  let done = false;
  const stop = () => {
    if (done) return;
    done = true;
    source.stop();
    dp.maps.close();
    dp.object.close(); // pins and links stay: the datapath keeps working
    log.info('agent stopped; datapath left in place (svcmap cleanup removes it)');
    resolveStopped();
  };
  return { stop, stopped };
}
