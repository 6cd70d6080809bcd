// The source as the agent's last part: it feeds the model that the sync
// loop reads, so it starts once everything that acts on its changes is up.
// Each kind of source has its part: the file source's here, the Kubernetes
// source's in kube-source-part.ts (loaded only with that source).
import type { NodeInfo } from '../../model/types.ts';
import { FileSource, MANIFEST_READ } from '../../sources/file/file-source.ts';
import type { Component } from '../components.ts';
import type { Logger } from '../log.ts';
import type { ModelSource } from './sync-loop.ts';

/** Where a source part sends what it learns. */
export interface SourceHooks {
  /** The model changed: run a sync soon. */
  changed(): void;
  /** A Service or EndpointSlice event arrived (kube-proxy's event counters). */
  event(kind: 'Service' | 'EndpointSlice'): void;
  /** This node's Node, as the source describes it (its addresses pick the tc devices). */
  node(node: NodeInfo | undefined): void;
  /** Reading failed; the source keeps its last state and retries (counted as a source error). */
  failed(): void;
}

/** A source, as a part: the model the sync loop reads. */
export interface SourcePart extends Component {
  readonly source: ModelSource;
}

/** The file source: a directory of manifests, read at start and followed. */
export function fileSourcePart(dir: string, nodeName: string | undefined, hooks: SourceHooks, log: Logger): SourcePart {
  const files = new FileSource({
    dir,
    ...(nodeName ? { nodeName } : {}),
    changed: () => hooks.changed(),
    event: (kind) => hooks.event(kind),
    onNode: (node) => hooks.node(node),
    // Debug: a test that writes a file waits for this, then for the sync after it.
    onRead: (file) => log.debug({ file }, MANIFEST_READ),
    onError: (err) => {
      hooks.failed();
      log.error({ err }, 'reading manifests failed; keeping the last state');
    },
  });
  return {
    name: 'source',
    source: files,
    async start() {
      await files.start();
      log.info({ manifests: dir }, 'watching manifests');
    },
    stop: () => files.stop(),
  };
}
