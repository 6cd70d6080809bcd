// The agent's two HTTP endpoints, on kube-proxy's ports by default:
// metrics (10249: /metrics) and health (10256: /healthz, /livez, /readyz).
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AgentMetrics } from './metrics.ts';

export interface HealthState {
  /** Set after the first full sync: the maps reflect the cluster. */
  ready: boolean;
  /** When the last sync finished successfully (ms since epoch), 0 if never. */
  lastSyncAt: number;
  /** Syncs failed in a row since the last success (each is being retried). */
  consecutiveFailures: number;
  /** When the oldest change not yet in the maps arrived (ms since epoch), 0 if none waits. */
  pendingSince: number;
}

export interface ServerOptions {
  bindAddress: string;
  port: number;
}

function listen(server: Server, opts: ServerOptions, what: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', (err) => reject(new Error(`cannot serve ${what} on ${opts.bindAddress}:${opts.port}: ${err.message}`)));
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
 * /healthz and /livez: 200 unless a change has waited longer than
 * `staleAfterMs` without reaching the maps (the agent is stuck), with the JSON
 * kube-proxy's healthz gives. /readyz: 200 once the first full sync is done.
 * Both bodies also say when the last sync succeeded (lastSuccessfulSync; the
 * same instant as kube-proxy's lastUpdated, named for what it is) and, while
 * syncs fail and are retried, how many failed in a row.
 */
export async function serveHealth(state: () => HealthState, staleAfterMs: number, opts: ServerOptions): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const s = state();
    const now = Date.now();
    const lastSync = s.lastSyncAt ? new Date(s.lastSyncAt).toISOString() : '';
    const body = (ok: boolean) => `${JSON.stringify({
      lastUpdated: lastSync,
      currentTime: new Date(now).toISOString(),
      ready: s.ready,
      lastSuccessfulSync: lastSync,
      ...(s.consecutiveFailures ? { consecutiveSyncFailures: s.consecutiveFailures } : {}),
      ...(s.pendingSince ? { pendingSince: new Date(s.pendingSince).toISOString() } : {}),
      healthy: ok,
    })}\n`;
    if (req.url === '/healthz' || req.url === '/livez') {
      const ok = !s.pendingSince || now - s.pendingSince < staleAfterMs;
      res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' }).end(body(ok));
    } else if (req.url === '/readyz') {
      res.writeHead(s.ready ? 200 : 503, { 'content-type': 'application/json' }).end(body(s.ready));
    } else {
      res.writeHead(404).end('not found\n');
    }
  });
  return { server, port: await listen(server, opts, 'health checks') };
}
