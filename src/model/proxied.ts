// What kube-proxy would program, object by object: the labels that keep a
// Service or EndpointSlice away from every proxy, which Services are proxied,
// and which Service a slice feeds. The incremental model (incremental.ts) and
// the Kubernetes source's selection use these, as does the tests' oracle.
import type { Problem } from './types.ts';
import type { EndpointSlice, Service } from './schemas.ts';
import { flat } from '../util/flat-string.ts';
import { METADATA_KEYS } from './metadata-keys.ts';
import { problemAbout } from './problems.ts';

export const SERVICE_NAME_LABEL = METADATA_KEYS.serviceName.key;
/** Services (and their slices) carrying this label belong to another proxy. */
export const SERVICE_PROXY_NAME_LABEL = METADATA_KEYS.serviceProxyName.key;
/**
 * Set by the EndpointSlice controller on slices of headless Services; a
 * Service carrying it (whatever its clusterIP) is left to DNS as well.
 */
export const HEADLESS_LABEL = METADATA_KEYS.headless.key;
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

export type Named = { metadata: { namespace: string; name: string } };

export function objectId(obj: Named): string {
  return flat(obj.metadata.namespace, '/', obj.metadata.name);
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
