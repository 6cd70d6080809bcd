// Builders for the three kinds the server serves, with the fields svcmap reads. Plain
// JSON, so they go through create()/apply() or an HTTP POST alike.

import type { KubeObject } from './types.ts';

export interface ServicePort {
  port: number;
  protocol?: 'TCP' | 'UDP' | 'SCTP';
  name?: string;
  targetPort?: number | string;
  nodePort?: number;
}

export interface ServiceOptions {
  namespace?: string;
  type?: 'ClusterIP' | 'NodePort' | 'LoadBalancer' | 'ExternalName';
  clusterIP?: string;
  /** Defaults to [clusterIP]. */
  clusterIPs?: string[];
  ports?: ServicePort[];
  selector?: Record<string, string>;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  externalIPs?: string[];
  externalName?: string;
  /** Extra spec fields (sessionAffinity, externalTrafficPolicy, ...). */
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

export function service(name: string, o: ServiceOptions = {}): KubeObject {
  const spec: Record<string, unknown> = { type: o.type ?? 'ClusterIP', ...(o.spec ?? {}) };
  if (o.clusterIP !== undefined) {
    spec['clusterIP'] = o.clusterIP;
    spec['clusterIPs'] = o.clusterIPs ?? [o.clusterIP];
  } else if (o.clusterIPs) {
    spec['clusterIP'] = o.clusterIPs[0];
    spec['clusterIPs'] = o.clusterIPs;
  }
  if (o.ports) spec['ports'] = o.ports.map((p) => ({ protocol: 'TCP', targetPort: p.port, ...p }));
  if (o.selector) spec['selector'] = o.selector;
  if (o.externalIPs) spec['externalIPs'] = o.externalIPs;
  if (o.externalName) spec['externalName'] = o.externalName;
  const metadata: KubeObject['metadata'] = { name, namespace: o.namespace ?? 'default' };
  if (o.labels) metadata.labels = o.labels;
  if (o.annotations) metadata.annotations = o.annotations;
  const obj: KubeObject = { apiVersion: 'v1', kind: 'Service', metadata, spec };
  if (o.status) obj['status'] = o.status;
  return obj;
}

export interface SliceEndpoint {
  addresses: string[];
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
  nodeName?: string;
  zone?: string;
}

export interface EndpointSliceOptions {
  namespace?: string;
  /** The owning Service (label kubernetes.io/service-name). */
  service: string;
  addressType?: 'IPv4' | 'IPv6' | 'FQDN';
  endpoints: SliceEndpoint[];
  ports?: Array<{ port: number; protocol?: 'TCP' | 'UDP' | 'SCTP'; name?: string }>;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export function endpointSlice(name: string, o: EndpointSliceOptions): KubeObject {
  const metadata: KubeObject['metadata'] = {
    name,
    namespace: o.namespace ?? 'default',
    labels: { 'kubernetes.io/service-name': o.service, 'endpointslice.kubernetes.io/managed-by': 'svcmap-test', ...(o.labels ?? {}) },
  };
  if (o.annotations) metadata.annotations = o.annotations;
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata,
    addressType: o.addressType ?? 'IPv4',
    endpoints: o.endpoints.map((e) => {
      const ep: Record<string, unknown> = {
        addresses: e.addresses,
        conditions: { ready: e.ready ?? true, serving: e.serving ?? e.ready ?? true, terminating: e.terminating ?? false },
      };
      if (e.nodeName) ep['nodeName'] = e.nodeName;
      if (e.zone) ep['zone'] = e.zone;
      return ep;
    }),
    ports: (o.ports ?? []).map((p) => ({ protocol: 'TCP', ...p })),
  };
}

export interface NodeOptions {
  internalIP?: string;
  externalIP?: string;
  labels?: Record<string, string>;
  unschedulable?: boolean;
}

export function node(name: string, o: NodeOptions = {}): KubeObject {
  const addresses: Array<{ type: string; address: string }> = [{ type: 'Hostname', address: name }];
  if (o.internalIP) addresses.unshift({ type: 'InternalIP', address: o.internalIP });
  if (o.externalIP) addresses.push({ type: 'ExternalIP', address: o.externalIP });
  const metadata: KubeObject['metadata'] = { name, labels: { 'kubernetes.io/hostname': name, ...(o.labels ?? {}) } };
  return { apiVersion: 'v1', kind: 'Node', metadata, spec: o.unschedulable ? { unschedulable: true } : {}, status: { addresses } };
}

export interface PodOptions {
  nodeName: string;
  /** status.podIPs, one per family; with any, the Pod is Running. */
  podIPs?: string[];
  ports?: Array<{ containerPort: number; hostPort?: number; hostIP?: string; protocol?: 'TCP' | 'UDP' | 'SCTP' }>;
  hostNetwork?: boolean;
}

/** A Pod bound to a node, as the kubelet reports it Running (or Pending without IPs). */
export function pod(name: string, o: PodOptions): KubeObject {
  const ips = o.podIPs ?? [];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: {
      nodeName: o.nodeName,
      ...(o.hostNetwork ? { hostNetwork: true } : {}),
      containers: [{ name: 'app', image: 'app', ports: o.ports ?? [] }],
    },
    status: ips.length ? { phase: 'Running', podIP: ips[0], podIPs: ips.map((ip) => ({ ip })) } : { phase: 'Pending' },
  };
}
