// healthCheckNodePort: for each externalTrafficPolicy Local Service that has
// one, an HTTP server on that port answers whether this node has endpoints
// for it, so an external load balancer sends traffic only to nodes that can
// serve it locally. The answers are kube-proxy's (pkg/proxy/healthcheck,
// Kubernetes 1.34): 200 when the node has ready local endpoints and the proxy
// is healthy, 503 otherwise; the count also in X-Load-Balancing-Endpoint-Weight;
// the same tab-indented JSON body. Only ready endpoints count: a node whose
// endpoints are all terminating still serves them (the fallback) but fails
// the check, so the load balancer drains it.
// The servers listen on [::], which takes IPv4 too (a dual-stack socket), so
// a load balancer checks the node over either family, as kube-proxy listens
// on every address; --bind-address (the agent's own metrics and health
// servers) does not apply to them. On a host without IPv6 they fall back to
// 0.0.0.0.
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Frontend } from '../../model/types.ts';
import type { Component } from '../components.ts';
import type { Logger } from '../log.ts';
import { familyOf } from '../../util/family.ts';

export interface HealthCheckService {
  namespace: string;
  name: string;
  port: number;
  localEndpoints: number;
}

/**
 * The health-check ports of one Service's frontends (at most one:
 * spec.healthCheckNodePort). The local ready endpoints are counted by
 * address (one pod behind two ports is one endpoint), per family, and the
 * larger count is the answer: a dual-stack pod has an address of each family
 * and is one endpoint. Terminating endpoints, serving or not, do not count
 * (kube-proxy's LocalReadyEndpoints).
 */
export function healthCheckOf(frontends: readonly Frontend[]): HealthCheckService | undefined {
  const ext = frontends.filter((f) => f.scope === 'external' && f.healthCheckNodePort !== undefined);
  if (!ext.length) return undefined;
  const local = { 4: new Set<string>(), 6: new Set<string>() };
  for (const f of ext) for (const b of f.backends) if (b.local && b.state === 'active') local[familyOf(b.ip)].add(b.ip);
  const f = ext[0]!;
  return {
    namespace: f.service.namespace,
    name: f.service.name,
    port: f.healthCheckNodePort!,
    localEndpoints: Math.max(local[4].size, local[6].size),
  };
}

/** Both families on one socket. */
const DUAL_STACK_ANY = '::';
/** The log line of a healthCheckNodePort server that listens. */
export const HC_LISTENING = 'serving healthCheckNodePort';
/** Errors of a host (or network namespace) without IPv6. */
const NO_IPV6 = new Set(['EAFNOSUPPORT', 'EADDRNOTAVAIL']);

/** kube-proxy's body: the JSON tab-indented, without a final newline. */
export function healthCheckBody(hc: { namespace: string; name: string }, localEndpoints: number, serviceProxyHealthy: boolean): string {
  return JSON.stringify({ service: { namespace: hc.namespace, name: hc.name }, localEndpoints, serviceProxyHealthy }, null, '\t');
}

export class HealthCheckPorts implements Component {
  readonly name = 'health check ports';
  readonly #log: Logger;
  readonly #proxyHealthy: () => boolean;
  /** By Service id (namespace/name). */
  readonly #services = new Map<string, HealthCheckService>();
  readonly #servers = new Map<number, Server>();

  constructor(log: Logger, proxyHealthy: () => boolean = () => true) {
    this.#log = log;
    this.#proxyHealthy = proxyHealthy;
  }

  /** Sets (or, with undefined, removes) one Service's health check. */
  set(serviceId: string, hc: HealthCheckService | undefined): void {
    if (hc) this.#services.set(serviceId, hc);
    else this.#services.delete(serviceId);
    this.#reconcile();
  }

  /** Replaces every health check at once (full syncs). */
  replaceAll(all: ReadonlyMap<string, HealthCheckService>): void {
    this.#services.clear();
    for (const [id, hc] of all) this.#services.set(id, hc);
    this.#reconcile();
  }

  ports(): number[] {
    return [...this.#servers.keys()].sort((a, b) => a - b);
  }

  #byPort(port: number): HealthCheckService | undefined {
    for (const hc of this.#services.values()) if (hc.port === port) return hc;
    return undefined;
  }

  #reconcile(): void {
    const wanted = new Set([...this.#services.values()].map((s) => s.port));
    for (const [port, server] of this.#servers) {
      if (!wanted.has(port)) {
        server.close();
        this.#servers.delete(port);
      }
    }
    for (const port of wanted) {
      if (this.#servers.has(port)) continue;
      const server = createServer((_req, res) => {
        const hc = this.#byPort(port);
        const n = hc?.localEndpoints ?? 0;
        const healthy = this.#proxyHealthy();
        res.writeHead(n > 0 && healthy ? 200 : 503, {
          'content-type': 'application/json',
          'x-content-type-options': 'nosniff',
          'x-load-balancing-endpoint-weight': String(n),
        });
        res.end(healthCheckBody(hc ?? { namespace: '', name: '' }, n, healthy));
      });
      server.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code && NO_IPV6.has(err.code) && this.#servers.get(port) === server) {
          server.listen(port, '0.0.0.0'); // no IPv6 here: IPv4 only
          return;
        }
        this.#log.error({ port, err: err.message }, 'cannot serve healthCheckNodePort');
        if (this.#servers.get(port) === server) this.#servers.delete(port);
      });
      // The moment a load balancer's check can be answered (tests wait for it).
      server.on('listening', () => this.#log.info({ port, address: (server.address() as AddressInfo).address }, HC_LISTENING));
      server.listen(port, DUAL_STACK_ANY); // ipv6Only is off by default: IPv4 clients too
      this.#servers.set(port, server);
    }
  }

  /** Nothing to do: a server opens once a Service asks for its port. */
  start(): void {}

  stop(): void {
    for (const s of this.#servers.values()) s.close();
    this.#servers.clear();
  }
}
