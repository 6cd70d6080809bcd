// Several API servers (--k8s-api-server URL,URL,...; Cilium's
// k8s.apiServerURLs): the agent talks to one at a time and moves to the next
// when that one stops answering. One KubeConfig is shared by every request
// (lists, watches, Events), so a move is one change of its current cluster's
// server: the CA and the credentials stay, as for a single --k8s-api-server.
import type { KubeConfig } from './client-node.ts';

export interface ApiServerMove {
  from: string;
  to: string;
  /** What the server moved away from did (connection refused, timed out, a watch stalled, HTTP 503, ...). */
  reason: string;
  /** Moves since the agent started, this one included. */
  failovers: number;
}

export class ApiServers {
  readonly urls: readonly string[];
  readonly #kc: KubeConfig;
  #index = 0;
  #failovers = 0;

  /** urls: in the order they are tried, the first used first (at least one). */
  constructor(kc: KubeConfig, urls: readonly string[]) {
    if (urls.length === 0) throw new Error('no API server to connect to');
    this.#kc = kc;
    this.urls = urls;
    this.#point();
  }

  /** The server every request goes to now. */
  get current(): string {
    return this.urls[this.#index]!;
  }

  get failovers(): number {
    return this.#failovers;
  }

  /**
   * `server` stopped answering: if it is still the one in use, move to the
   * next (after the last, the first again) and say so; a report about a
   * server already left (another informer's request to it, failing later)
   * changes nothing. With one server there is nowhere to move: undefined.
   */
  failed(server: string, reason: string): ApiServerMove | undefined {
    if (server !== this.current || this.urls.length < 2) return undefined;
    const from = this.current;
    this.#index = (this.#index + 1) % this.urls.length;
    this.#failovers++;
    this.#point();
    return { from, to: this.current, reason, failovers: this.#failovers };
  }

  #point(): void {
    const cluster = this.#kc.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    const server = this.current;
    if (cluster.server === server) return;
    const clusters = this.#kc.clusters.map((c) => (c.name === cluster.name ? { ...c, server } : c));
    this.#kc.loadFromOptions({ clusters, users: this.#kc.users, contexts: this.#kc.contexts, currentContext: this.#kc.currentContext });
  }
}
