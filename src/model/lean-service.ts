// A lean path for the common Service (what the API server sends, or a plain
// manifest): every field the model reads absent or plainly of its type. It
// checks them by the same rules as the zod schema (schemas.ts, including the
// spec's refinements) and builds the same output, keys in the same order,
// without zod's per-field allocations. A Service it is not sure of in any way
// (a null where zod would keep it, load-balancer ingress, source ranges, an
// unknown enum value, a bad address, a rule broken) gets undefined and goes
// through zod, which also reports every error. test/model/lean-service.test.ts
// holds the two equal.
import { canonicalIpv4 } from '../util/ipv4.ts';
import { canonicalIpv6 } from '../util/ipv6.ts';
import { isPortNumber, isRecord, leanList as list, leanMeta, leanPortName, NO_ITEMS, PROTOCOLS } from './lean.ts';
import {
  DEFAULT_AFFINITY_TIMEOUT_SECONDS,
  SERVICE_ANNOTATIONS,
  SERVICE_ENUMS,
  type Service,
  type ServiceAnnotation,
  type ServicePort,
} from './schemas.ts';
import { familyOf } from '../util/family.ts';

type Rec = Record<string, unknown>;
type Spec = Service['spec'];

/** zod's ipAddress union: IPv4 first, then IPv6, made canonical. */
function ipAddress(v: unknown): string | undefined {
  return typeof v === 'string' ? (canonicalIpv4(v) ?? canonicalIpv6(v)) : undefined;
}

function clusterIP(v: unknown): string | undefined {
  return v === 'None' || v === '' ? v : ipAddress(v);
}

function isOneOf<T extends string>(v: unknown, values: readonly T[]): v is T {
  return typeof v === 'string' && (values as readonly string[]).includes(v);
}

/** An enum with a default for absent or null; undefined when not one of `values`. */
function oneOf<T extends string>(v: unknown, values: readonly T[], fallback: T): T | undefined {
  if (v === undefined || v === null) return fallback;
  return isOneOf(v, values) ? v : undefined;
}

function servicePort(raw: unknown): ServicePort | undefined {
  if (!isRecord(raw)) return undefined;
  const { name, protocol, port, targetPort, nodePort } = raw;
  const n = name === undefined || name === null ? '' : leanPortName(name);
  const p =
    protocol === undefined || protocol === null ? 'TCP' : typeof protocol === 'string' && PROTOCOLS.has(protocol) ? protocol : undefined;
  if (n === undefined || p === undefined || !isPortNumber(port)) return undefined;
  const out = { name: n, protocol: p, port } as ServicePort;
  if (targetPort !== undefined) {
    if (!isPortNumber(targetPort) && !(typeof targetPort === 'string' && targetPort.length >= 1)) return undefined;
    out.targetPort = targetPort;
  }
  if (nodePort !== undefined) {
    if (!isPortNumber(nodePort)) return undefined;
    out.nodePort = nodePort;
  }
  return out;
}

/** sessionAffinityConfig: absent (the key left out), or {clientIP: {timeoutSeconds}}; anything else is zod's. */
function affinityConfig(raw: unknown): Spec['sessionAffinityConfig'] | null {
  if (!isRecord(raw) || !isRecord(raw.clientIP)) return null;
  const t = raw.clientIP.timeoutSeconds;
  if (t === undefined || t === null) return { clientIP: { timeoutSeconds: DEFAULT_AFFINITY_TIMEOUT_SECONDS } };
  return typeof t === 'number' && Number.isInteger(t) && t >= 1 && t <= 86400 ? { clientIP: { timeoutSeconds: t } } : null;
}

/** The spec's refinements (schemas.ts serviceSpec.superRefine and dualStackRules): true when none would add an issue. */
function specRulesHold(spec: Spec): boolean {
  const names = new Set<string>();
  const pairs = new Set<string>();
  for (const p of spec.ports) {
    if ((spec.ports.length > 1 && p.name === '') || names.has(p.name)) return false;
    names.add(p.name);
    const pair = `${p.port}/${p.protocol}`;
    if (pairs.has(pair)) return false;
    pairs.add(pair);
  }
  const first = spec.clusterIPs[0];
  if (spec.clusterIP !== '' && first !== undefined && first !== spec.clusterIP) return false;
  const ips = spec.clusterIPs.filter((ip) => ip !== '' && ip !== 'None');
  const families = ips.map((ip) => (familyOf(ip) === 6 ? 'IPv6' : 'IPv4'));
  if (ips.length > 2 || (families.length === 2 && families[0] === families[1])) return false;
  const fams = spec.ipFamilies;
  if (fams.length > 2 || (fams.length === 2 && fams[0] === fams[1])) return false;
  for (let i = 0; i < families.length; i++) if (fams[i] !== undefined && fams[i] !== families[i]) return false;
  if (spec.ipFamilyPolicy === 'SingleStack' && (fams.length > 1 || ips.length > 1)) return false;
  return true;
}

