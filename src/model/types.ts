// The desired state: what the BPF maps should hold, derived from Kubernetes
// objects by pure functions in this folder. src/sync/ compares it with what the
// maps hold; nothing here knows map layouts, files or the API server (of the
// datapath it knows only the load-balancing algorithms' names).

import type { LbAlgorithmName, LbMode } from '../maps/constants.ts';

export type Protocol = 'TCP' | 'UDP';

/** active: a ready endpoint. terminating: serving+terminating, used only while no endpoint is ready. */
export type BackendState = 'active' | 'terminating';

export interface Backend {
  ip: string; // dotted IPv4, or canonical IPv6 (src/util/ipv6.ts): a frontend's backends are of its own family
  port: number; // 1..65535
  protocol: Protocol;
  state: BackendState;
  nodeName?: string;
  zone?: string;
  /** The endpoint runs on the node the agent serves (nodeName matches). */
  local: boolean;
}

/** HostPort: a Pod's hostPort mapping (host-ports.ts), whose only backend is that Pod. */
export type FrontendType = 'ClusterIP' | 'NodePort' | 'ExternalIP' | 'LoadBalancer' | 'HostPort';

/** external: what traffic from outside the node (and ClusterIP traffic) sees; internal: the all-backends twin of an ETP=Local frontend. */
export type Scope = 'external' | 'internal';

export interface ServiceRef {
  namespace: string;
  name: string;
  /** The Service port's name ('' for a single unnamed port). */
  portName: string;
  /** 'Pod': a hostPort mapping's frontend, named by its Pod (namespace, name); absent: a Service's. */
  kind?: 'Pod';
}

export interface Frontend {
  /** Canonical identity: `${ip}:${port}/${protocol}` (`[${ip}]:...` for IPv6) plus `/internal` for the internal scope. */
  key: string;
  ip: string; // dotted IPv4 or canonical IPv6; 0.0.0.0 (::) for the NodePort wildcard entry
  port: number;
  protocol: Protocol;
  scope: Scope;
  type: FrontendType;
  service: ServiceRef;
  /** externalTrafficPolicy: Local (NodePort, LoadBalancer, ExternalIP frontends). */
  externalLocal: boolean;
  /** internalTrafficPolicy: Local (ClusterIP frontends). */
  internalLocal: boolean;
  /** NodePort frontend that matches any local address (socket LB for 127.0.0.1:NodePort). */
  wildcard: boolean;
  /** A twin entry with scope 'internal' exists (ETP=Local). */
  twoScopes: boolean;
  /** svcmap.io/lb-algorithm; absent: the node's default (--lb-algorithm). */
  algorithm?: LbAlgorithmName;
  /** svcmap.io/lb-source-hash-port: "true": sh at tc hashes the source port too. */
  sourceHashPort: boolean;
  /** svcmap.io/maglev-table-size, when the Service gives a valid one (maglev's table size M). */
  maglevTableSize?: number;
  /** svcmap.io/lb-mode; absent: the node's default (--lb-mode). */
  lbMode?: LbMode;
  /** sessionAffinity: ClientIP timeout in seconds, or 0 for none. */
  affinityTimeoutSeconds: number;
  /** loadBalancerSourceRanges as CIDR strings (LoadBalancer frontends); empty = no restriction. */
  sourceRanges: string[];
  /** spec.healthCheckNodePort, on the external frontends of an externalTrafficPolicy Local Service that has one. */
  healthCheckNodePort?: number;
  /** Deduplicated, sorted by ip then port. Empty means the service rejects connections. */
  backends: Backend[];
}

export interface DesiredState {
  /** Keyed by Frontend.key. */
  frontends: Map<string, Frontend>;
}

/** Something wrong with one object, reported and skipped; other objects are unaffected. */
export interface Problem {
  kind: string; // 'Service', 'EndpointSlice', 'Node', or the object's kind
  namespace: string; // '' for cluster-scoped or unknown
  name: string; // '' when the object has no name
  /** Field path, e.g. `endpoints[1].addresses[0]`; '' for the object as a whole. */
  path: string;
  message: string;
  /** Where it came from: a file path (file source) or 'api' (Kubernetes source). */
  source?: string;
  /** 'error': object skipped; 'warning': object used, one part ignored (e.g. an IPv6 ClusterIP). */
  severity: 'error' | 'warning';
  /** The object is valid but wants a frontend another Service already holds (counted apart from invalid objects). */
  conflict?: true;
  /** The Event reason it is reported under, where the model says (else the reporter decides by severity and path). */
  reason?: 'SocketLbBypassIgnored';
}

/** The node the agent runs on: its name (for local endpoints) and addresses (for NodePort frontends). */
export interface NodeInfo {
  name: string;
  /** IPv4 addresses NodePort frontends listen on (InternalIP, ExternalIP). */
  addresses: string[];
  /** IPv6 addresses NodePort frontends listen on; kept apart so that IPv4 users (tc's node IP) see IPv4 only. */
  addresses6?: string[];
  /** The node's topology.kubernetes.io/zone label: which EndpointSlice zone hints apply. */
  zone?: string;
}
