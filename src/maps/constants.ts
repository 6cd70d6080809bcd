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
export const MAP_METRICS = 'svcmap_metrics';
/** SNAT source address per egress device (ifindex -> IPv4). */
export const MAP_DEV_ADDR = 'svcmap_devaddr';
export const MAP_BE_CONNS = 'svcmap_be_conns';
export const MAP_SK_BACKEND = 'svcmap_sk_be';
export const MAP_MAGLEV = 'svcmap_maglev';
/** Zone id -> zone name, for the backends' zone field (dump only). */
export const MAP_ZONES = 'svcmap_zones';
export const ZONES_MAX = 1024;
/** struct zone_name: a NUL-terminated name of at most ZONE_NAME_LEN - 1 bytes. */
export const ZONE_NAME_LEN = 64;
/** Socket termination's working set (bpf/sock_destroy.c; not pinned). */
export const MAP_SK_TERM = 'svcmap_sk_term';
export const SK_TERM_MAX = 1024;
/** The IPv6 twins of the services, backends and reverse NAT maps. */
export const MAP_SERVICES6 = 'svcmap_svc6';
export const MAP_BACKENDS6 = 'svcmap_be6';
export const MAP_REVNAT6 = 'svcmap_revnat6';
export const MAP_SK_REVNAT6 = 'svcmap_sk_rnat6';
/** Connection counts, socket storage and Maglev tables of IPv6 backends and frontends (ids of svcmap_be6 / svcmap_revnat6). */
export const MAP_BE_CONNS6 = 'svcmap_conns6';
export const MAP_SK_BACKEND6 = 'svcmap_sk_be6';
export const MAP_MAGLEV6 = 'svcmap_maglev6';
/** The tc datapath's IPv6 twins: conntrack, SNAT address per device, loadBalancerSourceRanges. */
export const MAP_CT6 = 'svcmap_ct6';
export const MAP_DEV_ADDR6 = 'svcmap_devaddr6';
export const MAP_SRC_RANGE6 = 'svcmap_srcrng6';
/** The socket recount's working set (bpf/sock_count.c; not pinned); svcmap_sk_cnt6 for svcmap_sk_be6. */
export const MAP_SK_COUNT = 'svcmap_sk_count';
export const MAP_SK_COUNT6 = 'svcmap_sk_cnt6';
/** Socket termination's working set for IPv6 sockets (bpf/sock_destroy.c; not pinned). */
export const MAP_SK_TERM6 = 'svcmap_sk_term6';
export const SK_COUNT_MAX = 65536;

export const CT_DIR_FWD = 0;
export const CT_DIR_REPLY_IN = 1;
export const CT_DIR_REPLY_OUT = 2;
/** A fragmented datagram's translation, for its fragments after the first (bpf/lib/frag.h). */
export const CT_DIR_FRAG = 3;
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
/** The flow counts for its backend's live connections (a frontend with lc, sed or nq). */
export const CT_F_COUNTED = 0x40;

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
export const SVC_F_SH_PORT = 0x0400;

export const LB_ALG_RANDOM = 0;
export const LB_ALG_RR = 1;
export const LB_ALG_SH = 2;
export const LB_ALG_MAGLEV = 3;
export const LB_ALG_LC = 4;
export const LB_ALG_SED = 5;
export const LB_ALG_NQ = 6;
export const LB_ALG_DH = 7;
/** The most slots lc/sed/nq look at for one connection. */
export const LB_SCAN_MAX = 64;

/** svc_value.algorithm by its name (the annotation's and --lb-algorithm's values). */
export const LB_ALGORITHMS = {
  random: LB_ALG_RANDOM, rr: LB_ALG_RR, sh: LB_ALG_SH, maglev: LB_ALG_MAGLEV,
  lc: LB_ALG_LC, sed: LB_ALG_SED, nq: LB_ALG_NQ, dh: LB_ALG_DH,
} as const;
export type LbAlgorithmName = keyof typeof LB_ALGORITHMS;
/** What a Service may ask for today. */
export const LB_ALGORITHMS_IMPLEMENTED = ['random', 'rr', 'sh', 'lc', 'sed', 'nq', 'dh', 'maglev'] as const;
export type ImplementedLbAlgorithm = (typeof LB_ALGORITHMS_IMPLEMENTED)[number];

/** Maglev's table size M when a Service names none (svcmap.io/maglev-table-size). */
export const MAGLEV_DEFAULT_M = 16381;
/**
 * The table sizes a Service may ask for: primes (Maglev's permutation needs
 * M prime), each about twice the one before, as Cilium offers. At most
 * 65521: a table's entry 0 holds M in a __u16. M should be well above 100x
 * the backends for an even spread.
 */
export const MAGLEV_TABLE_SIZES = [251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521] as const;
export const MAGLEV_MAX = 65536;
/** struct maglev_entry: hash positions per inner-map entry. */
export const MAGLEV_SLOTS_PER_ENTRY = 4;

