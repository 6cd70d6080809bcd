// Services + EndpointSlices (+ the agent's node) -> the desired state of the
// maps. Pure and deterministic: inputs are sorted first, so the same set of
// objects always gives the same frontends, backends and problems, whatever
// order the informers or the file source delivered them in.

import type { DesiredState, Frontend, NodeInfo, Problem } from './types.ts';
import type { EndpointSlice, Service } from './schemas.ts';
import { ipOrder, type IpSlice, type ModelSlice, modelSlice } from './endpoints.ts';
import { serviceFrontends } from './frontends.ts';
import { flat } from '../util/flat-string.ts';
import { keepClaimedFrontends } from './claims.ts';
import { problemAbout } from './problems.ts';

export { nodeInfoFromNode } from './node.ts';

export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
/** Services (and their slices) carrying this label belong to another proxy. */
export const SERVICE_PROXY_NAME_LABEL = 'service.kubernetes.io/service-proxy-name';
/**
 * Set by the EndpointSlice controller on slices of headless Services; a
 * Service carrying it (whatever its clusterIP) is left to DNS as well.
 */
export const HEADLESS_LABEL = 'service.kubernetes.io/headless';
/**
 * kube-proxy's Service and EndpointSlice informers both select
 * `!service-proxy-name,!headless` (cmd/kube-proxy/app/server.go): an object
 * with either label, whatever its value, is not seen at all. The Kubernetes
 * source asks the API server for the same selection; the model applies it to
 * what the file source reads.
 */
export const NOT_PROXIED_LABELS = [SERVICE_PROXY_NAME_LABEL, HEADLESS_LABEL] as const;

/** The object carries a label that keeps kube-proxy (and svcmap) away from it. */
export function hasNotProxiedLabel(labels: Readonly<Record<string, string>>): boolean {
  return NOT_PROXIED_LABELS.some((l) => Object.hasOwn(labels, l));
}

export interface DesiredInput {
  services: readonly Service[];
  slices: readonly EndpointSlice[];
  node?: NodeInfo;
}

type Named = { metadata: { namespace: string; name: string } };

export function objectId(obj: Named): string {
  return flat(obj.metadata.namespace, '/', obj.metadata.name);
}

/**
 * Sorted by "namespace/name" in plain code-unit order (as the conflict rule is
 * stated); a second object with the same id is reported and dropped.
 */
function sortedUnique<T extends Named & { kind: string }>(objs: readonly T[], problems: Problem[]): T[] {
  const keyed = objs.map((o) => ({ o, key: objectId(o) })).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const out: T[] = [];
  let lastKey: string | undefined;
  for (const { o, key } of keyed) {
    if (key === lastKey) {
      problems.push(problemAbout(o, 'error', '', `duplicate ${o.kind} ${key}; the first one is used`));
    } else {
      out.push(o);
      lastKey = key;
    }
  }
  return out;
}

/**
 * Whether kube-proxy would program this Service. Headless (clusterIP None or
 * the headless label), ExternalName and other proxies' Services are skipped
 * silently: that is their normal state.
 */
export function isProxied(svc: Service, problems: Problem[]): boolean {
  const spec = svc.spec;
  if (hasNotProxiedLabel(svc.metadata.labels)) return false;
  if (spec.type === 'ExternalName') return false;
  const primary = spec.clusterIPs[0] ?? spec.clusterIP;
  if (primary === 'None') return false;
  if (primary === '') {
    // The API server always allocates one; from a manifest this is a mistake.
    problems.push(problemAbout(svc, 'error', 'spec.clusterIP', 'is empty (no address allocated); Service not proxied'));
    return false;
  }
  return true;
}

/**
 * The Service (namespace/name) an EndpointSlice feeds, or undefined for a
 * slice kube-proxy would not use (another proxy's, headless, unlabelled,
 * FQDN), reporting what is worth reporting.
 */
