// The Kubernetes source: informers in, an incremental model out. Every object
// is validated once, as it arrives; an invalid one is reported (with its
// namespace/name and field), counted, and kept out of the model, and a
// previous valid version of it is removed, so that what the maps hold always
// comes from objects that passed validation. Informers that fail are
// restarted with backoff; none of this ever empties the model, so a dropped
// watch or an API server outage never shrinks a map. Given several API
// servers, a failure that says the one in use stopped answering moves every
// informer to the next one (api-servers.ts, server-bound.ts), and each
// relists there: the relist drops what was deleted meanwhile.
import type { KubeConfig } from './client-node.ts';
import { IncrementalModel } from '../../model/incremental.ts';
import { nodeEligible, nodeInfoFromNode } from '../../model/node.ts';
import { type EndpointSlice, type Namespace, type Node, type Pod, type Service, identify } from '../../model/schemas.ts';
import { validateObject } from '../../model/validate.ts';
import type { NodeInfo } from '../../model/types.ts';
import { type CachedObject, type InformerKind, type RunningInformer, makeInformers } from './informers.ts';
import { type ApiServerMove, ApiServers } from './api-servers.ts';
import { ServerBound } from './server-bound.ts';
import { ServerFailure } from './server-failure.ts';
import type { Family } from '../../util/family.ts';

export interface SourceEvents {
  /** The model changed; run a sync soon. */
  changed(): void;
  /** An informer failed and will be restarted after `retryMs`. */
  informerError(kind: InformerKind, err: unknown, retryMs: number): void;
  /** This node's Node object changed (its addresses decide NodePorts and the tc devices). */
  node?(node: NodeInfo): void;
  /** Whether this node is eligible (model/node.ts nodeEligible), told on each Node event; a deleted Node is not. */
  nodeEligible?(eligible: boolean): void;
  /** An EndpointSlice / Service event arrived (added, updated or deleted), before anything else is made of it. */
  event?(kind: 'Service' | 'EndpointSlice'): void;
  /** An EndpointSlice arrived with a last-change-trigger-time it did not have before, for the latency metric. */
  sliceTrigger?(serviceId: string, at: number, family: Family): void;
  /** The API server in use stopped answering; every informer moved to the next one and relists there. */
  moved?(move: ApiServerMove): void;
}

export interface SourceOptions {
  /** The API servers to use, in order (default: the kubeconfig's server alone). */
  apiServers?: readonly string[];
  /** How long a watch or a list page may go without a byte before its API server counts as stalled (server-bound.ts). */
  stallMs?: number;
  /** Watch this node's Pods (for their hostPorts and svcmap.io/socket-lb) and the Namespaces (their svcmap.io/socket-lb); needs the node's name. */
  pods?: boolean;
}

// client-node 2.x stops an informer for good on any error but a 410 (a cut
// connection, connection refused, an HTTP error): it is restarted from here.
// A proxy should come back quickly after an API server outage: capped at 8 s.
const BACKOFF_MS = [500, 1000, 2000, 4000, 8000];

export class KubernetesSource {
  readonly model = new IncrementalModel();
  readonly #kc: KubeConfig;
  readonly #nodeName: string | undefined;
  readonly #events: SourceEvents;
  #informers: RunningInformer[] = [];
  readonly #listed = new Set<InformerKind>();
  #syncedResolve!: () => void;
  /** Resolves once every informer has delivered its first full list. */
  readonly synced: Promise<void>;
  #stopped = false;
  readonly #failures = new Map<InformerKind, number>();
  readonly #timers = new Set<NodeJS.Timeout>();
  /** The trigger time each EndpointSlice last came with: a relist re-delivers slices, not the changes behind them. */
  readonly #sliceTriggers = new Map<string, number>();
  readonly #bound: ServerBound;
  /** Moves since an API server last answered: once every server has failed in a row, the moves back off. */
  #movesSinceProgress = 0;

  /** This node's Pods are watched (for their hostPorts). */
  readonly #pods: boolean;