/** The name of svc_value.algorithm `id`, or undefined for one this svcmap does not know. */
export function lbAlgorithmName(id: number): LbAlgorithmName | undefined {
  return (Object.keys(LB_ALGORITHMS) as LbAlgorithmName[]).find((n) => LB_ALGORITHMS[n] === id);
}

export const BACKEND_STATE_ACTIVE = 0;
export const BACKEND_STATE_TERMINATING = 1;

export const BACKEND_F_LOCAL = 0x01;

/** struct conns_adjust.field: which count of struct backend_conns. */
export const CONNS_FIELD_SOCK = 0;
export const CONNS_FIELD_TC = 1;

/** affinity_key.origin: which datapath made the entry (and what its client is). */
export const AFFINITY_ORIGIN_SOCK = 1;
export const AFFINITY_ORIGIN_TC = 2;
/** Socket LB affinity of IPv6 frontends (rev_nat ids of svcmap_revnat6). */
export const AFFINITY_ORIGIN_SOCK6 = 3;
/** tc affinity of IPv6 frontends (the client's /64 and folded interface id). */
export const AFFINITY_ORIGIN_TC6 = 4;

/**
 * Datapath counters (enum dp_hook, enum dp_reason in the header): the map's
 * index is hook * DP_REASON_STRIDE + reason. Names are the metric's labels.
 */
export const DP_HOOK_TC_INGRESS = 0;
export const DP_HOOK_TC_EGRESS = 1;
export const DP_HOOK_CONNECT4 = 2;
export const DP_HOOK_SENDMSG4 = 3;
export const DP_HOOK_RECVMSG4 = 4;
export const DP_HOOK_GETPEERNAME4 = 5;
export const DP_HOOK_CONNECT6 = 6;
export const DP_HOOK_SENDMSG6 = 7;
export const DP_HOOK_RECVMSG6 = 8;
export const DP_HOOK_GETPEERNAME6 = 9;
export const DP_HOOK_MAX = 10;

export const DP_R_PASSED = 0;
export const DP_R_OTHER_PROTO = 1;
export const DP_R_MALFORMED = 2;
export const DP_R_TRANSLATED = 3;
export const DP_R_REPLY_TRANSLATED = 4;
export const DP_R_TO_STACK_NO_ROUTE = 5;
export const DP_R_TO_STACK_MTU = 6;
export const DP_R_TO_STACK_TTL = 7;
export const DP_R_ICMP_TRANSLATED = 8;
export const DP_R_SK_REVNAT_FAILED = 9;
export const DP_R_NO_BACKEND = 10;
export const DP_R_NO_LOCAL_ENDPOINT = 11;
export const DP_R_SOURCE_DENIED = 12;
export const DP_R_NO_SNAT_ADDR = 13;
export const DP_R_SNAT_EXHAUSTED = 14;
export const DP_R_CT_INSERT_FAILED = 15;
export const DP_R_REWRITE_FAILED = 16;
export const DP_R_FRAGMENT = 17;
export const DP_R_REVNAT_STALE = 18;
export const DP_R_SNAT_NO_ROUTE = 19;
export const DP_R_IPV6_EXT_HDR = 20;
export const DP_R_MAX = 21;

export const DP_REASON_STRIDE = 32;
export const SVCMAP_METRICS_MAX = 512;

export interface DpHook { id: number; name: string; kind: 'tc' | 'sock' }
/** The hooks, with the label each is exported under. */
export const DP_HOOKS: readonly DpHook[] = [
  { id: DP_HOOK_TC_INGRESS, name: 'tc_ingress', kind: 'tc' },
  { id: DP_HOOK_TC_EGRESS, name: 'tc_egress', kind: 'tc' },
  { id: DP_HOOK_CONNECT4, name: 'connect4', kind: 'sock' },
  { id: DP_HOOK_SENDMSG4, name: 'sendmsg4', kind: 'sock' },
  { id: DP_HOOK_RECVMSG4, name: 'recvmsg4', kind: 'sock' },
  { id: DP_HOOK_GETPEERNAME4, name: 'getpeername4', kind: 'sock' },
  { id: DP_HOOK_CONNECT6, name: 'connect6', kind: 'sock' },
  { id: DP_HOOK_SENDMSG6, name: 'sendmsg6', kind: 'sock' },
  { id: DP_HOOK_RECVMSG6, name: 'recvmsg6', kind: 'sock' },
  { id: DP_HOOK_GETPEERNAME6, name: 'getpeername6', kind: 'sock' },
];

export interface DpReason {
  id: number;
  /** The metric's reason label. */
  name: string;
  /** The hooks that count it (by name). */
  hooks: readonly string[];
  /** A drop (tc) or a refused connect/sendmsg (socket hooks). */
  drop: boolean;
  help: string;
}