export function sliceService(slice: EndpointSlice, problems: Problem[]): string | undefined {
  const labels = slice.metadata.labels;
  // kube-proxy's informer does not even see these.
  if (hasNotProxiedLabel(labels)) return undefined;
  const svcName = labels[SERVICE_NAME_LABEL];
  if (svcName === undefined || svcName === '') {
    problems.push(
      problemAbout(slice, 'warning', `metadata.labels["${SERVICE_NAME_LABEL}"]`, 'is missing; the EndpointSlice belongs to no Service'),
    );
    return undefined;
  }
  if (slice.addressType === 'FQDN') return undefined; // FQDN slices are not proxied by kube-proxy either
  slice.ports.forEach((p, i) => {
    if (p.port === undefined) {
      problems.push(problemAbout(slice, 'warning', `ports[${i}].port`, 'is not set (all ports); this port is ignored'));
    }
  });
  return flat(slice.metadata.namespace, '/', svcName);
}

/** The IP slices (both families) of each proxied Service, keyed by namespace/name, reporting slices that cannot be used. */
function indexSlices(
  slices: readonly EndpointSlice[],
  services: ReadonlyMap<string, { proxied: boolean }>,
  problems: Problem[],
): Map<string, ModelSlice[]> {
  const bySvc = new Map<string, ModelSlice[]>();
  for (const slice of slices) {
    const own: Problem[] = [];
    const key = sliceService(slice, own);
    if (key === undefined) {
      problems.push(...own);
      continue;
    }
    const svc = services.get(key);
    if (svc === undefined) {
      problems.push(problemAbout(slice, 'warning', '', `no Service ${key} for this EndpointSlice`));
      continue;
    }
    if (!svc.proxied) continue;
    problems.push(...own);
    const list = bySvc.get(key);
    const kept = modelSlice(slice as IpSlice);
    if (list === undefined) bySvc.set(key, [kept]);
    else list.push(kept);
  }
  return bySvc;
}

/** Order of frontends in the state: IPv4 before IPv6, ip (numerically), port, protocol, external before internal. */
export function sortFrontends(frontends: Iterable<Frontend>): Frontend[] {
  const keyed = [...frontends].map((f) => {
    const rest = (f.protocol === 'TCP' ? 0 : 2) + (f.scope === 'external' ? 0 : 1);
    const at = ipOrder(f.ip, f.port);
    return { f, order: typeof at === 'number' ? at * 4 + rest : `${at}${rest}` };
  });
  // Numbers (IPv4) sort before strings (IPv6).
  return keyed
    .sort((a, b) => {
      const an = typeof a.order === 'number';
      if (an !== (typeof b.order === 'number')) return an ? -1 : 1;
      return a.order < b.order ? -1 : a.order > b.order ? 1 : 0;
    })
    .map((k) => k.f);
}

export function buildDesiredState(input: DesiredInput): { state: DesiredState; problems: Problem[] } {
  const problems: Problem[] = [];
  const services = sortedUnique(input.services, problems);
  const slices = sortedUnique(input.slices, problems);

  const proxied = new Map<string, { svc: Service; proxied: boolean }>();
  for (const svc of services) proxied.set(objectId(svc), { svc, proxied: isProxied(svc, problems) });
  const slicesBySvc = indexSlices(slices, proxied, problems);

  // Services are visited in id order, so the first claimant of a frontend is
  // the one whose namespace/name sorts first.
  const claimed = new Map<string, Frontend>();
  for (const { svc, proxied: isOn } of proxied.values()) {
    if (!isOn) continue;
    const candidates = serviceFrontends(svc, slicesBySvc.get(objectId(svc)) ?? [], input.node, problems);
    const won = keepClaimedFrontends(svc, candidates, (key) => {
      const owner = claimed.get(key);
      return owner && { id: `${owner.service.namespace}/${owner.service.name}`, type: owner.type };
    }, problems);
    for (const f of won) claimed.set(f.key, f);
  }

  const frontends = new Map<string, Frontend>();
  for (const f of sortFrontends(claimed.values())) frontends.set(f.key, f);
  return { state: { frontends }, problems };
}
