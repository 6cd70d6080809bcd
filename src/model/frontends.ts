// The frontends of one proxied Service: ClusterIP, NodePort (per node address
// plus a wildcard), LoadBalancer and externalIPs, each with the backends its
// traffic policy allows. Per address family, as kube-proxy runs one proxier
// per family: a family's frontends exist when the Service has a cluster IP of
// that family, and get only backends of that family (its EndpointSlices).

import type { Backend, Frontend, FrontendType, NodeInfo, Problem, Protocol } from './types.ts';
import { DEFAULT_AFFINITY_TIMEOUT_SECONDS, type Service } from './schemas.ts';
import { isLocal, mergeEndpoints, type ModelSlice, selectBackends, topologyFilter } from './endpoints.ts';
import { type Family, familyOf } from '../util/family.ts';
import { problemAbout } from './problems.ts';
import { flat } from '../util/flat-string.ts';
import { serviceOptions } from './service-options.ts';

/** A frontend and the Service field it came from, for naming it in conflict reports. */
export interface SourcedFrontend {
  frontend: Frontend;
  path: string;
}

export const WILDCARD_IP = '0.0.0.0';
export const WILDCARD_IP6 = '::';

export function frontendKey(ip: string, port: number, protocol: Protocol, scope: Frontend['scope']): string {
  const addr = familyOf(ip) === 6 ? flat('[', ip, ']') : ip;
  return scope === 'internal' ? flat(addr, ':', port, '/', protocol, '/internal') : flat(addr, ':', port, '/', protocol);
}

/** "spec.ports[i]", one flat string per index for every Service (each frontend keeps its path; a template held a cons string per Service). */
const PORT_PATHS: string[] = [];
function portPath(i: number): string {
  return (PORT_PATHS[i] ??= flat('spec.ports[', i, ']'));
}

/** The sourceRanges of a frontend without any, one instance for all (frontends are read-only). */
const NO_RANGES: string[] = [];

/** The per-frontend fields make() sets from its caller (the rest are the Service port's). */
type FrontendFlags = Partial<
  Pick<Frontend, 'externalLocal' | 'internalLocal' | 'wildcard' | 'twoScopes' | 'sourceRanges' | 'healthCheckNodePort'>
>;

/** The addresses of `family`; the others are reported once, on `path`, when the Service has no cluster IP of their family. */
function ofFamily(
  svc: Service,
  ips: readonly string[],
  family: Family,
  served: ReadonlySet<Family>,
  path: string,
  problems: Problem[],
): string[] {
  // Reported once: while the first family the Service serves is built.
  if (family === (served.has(4) ? 4 : 6)) {
    const orphans = ips.filter((ip) => !served.has(familyOf(ip)));
    if (orphans.length > 0) {
      problems.push(problemAbout(svc, 'warning', path, `${orphans.join(', ')} skipped: the Service has no cluster IP of that family`));
    }
  }
  return ips.filter((ip) => familyOf(ip) === family);
}

/**
 * The loadBalancerSourceRanges that restrict the Service's `family` frontends,
 * by kube-proxy's rules (pkg/proxy/serviceport.go): ranges of the other family
 * are ignored, so a family without ranges of its own is not restricted, and a
 * /0 of the family ("0.0.0.0/0", "::/0") means any client, as no ranges do.
 * The first rule is reported (once per family with frontends), as it opens
 * frontends the user may have meant to restrict.
 */
function familyRanges(svc: Service, family: Family, hasFrontends: boolean, problems: Problem[]): string[] {
  const all = svc.spec.loadBalancerSourceRanges;
  if (all.length === 0) return NO_RANGES;
  const ranges = all.filter((r) => familyOf(r) === family);
  if (ranges.length === 0 && hasFrontends) {
    problems.push(
      problemAbout(
        svc,
        'warning',
        'spec.loadBalancerSourceRanges',
        `holds no IPv${family} range: its IPv${family} LoadBalancer frontends accept every client (kube-proxy ignores ranges of the other family)`,
      ),
    );
  }
  return ranges.length === 0 || ranges.some((r) => r.endsWith('/0')) ? NO_RANGES : ranges;
}

interface ExternalAddress {
  type: Exclude<FrontendType, 'ClusterIP'>;
  ip: string;
  wildcard: boolean;
  sourceRanges: string[];
}

/** Addresses of the Service of one family reachable from outside the node (not per port, except NodePort). */
function externalAddresses(
  svc: Service,
  node: NodeInfo | undefined,
  family: Family,
  served: ReadonlySet<Family>,
  problems: Problem[],
): {
  nodeIPs: string[];
  lb: ExternalAddress[];
  external: ExternalAddress[];
} {
  const spec = svc.spec;
  const nodeIPs = [...new Set((family === 4 ? node?.addresses : node?.addresses6) ?? [])].filter((ip) => familyOf(ip) === family);

  const lb: ExternalAddress[] = [];
  if (spec.type === 'LoadBalancer') {
    // ipMode Proxy means the load balancer terminates traffic itself; kube-proxy
    // does not capture such IPs on the node, so neither do we.
    const ingress = (svc.status?.loadBalancer?.ingress ?? []).flatMap((i) => (i.ip && i.ipMode !== 'Proxy' ? [i.ip] : []));
    const ips = ofFamily(svc, ingress, family, served, 'status.loadBalancer.ingress', problems);
    const ranges = familyRanges(svc, family, ips.length > 0, problems);
    for (const ip of ips) lb.push({ type: 'LoadBalancer', ip, wildcard: false, sourceRanges: ranges });
  }

  const external = ofFamily(svc, spec.externalIPs, family, served, 'spec.externalIPs', problems).map(
    (ip): ExternalAddress => ({ type: 'ExternalIP', ip, wildcard: false, sourceRanges: [] }),
  );
  return { nodeIPs, lb, external };
}

