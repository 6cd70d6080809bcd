// The datapath's constants: the values come from the C headers under
// bpf/include/ (generated/constants.gen.ts, which `make constants` writes);
// what stands here is what only the agent knows: names, labels, lists.
import * as c from './generated/constants.gen.ts';

export * from './generated/constants.gen.ts';

/**
 * svc_value.algorithm by its name (the annotation's and --lb-algorithm's
 * values), every one a Service may ask for, in the order they are listed.
 */
export const LB_ALGORITHMS = {
  random: c.LB_ALG_RANDOM,
  rr: c.LB_ALG_RR,
  sh: c.LB_ALG_SH,
  lc: c.LB_ALG_LC,
  sed: c.LB_ALG_SED,
  nq: c.LB_ALG_NQ,
  dh: c.LB_ALG_DH,
  maglev: c.LB_ALG_MAGLEV,
} as const;
export type LbAlgorithmName = keyof typeof LB_ALGORITHMS;
/** The names of LB_ALGORITHMS, as a list (a zod enum, help texts, benchmarks). */
export const LB_ALGORITHM_NAMES = Object.keys(LB_ALGORITHMS) as [LbAlgorithmName, ...LbAlgorithmName[]];

/**
 * How a frontend from outside reaches a remote backend (--lb-mode, the
 * svcmap.io/lb-mode annotation): snat, the node's address as source and
 * replies back through the node; dsr, the client's address kept and the
 * backend's node answering the client directly (SVC_F_DSR); hybrid, dsr for
 * TCP and snat for UDP.
 */
export const LB_MODES = ['snat', 'dsr', 'hybrid'] as const;
export type LbMode = (typeof LB_MODES)[number];

/**
 * The table sizes a Service may ask for: primes (Maglev's permutation needs
 * M prime), each about twice the one before, as Cilium offers. At most
 * 65521: a table's entry 0 holds M in a __u16. M should be well above 100x
 * the backends for an even spread.
 */
export const MAGLEV_TABLE_SIZES = [251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521] as const;

/** The name of svc_value.algorithm `id`, or undefined for one this svcmap does not know. */
export function lbAlgorithmName(id: number): LbAlgorithmName | undefined {
  return LB_ALGORITHM_NAMES.find((n) => LB_ALGORITHMS[n] === id);
}

/**
 * Datapath counters (enum dp_hook, enum dp_reason in the header): the map's
 * index is hook * DP_REASON_STRIDE + reason. Names are the metric's labels.
 */
export interface DpHook {
  id: number;
  name: string;
  kind: 'tc' | 'sock' | 'veth' | 'xdp';
}
/** The hooks, with the label each is exported under. */
export const DP_HOOKS: readonly DpHook[] = [
  { id: c.DP_HOOK_TC_INGRESS, name: 'tc_ingress', kind: 'tc' },
  { id: c.DP_HOOK_TC_EGRESS, name: 'tc_egress', kind: 'tc' },
  { id: c.DP_HOOK_CONNECT4, name: 'connect4', kind: 'sock' },
  { id: c.DP_HOOK_SENDMSG4, name: 'sendmsg4', kind: 'sock' },
  { id: c.DP_HOOK_RECVMSG4, name: 'recvmsg4', kind: 'sock' },
  { id: c.DP_HOOK_GETPEERNAME4, name: 'getpeername4', kind: 'sock' },
  { id: c.DP_HOOK_CONNECT6, name: 'connect6', kind: 'sock' },
  { id: c.DP_HOOK_SENDMSG6, name: 'sendmsg6', kind: 'sock' },
  { id: c.DP_HOOK_RECVMSG6, name: 'recvmsg6', kind: 'sock' },
  { id: c.DP_HOOK_GETPEERNAME6, name: 'getpeername6', kind: 'sock' },
  { id: c.DP_HOOK_BIND4, name: 'bind4', kind: 'sock' },
  { id: c.DP_HOOK_BIND6, name: 'bind6', kind: 'sock' },
  { id: c.DP_HOOK_VETH_INGRESS, name: 'veth_ingress', kind: 'veth' },
  { id: c.DP_HOOK_VETH_EGRESS, name: 'veth_egress', kind: 'veth' },
  { id: c.DP_HOOK_XDP, name: 'xdp', kind: 'xdp' },
];

export interface DpReason {
  id: number;
  /** The metric's reason label. */
  name: string;
  /** The hooks that count it (by name). */
  hooks: readonly string[];
  /** A drop (tc) or a refused connect/sendmsg/bind (socket hooks). */
  drop: boolean;
  help: string;
}