  constructor(kc: KubeConfig, nodeName: string | undefined, events: SourceEvents, opts: SourceOptions = {}) {
    this.#kc = kc;
    this.#nodeName = nodeName;
    this.#pods = opts.pods ?? false;
    this.#events = events;
    this.synced = new Promise((r) => (this.#syncedResolve = r));
    const servers = new ApiServers(kc, opts.apiServers ?? [kc.getCurrentCluster()?.server ?? '']);
    this.#bound = new ServerBound(kc, servers, opts.stallMs);
  }

  /** The API server in use, and how many times the source has moved to another. */
  get apiServer(): { url: string; failovers: number } {
    return { url: this.#bound.servers.current, failovers: this.#bound.servers.failovers };
  }

  get isSynced(): boolean {
    return this.#listed.size === this.#informers.length && this.#informers.length > 0;
  }

  start(): void {
    this.#informers = makeInformers(
      this.#kc,
      this.#nodeName,
      {
        upsert: (kind, raw) => this.#upsert(kind, raw),
        remove: (kind, raw) => this.#remove(kind, raw),
        listed: (kind) => {
          this.#failures.delete(kind);
          this.#listed.add(kind);
          if (this.isSynced) this.#syncedResolve();
          this.#events.changed();
        },
        error: (kind, err) => this.#failed(kind, err),
        progress: () => (this.#movesSinceProgress = 0),
      },
      this.#bound,
      this.#pods,
    );
    for (const i of this.#informers) void this.#startOne(i);
  }

  async #startOne(i: RunningInformer): Promise<void> {
    try {
      await i.informer.start();
    } catch (err) {
      this.#failed(i.kind, err);
    }
  }

  #failed(kind: InformerKind, err: unknown): void {
    if (this.#stopped) return;
    const servers = this.#bound.servers;
    if (err instanceof ServerFailure) {
      const move = servers.failed(err.server, err.reason);
      if (move) {
        this.#movesSinceProgress++;
        for (const i of this.#informers) i.relist();
        this.#bound.left();
        this.#events.moved?.(move);
      }
      // A request to a server left behind (by this move or an earlier one): the informer goes on against the new one.
      if (err.server !== servers.current) {
        const n = this.#movesSinceProgress - servers.urls.length;
        this.#restart(kind, n < 0 ? 0 : BACKOFF_MS[Math.min(n, BACKOFF_MS.length - 1)]!);
        return;
      }
    }
    this.#restartLater(kind, err);
  }

  #restartLater(kind: InformerKind, err: unknown): void {
    if (this.#stopped) return;
    const n = this.#failures.get(kind) ?? 0;
    this.#failures.set(kind, n + 1);
    const retryMs = BACKOFF_MS[Math.min(n, BACKOFF_MS.length - 1)]!;
    this.#events.informerError(kind, err, retryMs);
    this.#restart(kind, retryMs);
  }

  /** Starts the informer again after `retryMs` (0: on the next turn, once client-node is done with the failed request). */
  #restart(kind: InformerKind, retryMs: number): void {
    if (this.#stopped) return;
    const i = this.#informers.find((x) => x.kind === kind);
    if (!i) return;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      if (!this.#stopped) void this.#startOne(i);
    }, retryMs);
    this.#timers.add(timer);
  }

  stop(): void {
    this.#stopped = true;
    this.#bound.left(); // nothing pending keeps the process alive
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    for (const i of this.#informers) void i.informer.stop();
  }

  #upsert(kind: InformerKind, cached: CachedObject): void {
    this.#failures.delete(kind); // events flow again: the next failure starts the back-off afresh
    if (kind === 'Service' || kind === 'EndpointSlice') this.#events.event?.(kind);
    // Validated once, by the informer's transform, as the object arrived (see informers.ts).
    const r = cached.validated ?? validateObject(cached, 'api');
    // Not kept in the informer's cache too: the model holds what it reads of
    // the object (a compact record for a slice, endpoints.ts ModelSlice).
    // Cleared, not deleted: a delete turns each cached object into a
    // dictionary (~400 bytes more each, 5 MiB at 10k).
    cached.validated = undefined;
    const who = this.#who(kind, cached);
    if (!r.ok) {
      this.#removeById(kind, who);
      this.model.reject(kind, who.namespace, who.name, r.problems);
      this.#events.changed();
      return;
    }
    this.model.accept(kind, who.namespace, who.name);
    const obj = r.obj;
    if (obj.kind === 'Service') this.model.upsertService(obj as Service);
    else if (obj.kind === 'Pod') this.model.upsertPod(obj as Pod);
    else if (obj.kind === 'Namespace') this.model.socketLb.upsertNamespace(obj as Namespace);
    else if (obj.kind === 'EndpointSlice') {
      const slice = obj as EndpointSlice;
      const owner = this.model.upsertSlice(slice);
      const at = (slice.metadata as { lastChangeTriggerTime?: number }).lastChangeTriggerTime;
      const id = `${who.namespace}/${who.name}`;
      if (at === undefined) this.#sliceTriggers.delete(id);
      else if (this.#sliceTriggers.get(id) !== at) {
        this.#sliceTriggers.set(id, at);
        if (owner !== undefined) this.#events.sliceTrigger?.(owner, at, slice.addressType === 'IPv6' ? 6 : 4);
      }
    } else {
      const node = nodeInfoFromNode(obj as Node);
      this.model.setNode(node);
      this.#events.node?.(node);
      this.#events.nodeEligible?.(nodeEligible(obj as Node));
    }
    this.#events.changed();
  }

  #remove(kind: InformerKind, raw: CachedObject): void {
    if (kind === 'Service' || kind === 'EndpointSlice') this.#events.event?.(kind);
    const who = this.#who(kind, raw);
    this.#removeById(kind, who);
    this.model.accept(kind, who.namespace, who.name);
    // The Node is gone: as for kube-proxy, a node without its Node object is not eligible.
    if (kind === 'Node') this.#events.nodeEligible?.(false);
    this.#events.changed();
  }

  /** The object's namespace (as the model keys it: "default" when unset; "" for a Node) and name. */
  #who(kind: InformerKind, raw: unknown): { namespace: string; name: string } {
    const who = identify(raw);
    return { namespace: kind === 'Node' || kind === 'Namespace' ? '' : who.namespace || 'default', name: who.name };
  }

  #removeById(kind: InformerKind, who: { namespace: string; name: string }): void {
    if (kind === 'Service') this.model.deleteService(who.namespace, who.name);
    else if (kind === 'Pod') this.model.deletePod(who.namespace, who.name);
    else if (kind === 'Namespace') this.model.socketLb.deleteNamespace(who.name);
    else if (kind === 'EndpointSlice') {
      this.model.deleteSlice(who.namespace, who.name);
      this.#sliceTriggers.delete(`${who.namespace}/${who.name}`);
    } else if (this.#nodeName) this.model.setNode({ name: this.#nodeName, addresses: [] });
  }
}