/**
 * All frontends of `svc`, in a stable order: per port, ClusterIP, NodePort,
 * LoadBalancer, ExternalIP. The caller has already decided the Service is
 * proxied (not headless, not ExternalName, not another proxy's) and passes the
 * IP slices (both families) that belong to it, sorted by name. IPv4 frontends
 * come first, then IPv6 ones.
 */
export function serviceFrontends(
  svc: Service,
  slices: readonly ModelSlice[],
  node: NodeInfo | undefined,
  problems: Problem[],
): SourcedFrontend[] {
  const spec = svc.spec;
  const usesClusterIPs = spec.clusterIPs.length > 0;
  const allClusterIPs = (usesClusterIPs ? spec.clusterIPs : [spec.clusterIP]).filter((ip) => ip !== '' && ip !== 'None');
  // Like kube-proxy's proxier of each family, a Service without a cluster IP of
  // a family is not a service of that family at all: no NodePorts or external IPs either.
  const served = new Set(allClusterIPs.map(familyOf));
  const out: SourcedFrontend[] = [];
  const portsReported = new Set<number>();
  const options = serviceOptions(svc, problems);
  for (const family of [4, 6] as const) {
    if (!served.has(family)) continue;
    const clusterIPs = allClusterIPs.filter((ip) => familyOf(ip) === family);
    const own = slices.filter((sl) => (sl.addressType === 'IPv4' ? 4 : 6) === family);
    out.push(...familyFrontends(svc, family, served, clusterIPs, own, node, options, problems, portsReported));
  }
  return out;
}

/** serviceFrontends for one family; `portsReported` keeps per-port problems to one report for both families. */
function familyFrontends(
  svc: Service,
  family: Family,
  served: ReadonlySet<Family>,
  clusterIPs: readonly string[],
  slices: readonly ModelSlice[],
  node: NodeInfo | undefined,
  { algorithm, sourceHashPort, maglevTableSize, lbMode }: ReturnType<typeof serviceOptions>,
  problems: Problem[],
  portsReported: Set<number>,
): SourcedFrontend[] {
  const spec = svc.spec;
  const { nodeIPs, lb, external } = externalAddresses(svc, node, family, served, problems);
  const externalLocal = spec.externalTrafficPolicy === 'Local';
  const internalLocal = spec.internalTrafficPolicy === 'Local';
  const affinityTimeoutSeconds =
    spec.sessionAffinity === 'ClientIP' ? (spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_TIMEOUT_SECONDS) : 0;

  const out: SourcedFrontend[] = [];
  spec.ports.forEach((port, i) => {
    const path = portPath(i);
    if (port.protocol === 'SCTP') {
      if (!portsReported.has(i)) problems.push(problemAbout(svc, 'warning', `${path}.protocol`, 'SCTP is not supported; port skipped'));
      portsReported.add(i);
      return;
    }
    const protocol = port.protocol;
    const candidates = mergeEndpoints(slices, port.name, protocol);
    // Zone hints narrow the cluster-wide set only, as in kube-proxy (a Local policy's set is the node's own).
    const all = selectBackends(topologyFilter(candidates, node), node);
    // Only traffic policies Local need the node-local subset.
    const local =
      externalLocal || internalLocal
        ? selectBackends(
            candidates.filter((c) => isLocal(c, node)),
            node,
          )
        : [];

    // One reference to the Service per port, shared by its frontends (read-only, as the Backend objects).
    const service = { namespace: svc.metadata.namespace, name: svc.metadata.name, portName: port.name };
    // Built in one fixed shape (optional fields added last): this runs for every frontend of every recomputed Service.
    const make = (
      ip: string,
      portNumber: number,
      type: FrontendType,
      scope: Frontend['scope'],
      backends: Backend[],
      extra: FrontendFlags = {},
    ): SourcedFrontend => {
      const frontend: Frontend = {
        key: frontendKey(ip, portNumber, protocol, scope),
        ip,
        port: portNumber,
        protocol,
        scope,
        type,
        service,
        externalLocal: extra.externalLocal ?? false,
        internalLocal: extra.internalLocal ?? false,
        wildcard: extra.wildcard ?? false,
        twoScopes: extra.twoScopes ?? false,
        sourceHashPort,
        affinityTimeoutSeconds,
        sourceRanges: extra.sourceRanges ?? NO_RANGES,
        // Each frontend owns its array; Backend objects are shared and must be treated as read-only.
        backends: [...backends],
      };
      if (algorithm) frontend.algorithm = algorithm;
      if (maglevTableSize) frontend.maglevTableSize = maglevTableSize;
      if (lbMode) frontend.lbMode = lbMode;
      if (extra.healthCheckNodePort !== undefined) frontend.healthCheckNodePort = extra.healthCheckNodePort;
      return { path, frontend };
    };

    for (const ip of clusterIPs) {
      out.push(make(ip, port.port, 'ClusterIP', 'external', internalLocal ? local : all, { internalLocal }));
    }

    const addresses: ExternalAddress[] = [];
    if ((spec.type === 'NodePort' || spec.type === 'LoadBalancer') && port.nodePort != null) {
      for (const ip of nodeIPs) addresses.push({ type: 'NodePort', ip, wildcard: false, sourceRanges: [] });
      // Matches any local address; the socket hooks use it for 127.0.0.1:NodePort.
      addresses.push({ type: 'NodePort', ip: family === 4 ? WILDCARD_IP : WILDCARD_IP6, wildcard: true, sourceRanges: [] });
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