const VETH_IN = ['veth_ingress'];
const VETH = ['veth_ingress', 'veth_egress'];
const TC_IN = ['tc_ingress'];
const XDP = ['xdp'];
/** Ingress of an external device: tc's, and XDP's before it (the same flows). */
const EXT_IN = [...TC_IN, ...XDP];
const TC = ['tc_ingress', 'tc_egress'];
const SOCK_FWD = ['connect4', 'sendmsg4', 'connect6', 'sendmsg6'];
const SOCK_REV = ['recvmsg4', 'getpeername4', 'recvmsg6', 'getpeername6'];
const SOCK_BIND = ['bind4', 'bind6'];

/** Every reason, which hooks count it, and what it means (`svcmap status`, docs). */
export const DP_REASONS: readonly DpReason[] = [
  {
    id: c.DP_R_PASSED,
    name: 'passed',
    hooks: [...TC, ...VETH, ...XDP, ...SOCK_FWD, ...SOCK_REV, ...SOCK_BIND],
    drop: false,
    help: 'not for svcmap (no frontend, no tracked flow, a port no NodePort holds): untouched',
  },
  {
    id: c.DP_R_OTHER_PROTO,
    name: 'other_protocol',
    hooks: [...TC, ...VETH, ...XDP],
    drop: false,
    help: 'not IP TCP/UDP or an ICMP error (ARP, ICMP echo, ICMPv6 neighbour discovery): untouched',
  },
  {
    id: c.DP_R_MALFORMED,
    name: 'malformed',
    hooks: [...TC, ...VETH, ...XDP],
    drop: false,
    help: 'headers cut short or invalid: untouched, for the stack to judge',
  },
  { id: c.DP_R_TRANSLATED, name: 'translated', hooks: [...EXT_IN, ...VETH_IN, ...SOCK_FWD], drop: false, help: 'sent to a backend' },
  {
    id: c.DP_R_REPLY_TRANSLATED,
    name: 'reply_translated',
    hooks: [...TC, ...VETH, ...XDP, ...SOCK_REV],
    drop: false,
    help: 'a reply shown as coming from the frontend',
  },
  {
    id: c.DP_R_TO_STACK_NO_ROUTE,
    name: 'to_stack_no_route',
    hooks: TC_IN,
    drop: false,
    help: 'translated; no forwardable route, left to the stack',
  },
  {
    id: c.DP_R_TO_STACK_MTU,
    name: 'to_stack_mtu',
    hooks: TC_IN,
    drop: false,
    help: 'translated; larger than the egress MTU, left to the stack',
  },
  { id: c.DP_R_TO_STACK_TTL, name: 'to_stack_ttl', hooks: TC_IN, drop: false, help: 'translated; TTL expires, left to the stack' },
  {
    id: c.DP_R_ICMP_TRANSLATED,
    name: 'icmp_translated',
    hooks: [...TC, 'veth_egress'],
    drop: false,
    help: 'an ICMP error about a tracked flow, translated back',
  },
  {
    id: c.DP_R_SK_REVNAT_FAILED,
    name: 'sk_revnat_write_failed',
    hooks: SOCK_FWD,
    drop: false,
    help: 'sent to a backend, but the per-socket reverse entry could not be written',
  },
  {
    id: c.DP_R_NO_BACKEND,
    name: 'no_backend',
    hooks: [...EXT_IN, ...VETH_IN, ...SOCK_FWD],
    drop: true,
    help: 'the frontend has no backend',
  },
  {
    id: c.DP_R_NO_LOCAL_ENDPOINT,
    name: 'no_local_endpoint',
    hooks: EXT_IN,
    drop: true,
    help: 'externalTrafficPolicy Local, no endpoint on this node',
  },
  { id: c.DP_R_SOURCE_DENIED, name: 'source_denied', hooks: EXT_IN, drop: true, help: 'outside loadBalancerSourceRanges' },
  {
    id: c.DP_R_NO_SNAT_ADDR,
    name: 'no_snat_address',
    hooks: EXT_IN,
    drop: true,
    help: "SNAT needed, the egress device has no address of the flow's family",
  },
  { id: c.DP_R_SNAT_EXHAUSTED, name: 'snat_ports_exhausted', hooks: EXT_IN, drop: true, help: 'no free SNAT port towards the backend' },
  {
    id: c.DP_R_CT_INSERT_FAILED,
    name: 'ct_insert_failed',
    hooks: [...EXT_IN, ...VETH_IN],
    drop: true,
    help: 'the conntrack entry could not be stored',
  },
  {
    id: c.DP_R_REWRITE_FAILED,
    name: 'rewrite_failed',
    hooks: [...TC, ...VETH, ...XDP],
    drop: true,
    help: 'a header or checksum write failed',
  },
  { id: c.DP_R_FRAGMENT, name: 'fragment', hooks: [...TC, ...VETH, ...XDP], drop: false, help: 'an IP fragment: untouched' },
  {
    id: c.DP_R_IPV6_EXT_HDR,
    name: 'ipv6_ext_header',
    hooks: [...TC, ...VETH, ...XDP],
    drop: false,
    help: 'IPv6 with extension headers (or a fragment): untouched',
  },
  { id: c.DP_R_SNAT_NO_ROUTE, name: 'snat_no_route', hooks: EXT_IN, drop: true, help: 'SNAT needed, no forwardable route to the backend' },
  {
    id: c.DP_R_MIGRATION_HOLD,
    name: 'migration_hold',
    hooks: [...EXT_IN, ...VETH_IN],
    drop: true,
    help: 'a new flow in the moment the agent moves the maps to new ones (a layout change or a resize): dropped, the retransmission is served',
  },
  {
    id: c.DP_R_BIND_DENIED,
    name: 'nodeport_bind_denied',
    hooks: SOCK_BIND,
    drop: true,
    help: "bind protection: a node's own socket asked for a port a NodePort holds (EADDRINUSE)",
  },
  {
    id: c.DP_R_SOCK_BYPASSED,
    name: 'socket_lb_bypassed',
    hooks: SOCK_FWD,
    drop: false,
    help: "a pod's socket the socket LB leaves alone (--socket-lb=host-only, or svcmap.io/socket-lb: bypass): translated at the pod's veth",
  },
  {
    id: c.DP_R_TO_TC,
    name: 'passed_to_tc',
    hooks: XDP,
    drop: false,
    help: 'left to tc, untouched: ICMP, fragments, a possibly partial checksum, or no route XDP can send by (unresolved neighbour, a device that takes no XDP frames, MTU, TTL)',
  },
  {
    id: c.DP_R_DSR_ACCEPTED,
    name: 'dsr_accepted',
    hooks: TC_IN,
    drop: false,
    help: "direct server return, the backend's node: the DSR option names a DSR frontend: recorded (the replies leave with it as source), removed, on to the local backend",
  },
  {
    id: c.DP_R_DSR_BAD_FRONTEND,
    name: 'dsr_bad_frontend',
    hooks: TC_IN,
    drop: true,
    help: 'a DSR option naming no frontend of this node with direct server return: dropped (no client makes the node answer from an address of its choice)',
  },
  {
    id: c.DP_R_DSR_MALFORMED,
    name: 'dsr_malformed',
    hooks: TC_IN,
    drop: true,
    help: 'a DSR option of the wrong length or for another protocol than TCP or UDP, or cut short: dropped',
  },
  {
    id: c.DP_R_DSR_OPT_FAILED,
    name: 'dsr_option_failed',
    hooks: TC_IN,
    drop: true,
    help: 'direct server return, the ingress node: the option carrying the frontend could not be added (an IPv4 header with no room left): dropped',
  },
  {
    id: c.DP_R_REVNAT_STALE,
    name: 'revnat_stale',
    hooks: SOCK_REV,
    drop: false,
    help: "the reverse entry's frontend is gone: removed, the real peer shown",
  },
];

