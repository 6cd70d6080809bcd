// The frontends of one proxied Service: ClusterIP, NodePort (per node address
// plus a wildcard), LoadBalancer and externalIPs, each with the backends its
// traffic policy allows. IPv4 only for now; IPv6 parts are reported and skipped.

import type { Backend, Frontend, FrontendType, NodeInfo, Problem, Protocol } from './types.ts';
import { DEFAULT_AFFINITY_TIMEOUT_SECONDS, type Service } from './schemas.ts';
import { isLocal, mergeEndpoints, selectBackends, topologyFilter, type IPv4Slice } from './endpoints.ts';
import { ipFamily } from './ip.ts';
import { problemAbout } from './problems.ts';
import { flat } from '../maps/flat-string.ts';
import { serviceOptions } from './service-options.ts';

/** A frontend and the Service field it came from, for naming it in conflict reports. */
export interface SourcedFrontend {
  frontend: Frontend;
  path: string;
}

export const WILDCARD_IP = '0.0.0.0';

export function frontendKey(ip: string, port: number, protocol: Protocol, scope: Frontend['scope']): string {
  return scope === 'internal' ? flat(ip, ':', port, '/', protocol, '/internal') : flat(ip, ':', port, '/', protocol);
}

/** Splits addresses by family; reports the IPv6 ones once, on `path`. */
function ipv4Only(svc: Service, ips: readonly string[], path: string, problems: Problem[]): string[] {
  const v6 = ips.filter((ip) => ipFamily(ip) === 6);
  if (v6.length > 0) {
    problems.push(problemAbout(svc, 'warning', path, `IPv6 is not supported yet; ${v6.join(', ')} skipped`));
  }
  return ips.filter((ip) => ipFamily(ip) === 4);
}

interface ExternalAddress {
  type: Exclude<FrontendType, 'ClusterIP'>;
  ip: string;
  wildcard: boolean;
  sourceRanges: string[];
}

/** Addresses of the Service reachable from outside the node (not per port, except NodePort). */
function externalAddresses(svc: Service, node: NodeInfo | undefined, problems: Problem[]): {
  nodeIPs: string[];
  lb: ExternalAddress[];
  external: ExternalAddress[];
} {
  const spec = svc.spec;
  const nodeIPs = [...new Set(node?.addresses ?? [])].filter((ip) => ipFamily(ip) === 4);

  const lb: ExternalAddress[] = [];
  if (spec.type === 'LoadBalancer') {
    // ipMode Proxy means the load balancer terminates traffic itself; kube-proxy
    // does not capture such IPs on the node, so neither do we.
    const ingress = (svc.status?.loadBalancer?.ingress ?? []).flatMap((i) =>
      i.ip && i.ipMode !== 'Proxy' ? [i.ip] : [],
    );
    const ips = ipv4Only(svc, ingress, 'status.loadBalancer.ingress', problems);
    const ranges = spec.loadBalancerSourceRanges.filter((r) => ipFamily(r) === 4);
    if (ips.length > 0 && spec.loadBalancerSourceRanges.length > 0 && ranges.length === 0) {
      // An empty list would mean "no restriction": fail closed instead of open.
      problems.push(
        problemAbout(svc, 'warning', 'spec.loadBalancerSourceRanges', 'holds only IPv6 ranges; IPv4 LoadBalancer frontends skipped'),
      );
    } else {
      for (const ip of ips) lb.push({ type: 'LoadBalancer', ip, wildcard: false, sourceRanges: ranges });
    }
  }

  const external = ipv4Only(svc, spec.externalIPs, 'spec.externalIPs', problems).map(
    (ip): ExternalAddress => ({ type: 'ExternalIP', ip, wildcard: false, sourceRanges: [] }),
  );
  return { nodeIPs, lb, external };
}

/**
 * All frontends of `svc`, in a stable order: per port, ClusterIP, NodePort,
 * LoadBalancer, ExternalIP. The caller has already decided the Service is
 * proxied (not headless, not ExternalName, not another proxy's) and passes the
 * IPv4 slices that belong to it, sorted by name.
 */
