// The agent's two HTTP endpoints, on kube-proxy's addresses by default:
// metrics on 127.0.0.1:10249 (/metrics), health on 0.0.0.0:10256 (/healthz,
// /livez, /readyz); either on any address of either family ("::" listens
// on both).
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AgentMetrics } from './metrics.ts';
import type { Component } from '../components.ts';
import type { Logger } from '../log.ts';
import { familyOf } from '../../util/family.ts';
import type { LbMode } from '../../maps/constants.ts';

export interface HealthState {
  /** Set after the first full sync: the maps reflect the cluster. */
  ready: boolean;
  /** When the last sync finished successfully (ms since epoch), 0 if never. */
  lastSyncAt: number;
  /** When the maps were last up to date (ms since epoch): a sync, a change that needed none, or the start (kube-proxy's lastUpdated). */
  lastUpdatedAt: number;
  /** Syncs failed in a row since the last success (each is being retried). */
  consecutiveFailures: number;
  /** When the oldest change not yet in the maps arrived (ms since epoch), 0 if none waits. */
  pendingSince: number;
  /** False once this node's Node object is being deleted or carries the ToBeDeletedByClusterAutoscaler taint (/healthz then answers 503, as kube-proxy's). */
  nodeEligible: boolean;
  /** The Kubernetes source's API server in use and its failovers so far (absent with the file source). */
  apiServer?: { url: string; failovers: number };
}

/** What the health endpoint says besides the state: the address families served and the node's --lb-mode. */
export type HealthOptions = ServerOptions & { families?: readonly string[]; lbMode?: LbMode };

/** kube-proxy's rule: healthy unless a change has waited `timeoutMs` or longer without reaching the maps. */
export function proxyHealthy(s: Pick<HealthState, 'pendingSince'>, timeoutMs: number, now = Date.now()): boolean {
  return !s.pendingSince || now - s.pendingSince < timeoutMs;
}

export interface ServerOptions {
  bindAddress: string;
  port: number;
}

function listen(server: Server, opts: ServerOptions, what: string): Promise<number> {
  const host = familyOf(opts.bindAddress) === 6 ? `[${opts.bindAddress}]` : opts.bindAddress;
  return new Promise((resolve, reject) => {
    server.once('error', (err) => reject(new Error(`cannot serve ${what} on ${host}:${opts.port}: ${err.message}`)));
    server.listen(opts.port, opts.bindAddress, () => resolve((server.address() as AddressInfo).port));
  });
}

export async function serveMetrics(metrics: AgentMetrics, opts: ServerOptions): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end('not found\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      (err: Error) => res.writeHead(500).end(`${err.message}\n`),
    );
  });
  return { server, port: await listen(server, opts, 'metrics') };
}

/**
 * /healthz and /livez answer as kube-proxy's (1.34) do: 200 unless a change
 * has waited `timeoutMs` without reaching the maps (the agent is stuck:
 * syncs fail, or none runs), then 503; JSON with lastUpdated (now while
 * healthy, else when the maps were last up to date), currentTime, healthy
 * and the same per address family under status; /healthz also 503 while the
 * node is not eligible (being deleted, or tainted for deletion by the
 * cluster autoscaler), saying so in nodeEligible. svcmap adds ready,
 * lastSuccessfulSync and, while syncs fail and are retried, how many failed
 * in a row and since when a change waits; with the Kubernetes source, the
 * API server in use (apiServer) and how often the agent moved to another
 * (apiServerFailovers); the node's --lb-mode (lbMode). /readyz: 200 once
 * the first full sync is done.
 */
export async function serveHealth(
  state: () => HealthState,
  timeoutMs: number,
  opts: HealthOptions,
): Promise<{ server: Server; port: number }> {
  const families = opts.families ?? ['IPv4'];
  const iso = (ms: number) => new Date(ms).toISOString();
  const server = createServer((req, res) => {
    const s = state();
    const now = Date.now();
    const proxy = proxyHealthy(s, timeoutMs, now);
    const path = req.url?.split('?')[0];
    if (path !== '/healthz' && path !== '/livez' && path !== '/readyz') {
      res.writeHead(404).end('not found\n');
      return;
    }
    const lastUpdated = iso(proxy ? now : s.lastUpdatedAt);
    const body = {
      lastUpdated,
      currentTime: iso(now),
      ...(path === '/healthz' ? { nodeEligible: s.nodeEligible } : {}),
      healthy: proxy,
      status: Object.fromEntries(families.map((f) => [f, { lastUpdated, healthy: proxy }])),
      ready: s.ready,
      lastSuccessfulSync: s.lastSyncAt ? iso(s.lastSyncAt) : '',
      ...(s.consecutiveFailures ? { consecutiveSyncFailures: s.consecutiveFailures } : {}),
      ...(s.pendingSince ? { pendingSince: iso(s.pendingSince) } : {}),
      ...(s.apiServer ? { apiServer: s.apiServer.url, apiServerFailovers: s.apiServer.failovers } : {}),
      ...(opts.lbMode ? { lbMode: opts.lbMode } : {}),
    };
    const ok = path === '/readyz' ? s.ready : path === '/healthz' ? proxy && s.nodeEligible : proxy;
    res
      .writeHead(ok ? 200 : 503, { 'content-type': 'application/json', 'x-content-type-options': 'nosniff' })
      .end(`${JSON.stringify(body)}\n`);
  });
  return { server, port: await listen(server, opts, 'health checks') };
}

export interface HttpServersOptions {
  /** null: no metrics endpoint. */
  metrics: ServerOptions | null;
  /** null: no health endpoint. */
  health: HealthOptions | null;
  /** The health state the health endpoint reports, and how long a change may wait before it answers 503. */
  state: () => HealthState;
  timeoutMs: number;
}

/** The metrics and health endpoints as one part: both listen (or neither), then the agent says where. */
export class HttpServers implements Component {
  readonly name = 'metrics and health servers';
  readonly #metrics: AgentMetrics;
  readonly #opts: HttpServersOptions;
  readonly #log: Logger;
  readonly #servers: Server[] = [];
  /** The ports they listen on, once started (0 given: the one the kernel chose). */
  metricsPort: number | undefined;
  healthPort: number | undefined;

  constructor(metrics: AgentMetrics, opts: HttpServersOptions, log: Logger) {
    this.#metrics = metrics;
    this.#opts = opts;
    this.#log = log;
  }

  async start(): Promise<void> {
    const { metrics, health } = this.#opts;
    try {
      if (metrics) {
        const m = await serveMetrics(this.#metrics, metrics);
        this.#servers.push(m.server);
        this.metricsPort = m.port;
      }
      if (health) {
        const h = await serveHealth(this.#opts.state, this.#opts.timeoutMs, health);
        this.#servers.push(h.server);
        this.healthPort = h.port;
      }
    } catch (err) {
      this.stop();
      throw err;
    }
    this.#log.info(
      {
        metricsPort: this.metricsPort,
        healthPort: this.healthPort,
        metricsAddress: metrics?.bindAddress,
        healthAddress: health?.bindAddress,
      },
      'serving metrics and health',
    );
  }

  stop(): void {
    for (let s = this.#servers.pop(); s; s = this.#servers.pop()) s.close();
  }
}