function leanSpec(raw: unknown): Spec | undefined {
  if (!isRecord(raw)) return undefined;
  const type = oneOf(raw.type, SERVICE_ENUMS.type, 'ClusterIP');
  const cip = raw.clusterIP === undefined || raw.clusterIP === null ? '' : clusterIP(raw.clusterIP);
  const clusterIPs = list(raw.clusterIPs, clusterIP);
  const ipFamilies = list(raw.ipFamilies, (v) => (isOneOf(v, SERVICE_ENUMS.ipFamily) ? v : undefined));
  const policy = raw.ipFamilyPolicy;
  if (policy !== undefined && !isOneOf(policy, SERVICE_ENUMS.ipFamilyPolicy)) return undefined;
  const ports = list(raw.ports, servicePort);
  const externalIPs = list(raw.externalIPs, ipAddress);
  const etp = oneOf(raw.externalTrafficPolicy, SERVICE_ENUMS.externalTrafficPolicy, 'Cluster');
  const itp = oneOf(raw.internalTrafficPolicy, SERVICE_ENUMS.internalTrafficPolicy, 'Cluster');
  const affinity = oneOf(raw.sessionAffinity, SERVICE_ENUMS.sessionAffinity, 'None');
  const ranges = raw.loadBalancerSourceRanges;
  if (type === undefined || cip === undefined || !clusterIPs || !ipFamilies || !ports || !externalIPs || !etp || !itp || !affinity)
    return undefined;
  // Source ranges take zod's trimming and CIDR rules: only an empty list is lean.
  if (!(ranges === undefined || ranges === null || (Array.isArray(ranges) && ranges.length === 0))) return undefined;
  const spec = {
    type,
    clusterIP: cip,
    clusterIPs,
    ipFamilies,
  } as Spec;
  if (policy !== undefined) spec.ipFamilyPolicy = policy;
  spec.ports = ports;
  spec.externalIPs = externalIPs;
  spec.externalTrafficPolicy = etp === 'Global' ? 'Cluster' : etp;
  spec.internalTrafficPolicy = itp;
  spec.sessionAffinity = affinity;
  if (raw.sessionAffinityConfig !== undefined) {
    const c = affinityConfig(raw.sessionAffinityConfig);
    if (c === null) return undefined;
    spec.sessionAffinityConfig = c;
  }
  spec.loadBalancerSourceRanges = NO_ITEMS;
  const { healthCheckNodePort: hc, externalName } = raw;
  if (hc !== undefined) {
    if (!isPortNumber(hc)) return undefined;
    spec.healthCheckNodePort = hc;
  }
  if (externalName !== undefined) {
    if (typeof externalName !== 'string') return undefined;
    spec.externalName = externalName;
  }
  return specRulesHold(spec) ? spec : undefined;
}

/** status: absent, {} or {loadBalancer: {}} (no ingress): as zod gives it; anything else is zod's. */
function leanStatus(raw: Rec): { status?: Service['status'] } | undefined {
  const s = raw.status;
  if (s === undefined) return {};
  if (!isRecord(s)) return undefined;
  const lb = s.loadBalancer;
  if (lb === undefined) return { status: {} };
  if (!isRecord(lb)) return undefined;
  const ingress = lb.ingress;
  if (!(ingress === undefined || ingress === null || (Array.isArray(ingress) && ingress.length === 0))) return undefined;
  return { status: { loadBalancer: { ingress: NO_ITEMS } } };
}

/** The validated Service, as the zod schema would give it, or undefined: validate it with zod. */
export function leanService(raw: unknown): Service | undefined {
  if (!isRecord(raw) || raw.apiVersion !== 'v1' || raw.kind !== 'Service') return undefined;
  const m = raw.metadata;
  if (!isRecord(m)) return undefined;
  const meta = leanMeta(m);
  const annotations = m.annotations;
  if (meta === undefined) return undefined;
  if (!(annotations === undefined || annotations === null || isRecord(annotations))) return undefined;
  const spec = leanSpec(raw.spec);
  const status = leanStatus(raw);
  if (spec === undefined || status === undefined) return undefined;
  const metadata: Service['metadata'] = { name: meta.name, namespace: meta.namespace, labels: meta.labels };
  let kept: Partial<Record<ServiceAnnotation, string>> | undefined;
  if (annotations) {
    for (const a of SERVICE_ANNOTATIONS) {
      const v = annotations[a];
      if (typeof v === 'string') (kept ??= {})[a] = v;
    }
  }
  if (kept) metadata.annotations = kept;
  const out: Service = { apiVersion: 'v1', kind: 'Service', metadata, spec };
  if (status.status !== undefined) out.status = status.status;
  return out;
}
