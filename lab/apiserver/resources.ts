// The resources the fake serves, and the URL grammar of the Kubernetes REST API for them.
// One table, so that adding a resource is one entry.

import type { KubeObject } from './types.ts';

export interface Resource {
  kind: string;
  listKind: string;
  /** The URL segment, also what Status details call "kind". */
  plural: string;
  group: string;
  version: string;
  apiVersion: string;
  namespaced: boolean;
  /** Services and nodes have a status subresource: a PUT to the object keeps the stored status. */
  statusSubresource: boolean;
  /** The real registry clears a Service's status on create (PrepareForCreate). */
  clearStatusOnCreate: boolean;
  /** The real Service registry answers DELETE with the deleted object; others with a Status. */
  returnDeletedObject: boolean;
  /** Field selectors the real server accepts for this resource, beyond metadata.name/namespace. */
  extraFields: Record<string, (obj: KubeObject) => string>;
}

function str(v: unknown): string {
  return v === undefined || v === null ? '' : String(v);
}

function spec(obj: KubeObject): Record<string, unknown> {
  const s = obj['spec'];
  return typeof s === 'object' && s !== null ? (s as Record<string, unknown>) : {};
}

export const RESOURCES: readonly Resource[] = [
  {
    kind: 'Service',
    listKind: 'ServiceList',
    plural: 'services',
    group: '',
    version: 'v1',
    apiVersion: 'v1',
    namespaced: true,
    statusSubresource: true,
    clearStatusOnCreate: true,
    returnDeletedObject: true,
    extraFields: { 'spec.clusterIP': (o) => str(spec(o)['clusterIP']), 'spec.type': (o) => str(spec(o)['type']) },
  },
  {
    kind: 'EndpointSlice',
    listKind: 'EndpointSliceList',
    plural: 'endpointslices',
    group: 'discovery.k8s.io',
    version: 'v1',
    apiVersion: 'discovery.k8s.io/v1',
    namespaced: true,
    statusSubresource: false,
    clearStatusOnCreate: false,
    returnDeletedObject: false,
    extraFields: {},
  },
  {
    kind: 'Node',
    listKind: 'NodeList',
    plural: 'nodes',
    group: '',
    version: 'v1',
    apiVersion: 'v1',
    namespaced: false,
    statusSubresource: true,
    clearStatusOnCreate: false,
    returnDeletedObject: false,
    extraFields: { 'spec.unschedulable': (o) => (spec(o)['unschedulable'] === true ? 'true' : 'false') },
  },
  {
    // The agent watches its node's Pods (spec.nodeName) for their hostPorts.
    kind: 'Pod',
    listKind: 'PodList',
    plural: 'pods',
    group: '',
    version: 'v1',
    apiVersion: 'v1',
    namespaced: true,
    statusSubresource: true,
    clearStatusOnCreate: false,
    returnDeletedObject: true,
    extraFields: { 'spec.nodeName': (o) => str(spec(o)['nodeName']) },
  },
  {
    // The agent reads the Namespaces' svcmap.io/socket-lb.
    kind: 'Namespace',
    listKind: 'NamespaceList',
    plural: 'namespaces',
    group: '',
    version: 'v1',
    apiVersion: 'v1',
    namespaced: false,
    statusSubresource: true,
    clearStatusOnCreate: false,
    returnDeletedObject: true,
    extraFields: {},
  },
  {
    // What the agent writes about objects it cannot program.
    kind: 'Event',
    listKind: 'EventList',
    plural: 'events',
    group: 'events.k8s.io',
    version: 'v1',
    apiVersion: 'events.k8s.io/v1',
    namespaced: true,
    statusSubresource: false,
    clearStatusOnCreate: false,
    returnDeletedObject: false,
    extraFields: {},
  },
];

/** Look a resource up by kind ("Service"), plural ("services") or short list kind, case-insensitively. */
export function resourceFor(kindOrPlural: string): Resource {
  const k = kindOrPlural.toLowerCase();
  const r = RESOURCES.find((x) => x.kind.toLowerCase() === k || x.plural === k || x.listKind.toLowerCase() === k);
  if (!r)
    throw new Error(
      `test API server: unknown resource ${JSON.stringify(kindOrPlural)} (serves ${RESOURCES.map((x) => x.kind).join(', ')})`,
    );
  return r;
}

/** "services" for the core group, "endpointslices.discovery.k8s.io" otherwise, as in real error messages. */
export function qualifiedName(r: Resource): string {
  return r.group ? `${r.plural}.${r.group}` : r.plural;
}

export interface ParsedPath {
  resource: Resource;
  /** Set for namespaced URLs (/namespaces/{ns}/...). */
  namespace?: string;
  name?: string;
  subresource?: string;
}

/**
 * Parse /api/v1/[namespaces/{ns}/]{plural}[/{name}[/{sub}]] and the /apis/{group}/{version}/...
 * twin. Returns undefined for anything else (the caller answers 404).
 */
export function parsePath(pathname: string): ParsedPath | undefined {
  const parts = pathname
    .split('/')
    .filter((p) => p !== '')
    .map(decodeURIComponent);
  let group: string;
  let version: string;
  let rest: string[];
  if (parts[0] === 'api' && parts.length >= 2) {
    group = '';
    version = parts[1]!;
    rest = parts.slice(2);
  } else if (parts[0] === 'apis' && parts.length >= 3) {
    group = parts[1]!;
    version = parts[2]!;
    rest = parts.slice(3);
  } else {
    return undefined;
  }
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1]!;
    rest = rest.slice(2);
  }
  const [plural, name, subresource, ...extra] = rest;
  if (plural === undefined || extra.length > 0) return undefined;
  const resource = RESOURCES.find((r) => r.plural === plural && r.group === group && r.version === version);
  if (!resource) return undefined;
  // A namespaced object is only addressable under its namespace; a cluster-scoped one never is.
  if (namespace !== undefined && !resource.namespaced) return undefined;
  if (name !== undefined && resource.namespaced && namespace === undefined) return undefined;
  if (subresource !== undefined && !(subresource === 'status' && resource.statusSubresource)) return undefined;
  const out: ParsedPath = { resource };
  if (namespace !== undefined) out.namespace = namespace;
  if (name !== undefined) out.name = name;
  if (subresource !== undefined) out.subresource = subresource;
  return out;
}
