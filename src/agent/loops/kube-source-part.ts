// The Kubernetes source as the agent's part: informers for Services,
// EndpointSlices, this node's Node and (for hostPorts) this node's Pods. Loaded (with client-node) only when it
// is the source.
import type { KubeConfig } from '../../sources/kubernetes/client-node.ts';
import { KubernetesSource, type SourceOptions } from '../../sources/kubernetes/source.ts';
import type { Family } from '../../util/family.ts';
import type { Logger } from '../log.ts';
import type { SourceHooks, SourcePart } from './source-part.ts';
import type { SyncStatus } from './sync-status.ts';

export interface KubeSourceHooks extends SourceHooks {
  /** An EndpointSlice came with a new last-change-trigger-time (the latency metric). */
  sliceTrigger(serviceId: string, at: number, family: Family): void;
  /** The API server in use: at start, and after each failover (moved). */
  apiServer(url: string, moved: boolean): void;
}

/**
 * status: its nodeEligible follows the Node (a node being deleted answers 503
 * at /healthz), its apiServer the API server in use. opts: the API servers,
 * the stall bound, and whether this node's Pods are watched (--host-ports).
 */
export function kubeSourcePart(
  kc: KubeConfig,
  nodeName: string,
  hooks: KubeSourceHooks,
  status: SyncStatus,
  log: Logger,
  opts: SourceOptions = {},
): SourcePart {
  const kube = new KubernetesSource(
    kc,
    nodeName,
    {
      changed: () => hooks.changed(),
      informerError: (kind, err, retryMs) => {
        hooks.failed();
        log.warn(
          { informer: kind, err: String((err as Error)?.message ?? err), retryMs },
          'watch failed; the maps keep their state, retrying',
        );
      },
      sliceTrigger: (svc, at, family) => hooks.sliceTrigger(svc, at, family),
      node: (node) => hooks.node(node),
      nodeEligible: (eligible) => {
        if (eligible !== status.health.nodeEligible)
          log.warn({ node: nodeName, eligible }, eligible ? 'node eligible again' : 'node is being deleted: /healthz answers 503');
        status.health.nodeEligible = eligible;
      },
      event: (kind) => hooks.event(kind),
      moved: (move) => {
        log.warn(move, 'the API server stopped answering; moved to the next one, relisting there (the maps keep their state)');
        status.health.apiServer = kube.apiServer;
        hooks.apiServer(move.to, true);
      },
    },
    opts,
  );
  status.health.apiServer = kube.apiServer;
  hooks.apiServer(kube.apiServer.url, false);
  kube.model.setNode({ name: nodeName, addresses: [] });
  return {
    name: 'source',
    source: kube,
    start() {
      kube.start();
      log.info(
        {
          apiServer: kube.apiServer.url,
          ...(opts.apiServers && opts.apiServers.length > 1 ? { apiServers: opts.apiServers } : {}),
          node: nodeName,
        },
        'watching the Kubernetes API',
      );
      void kube.synced.then(() => log.info('informers synced'));
    },
    stop: () => kube.stop(),
  };
}