const TC_IN = ['tc_ingress'];
const TC = ['tc_ingress', 'tc_egress'];
const SOCK_FWD = ['connect4', 'sendmsg4', 'connect6', 'sendmsg6'];
const SOCK_REV = ['recvmsg4', 'getpeername4', 'recvmsg6', 'getpeername6'];

/** Every reason, which hooks count it, and what it means (`svcmap status`, docs). */
export const DP_REASONS: readonly DpReason[] = [
  { id: DP_R_PASSED, name: 'passed', hooks: [...TC, ...SOCK_FWD, ...SOCK_REV], drop: false, help: 'not for svcmap (no frontend, no tracked flow): untouched' },
  { id: DP_R_OTHER_PROTO, name: 'other_protocol', hooks: TC, drop: false, help: 'not IP TCP/UDP or an ICMP error (ARP, ICMP echo, ICMPv6 neighbour discovery): untouched' },
  { id: DP_R_MALFORMED, name: 'malformed', hooks: TC, drop: false, help: 'headers cut short or invalid: untouched, for the stack to judge' },
  { id: DP_R_TRANSLATED, name: 'translated', hooks: [...TC_IN, ...SOCK_FWD], drop: false, help: 'sent to a backend' },
  { id: DP_R_REPLY_TRANSLATED, name: 'reply_translated', hooks: [...TC, ...SOCK_REV], drop: false, help: 'a reply shown as coming from the frontend' },
  { id: DP_R_TO_STACK_NO_ROUTE, name: 'to_stack_no_route', hooks: TC_IN, drop: false, help: 'translated; no forwardable route, left to the stack' },
  { id: DP_R_TO_STACK_MTU, name: 'to_stack_mtu', hooks: TC_IN, drop: false, help: 'translated; larger than the egress MTU, left to the stack' },
  { id: DP_R_TO_STACK_TTL, name: 'to_stack_ttl', hooks: TC_IN, drop: false, help: 'translated; TTL expires, left to the stack' },
  { id: DP_R_ICMP_TRANSLATED, name: 'icmp_translated', hooks: TC, drop: false, help: 'an ICMP error about a tracked flow, translated back' },
  { id: DP_R_SK_REVNAT_FAILED, name: 'sk_revnat_write_failed', hooks: SOCK_FWD, drop: false, help: 'sent to a backend, but the per-socket reverse entry could not be written' },
  { id: DP_R_NO_BACKEND, name: 'no_backend', hooks: [...TC_IN, ...SOCK_FWD], drop: true, help: 'the frontend has no backend' },
  { id: DP_R_NO_LOCAL_ENDPOINT, name: 'no_local_endpoint', hooks: TC_IN, drop: true, help: 'externalTrafficPolicy Local, no endpoint on this node' },
  { id: DP_R_SOURCE_DENIED, name: 'source_denied', hooks: TC_IN, drop: true, help: 'outside loadBalancerSourceRanges' },
  { id: DP_R_NO_SNAT_ADDR, name: 'no_snat_address', hooks: TC_IN, drop: true, help: 'SNAT needed, the egress device has no address of the flow\'s family' },
  { id: DP_R_SNAT_EXHAUSTED, name: 'snat_ports_exhausted', hooks: TC_IN, drop: true, help: 'no free SNAT port towards the backend' },
  { id: DP_R_CT_INSERT_FAILED, name: 'ct_insert_failed', hooks: TC_IN, drop: true, help: 'the conntrack entry could not be stored' },
  { id: DP_R_REWRITE_FAILED, name: 'rewrite_failed', hooks: TC, drop: true, help: 'a header or checksum write failed' },
  { id: DP_R_FRAGMENT, name: 'fragment', hooks: TC, drop: false, help: 'an IP fragment: untouched' },
  { id: DP_R_IPV6_EXT_HDR, name: 'ipv6_ext_header', hooks: TC, drop: false, help: 'IPv6 with extension headers (or a fragment): untouched' },
  { id: DP_R_SNAT_NO_ROUTE, name: 'snat_no_route', hooks: TC_IN, drop: true, help: 'SNAT needed, no forwardable route to the backend' },
  { id: DP_R_REVNAT_STALE, name: 'revnat_stale', hooks: SOCK_REV, drop: false, help: "the reverse entry's frontend is gone: removed, the real peer shown" },
];

/** The counters map's index of (hook, reason). */
export function dpIndex(hook: number, reason: number): number {
  return hook * DP_REASON_STRIDE + reason;
}

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
  [SVC_F_SH_PORT, 'sh-port'],
];

/** Conntrack entry flag names for display, in bit order. */
export const CT_FLAG_NAMES: Array<[number, string]> = [
  [CT_F_SNAT, 'snat'],
  [CT_F_LOCAL, 'local'],
  [CT_F_SEEN_REPLY, 'seen-reply'],
  [CT_F_CLOSING, 'closing'],
  [CT_F_FIN_FWD, 'fin-fwd'],
  [CT_F_FIN_REPLY, 'fin-reply'],
  [CT_F_COUNTED, 'counted'],
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