export function serviceFrontends(
  svc: Service,
  slices: readonly IPv4Slice[],
  node: NodeInfo | undefined,
  problems: Problem[],
): SourcedFrontend[] {
  const spec = svc.spec;
  const usesClusterIPs = spec.clusterIPs.length > 0;
  const clusterIPs = ipv4Only(
    svc,
    (usesClusterIPs ? spec.clusterIPs : [spec.clusterIP]).filter((ip) => ip !== '' && ip !== 'None'),
    usesClusterIPs ? 'spec.clusterIPs' : 'spec.clusterIP',
    problems,
  );
  // Like kube-proxy's IPv4 proxier, a Service without an IPv4 cluster IP is not
  // an IPv4 service at all: no NodePorts or external IPs either.
  if (clusterIPs.length === 0) return [];

  const { nodeIPs, lb, external } = externalAddresses(svc, node, problems);
  const externalLocal = spec.externalTrafficPolicy === 'Local';
  const internalLocal = spec.internalTrafficPolicy === 'Local';
  const affinityTimeoutSeconds =
    spec.sessionAffinity === 'ClientIP'
      ? (spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_TIMEOUT_SECONDS)
      : 0;
  const { algorithm, sourceHashPort, maglevTableSize } = serviceOptions(svc, problems);

  const out: SourcedFrontend[] = [];
  spec.ports.forEach((port, i) => {
    const path = `spec.ports[${i}]`;
    if (port.protocol === 'SCTP') {
      problems.push(problemAbout(svc, 'warning', `${path}.protocol`, 'SCTP is not supported; port skipped'));
      return;
    }
    const protocol = port.protocol;
    const candidates = mergeEndpoints(slices, port.name, protocol);
    // Zone hints narrow the cluster-wide set only, as in kube-proxy (a Local policy's set is the node's own).
    const all = selectBackends(topologyFilter(candidates, node), node);
    // Only traffic policies Local need the node-local subset.
    const local = externalLocal || internalLocal ? selectBackends(candidates.filter((c) => isLocal(c, node)), node) : [];

    const make = (
      ip: string,
      portNumber: number,
      type: FrontendType,
      scope: Frontend['scope'],
      backends: Backend[],
      extra: Partial<Frontend> = {},
    ): SourcedFrontend => ({
      path,
      frontend: {
        key: frontendKey(ip, portNumber, protocol, scope),
        ip,
        port: portNumber,
        protocol,
        scope,
        type,
        service: { namespace: svc.metadata.namespace, name: svc.metadata.name, portName: port.name },
        externalLocal: false,
        internalLocal: false,
        wildcard: false,
        twoScopes: false,
        ...(algorithm ? { algorithm } : {}),
        sourceHashPort,
        ...(maglevTableSize ? { maglevTableSize } : {}),
        affinityTimeoutSeconds,
        sourceRanges: [],
        // Each frontend owns its array; Backend objects are shared and must be treated as read-only.
        backends: [...backends],
        ...extra,
      },
    });

    for (const ip of clusterIPs) {
      out.push(make(ip, port.port, 'ClusterIP', 'external', internalLocal ? local : all, { internalLocal }));
    }

    const addresses: ExternalAddress[] = [];
    if ((spec.type === 'NodePort' || spec.type === 'LoadBalancer') && port.nodePort != null) {
      for (const ip of nodeIPs) addresses.push({ type: 'NodePort', ip, wildcard: false, sourceRanges: [] });
      // Matches any local address; the socket hooks use it for 127.0.0.1:NodePort.
      addresses.push({ type: 'NodePort', ip: WILDCARD_IP, wildcard: true, sourceRanges: [] });
    }
    addresses.push(...lb, ...external);

    for (const a of addresses) {
      const portNumber = a.type === 'NodePort' ? (port.nodePort as number) : port.port;
      const hc = externalLocal && spec.healthCheckNodePort != null ? { healthCheckNodePort: spec.healthCheckNodePort } : {};
      const flags = { wildcard: a.wildcard, sourceRanges: [...a.sourceRanges], externalLocal, twoScopes: externalLocal, ...hc };
      // ETP=Local: outside traffic reaches only this node's endpoints (and keeps
      // its source address); the internal twin serves traffic that starts on the
      // node itself, which kube-proxy short-circuits to all endpoints.
      out.push(make(a.ip, portNumber, a.type, 'external', externalLocal ? local : all, flags));
      if (externalLocal) out.push(make(a.ip, portNumber, a.type, 'internal', all, { ...flags, sourceRanges: [...a.sourceRanges] }));
    }
  });
  return out;
}
