// The datapath's constants, mirrored from bpf/include/svcmap_maps.h (a test
// parses the header and compares every one of them).

export const MAP_SERVICES = 'svcmap_svc';
export const MAP_BACKENDS = 'svcmap_be';
export const MAP_REVNAT = 'svcmap_revnat';
export const MAP_SK_REVNAT = 'svcmap_sk_rnat';
export const MAP_CT = 'svcmap_ct';
export const MAP_SRC_RANGE = 'svcmap_srcrng';
export const MAP_CONFIG = 'svcmap_cfg';
export const MAP_AFFINITY = 'svcmap_affin';

export const CT_DIR_FWD = 0;
export const CT_DIR_REPLY_IN = 1;
export const CT_DIR_REPLY_OUT = 2;
export const CT_F_SNAT = 0x01;
export const CT_F_LOCAL = 0x02;
/** A packet came back from the backend: TCP established, UDP answered. */
export const CT_F_SEEN_REPLY = 0x04;
/** TCP: an RST in either direction, or a FIN from each side. */
export const CT_F_CLOSING = 0x08;
/** TCP: the client sent a FIN. */
export const CT_F_FIN_FWD = 0x10;
/** TCP: the backend sent a FIN. */
export const CT_F_FIN_REPLY = 0x20;

export const SVC_SCOPE_EXT = 0;
export const SVC_SCOPE_INT = 1;

export const SVC_F_CLUSTERIP = 0x0001;
export const SVC_F_NODEPORT = 0x0002;
export const SVC_F_EXTERNALIP = 0x0004;
export const SVC_F_LOADBALANCER = 0x0008;
export const SVC_F_ETP_LOCAL = 0x0010;
export const SVC_F_ITP_LOCAL = 0x0020;
export const SVC_F_AFFINITY = 0x0040;
export const SVC_F_WILDCARD = 0x0080;
export const SVC_F_SRC_RANGES = 0x0100;
export const SVC_F_TWO_SCOPES = 0x0200;

export const LB_ALG_RANDOM = 0;

export const BACKEND_STATE_ACTIVE = 0;
export const BACKEND_STATE_TERMINATING = 1;

export const BACKEND_F_LOCAL = 0x01;

/** affinity_key.origin: which datapath made the entry (and what its client is). */
export const AFFINITY_ORIGIN_SOCK = 1;
export const AFFINITY_ORIGIN_TC = 2;

export const IPPROTO_TCP = 6;
export const IPPROTO_UDP = 17;

/** Flag names for display, in bit order. */
export const SVC_FLAG_NAMES: Array<[number, string]> = [
  [SVC_F_CLUSTERIP, 'ClusterIP'],
  [SVC_F_NODEPORT, 'NodePort'],
  [SVC_F_EXTERNALIP, 'ExternalIP'],
  [SVC_F_LOADBALANCER, 'LoadBalancer'],
  [SVC_F_ETP_LOCAL, 'ETP=Local'],
  [SVC_F_ITP_LOCAL, 'ITP=Local'],
  [SVC_F_AFFINITY, 'affinity'],
  [SVC_F_WILDCARD, 'wildcard'],
  [SVC_F_SRC_RANGES, 'source-ranges'],
  [SVC_F_TWO_SCOPES, 'two-scopes'],
];

/** Conntrack entry flag names for display, in bit order. */
export const CT_FLAG_NAMES: Array<[number, string]> = [
  [CT_F_SNAT, 'snat'],
  [CT_F_LOCAL, 'local'],
  [CT_F_SEEN_REPLY, 'seen-reply'],
  [CT_F_CLOSING, 'closing'],
  [CT_F_FIN_FWD, 'fin-fwd'],
  [CT_F_FIN_REPLY, 'fin-reply'],
];

export function flagNames(flags: number): string[] {
  return SVC_FLAG_NAMES.filter(([bit]) => flags & bit).map(([, name]) => name);
}

export function protoName(proto: number): string {
  return proto === IPPROTO_TCP ? 'TCP' : proto === IPPROTO_UDP ? 'UDP' : `proto${proto}`;
}

export function protoNumber(name: 'TCP' | 'UDP'): number {
  return name === 'TCP' ? IPPROTO_TCP : IPPROTO_UDP;
}