/** The counters map's index of (hook, reason). */
export function dpIndex(hook: number, reason: number): number {
  return hook * c.DP_REASON_STRIDE + reason;
}

export const IPPROTO_TCP = 6;
export const IPPROTO_UDP = 17;

/** Flag names for display, in bit order. */
export const SVC_FLAG_NAMES: Array<[number, string]> = [
  [c.SVC_F_CLUSTERIP, 'ClusterIP'],
  [c.SVC_F_NODEPORT, 'NodePort'],
  [c.SVC_F_EXTERNALIP, 'ExternalIP'],
  [c.SVC_F_LOADBALANCER, 'LoadBalancer'],
  [c.SVC_F_ETP_LOCAL, 'ETP=Local'],
  [c.SVC_F_ITP_LOCAL, 'ITP=Local'],
  [c.SVC_F_AFFINITY, 'affinity'],
  [c.SVC_F_WILDCARD, 'wildcard'],
  [c.SVC_F_SRC_RANGES, 'source-ranges'],
  [c.SVC_F_TWO_SCOPES, 'two-scopes'],
  [c.SVC_F_SH_PORT, 'sh-port'],
  [c.SVC_F_HOSTPORT, 'HostPort'],
  [c.SVC_F_DSR, 'dsr'],
];

/** Conntrack entry flag names for display, in bit order. */
export const CT_FLAG_NAMES: Array<[number, string]> = [
  [c.CT_F_SNAT, 'snat'],
  [c.CT_F_LOCAL, 'local'],
  [c.CT_F_SEEN_REPLY, 'seen-reply'],
  [c.CT_F_CLOSING, 'closing'],
  [c.CT_F_FIN_FWD, 'fin-fwd'],
  [c.CT_F_FIN_REPLY, 'fin-reply'],
  [c.CT_F_COUNTED, 'counted'],
  [c.CT_F_DSR, 'dsr'],
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
