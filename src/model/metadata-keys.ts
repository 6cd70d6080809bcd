// Every annotation and label svcmap reads from Kubernetes objects, declared
// once: the model and the sources take their names from here, and the
// reference docs (docs/reference/annotations.md, `make docs`) are written
// from this table. Pure data.
import { LB_ALGORITHM_NAMES, LB_MODES, MAGLEV_TABLE_SIZES, SVCMAP_MAGLEV_DEFAULT_M } from '../maps/constants.ts';

export interface MetadataKey {
  /** The annotation or label, as written in metadata. */
  key: string;
  kind: 'annotation' | 'label';
  /** The objects svcmap reads it on. */
  on: readonly ('Service' | 'EndpointSlice' | 'Node' | 'Pod' | 'Namespace')[];
  /** Who writes it: the user, or a Kubernetes controller. */
  setBy: string;
  /** What values svcmap accepts, in words. */
  values: string;
  /** What applies when it is absent or not accepted. */
  otherwise: string;
  /** What svcmap does with it. */
  meaning: string;
}

export const METADATA_KEYS = {
  lbAlgorithm: {
    key: 'svcmap.io/lb-algorithm',
    kind: 'annotation',
    on: ['Service'],
    setBy: 'the user',
    values: LB_ALGORITHM_NAMES.join(', '),
    otherwise:
      "the node's default (svcmap agent --lb-algorithm, chart value lbAlgorithm); an unknown value is a warning on the Service (an UnknownAnnotationValue Event)",
    meaning: 'How each frontend of the Service picks a backend for a new connection, in the socket LB and at tc.',
  },
  sourceHashPort: {
    key: 'svcmap.io/lb-source-hash-port',
    kind: 'annotation',
    on: ['Service'],
    setBy: 'the user',
    values: 'true, false',
    otherwise: 'false',
    meaning:
      "With lb-algorithm sh, tc hashes the client's source port with its address (the socket LB hashes the client's network namespace either way).",
  },
  maglevTableSize: {
    key: 'svcmap.io/maglev-table-size',
    kind: 'annotation',
    on: ['Service'],
    setBy: 'the user',
    values: MAGLEV_TABLE_SIZES.join(', '),
    otherwise: String(SVCMAP_MAGLEV_DEFAULT_M),
    meaning:
      'The Maglev lookup table size M of each frontend (lb-algorithm maglev only); keep it above ~100x the backends. Memory: 2 bytes per position per frontend.',
  },
  lbMode: {
    key: 'svcmap.io/lb-mode',
    kind: 'annotation',
    on: ['Service'],
    setBy: 'the user',
    values: LB_MODES.join(', '),
    otherwise:
      "the node's default (svcmap agent --lb-mode, chart value lbMode); an unknown value is a warning on the Service (an UnknownAnnotationValue Event)",
    meaning:
      "How traffic from outside reaches a backend on another node through the Service's NodePort, LoadBalancer and externalIP frontends: snat, with the node's address as source (replies return through the node); dsr, with the client's address kept (the backend's node answers the client directly); hybrid, dsr for TCP ports and snat for UDP ports. ClusterIP traffic is not affected.",
  },
  serviceProxyName: {
    key: 'service.kubernetes.io/service-proxy-name',
    kind: 'label',
    on: ['Service', 'EndpointSlice'],
    setBy: 'the user (another proxy owns the Service)',
    values: 'any (its presence counts)',
    otherwise: 'the Service is proxied',
    meaning:
      'An object carrying it is left alone, as kube-proxy does: the Kubernetes source filters it at the API server; a Service that gains it leaves the maps.',
  },
  headless: {
    key: 'service.kubernetes.io/headless',
    kind: 'label',
    on: ['Service', 'EndpointSlice'],
    setBy: 'the EndpointSlice controller (slices of headless Services)',
    values: 'any (its presence counts)',
    otherwise: 'the Service is proxied',
    meaning: 'An object carrying it is left to DNS, as kube-proxy does.',
  },
  serviceName: {
    key: 'kubernetes.io/service-name',
    kind: 'label',
    on: ['EndpointSlice'],
    setBy: 'the EndpointSlice controller',
    values: "the name of a Service in the slice's namespace",
    otherwise: 'the slice belongs to no Service (a warning)',
    meaning: "Which Service an EndpointSlice's endpoints serve.",
  },
  lastChangeTriggerTime: {
    key: 'endpoints.kubernetes.io/last-change-trigger-time',
    kind: 'annotation',
    on: ['EndpointSlice'],
    setBy: 'the EndpointSlice controller',
    values: 'an RFC 3339 time',
    otherwise: 'no latency observed for that change (an unreadable value is ignored)',
    meaning:
      'Start of the network programming latency: svcmap_network_programming_duration_seconds and kubeproxy_network_programming_duration_seconds observe from it to the map write.',
  },
  zone: {
    key: 'topology.kubernetes.io/zone',
    kind: 'label',
    on: ['Node'],
    setBy: 'the cloud provider or the cluster admin',
    values: 'a zone name',
    otherwise: 'zone hints are ignored (every endpoint is used)',
    meaning: "The node's zone: which EndpointSlice zone hints (trafficDistribution PreferClose) apply to this node.",
  },
  socketLb: {
    key: 'svcmap.io/socket-lb',
    kind: 'annotation',
    on: ['Pod', 'Namespace'],
    setBy: 'the user (a service mesh: the namespaces it injects)',
    values: 'bypass, on',
    otherwise:
      "the Namespace's value, else on; an unknown value is a warning on its object (an UnknownAnnotationValue Event) and counts as absent",
    meaning:
      "bypass: the socket LB leaves the Pod's sockets alone (its traffic is translated per packet at its veth, so a sidecar's iptables REDIRECT sees the ClusterIP); on: the socket LB translates them (a Pod's own value wins over its Namespace's). Needs --veth-lb (chart socketLB.vethTranslation); takes effect for sockets that connect or send after the change. Host-network Pods keep the socket LB.",
  },
} as const satisfies Record<string, MetadataKey>;
