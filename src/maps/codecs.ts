// One codec per BPF map key and value: typed TypeScript objects to and from
// the bytes the datapath reads. The layouts mirror bpf/include/svcmap_maps.h
// and are checked against its BTF at load (see btf-check.ts).
import { testLayout } from '../bpf/test-layout.ts';
import { SVCMAP_SOCK_BYP_POD_LEN, SVCMAP_ZONE_NAME_LEN } from './constants.ts';
import { type StructLayout, decoderOf, encoderOf, field, pad, scalar, scalarCodecOf, struct, text } from './layout.ts';

export interface Codec<T> {
  layout: StructLayout;
  encode(obj: T, buf: Buffer, off: number): void;
  decode(buf: Buffer, off: number): T;
}

function codec<T>(layout: StructLayout): Codec<T> {
  return {
    layout,
    encode: encoderOf(layout) as unknown as Codec<T>['encode'],
    decode: decoderOf(layout) as unknown as Codec<T>['decode'],
  };
}

function scalarCodec<T extends number | bigint = number>(layout: StructLayout): Codec<T> {
  return { layout, ...(scalarCodecOf(layout) as unknown as Pick<Codec<T>, 'encode' | 'decode'>) };
}

export interface SvcKey {
  addr: string;
  port: number;
  slot: number;
  proto: number;
  scope: number;
}

export interface SvcValue {
  backend_id: number;
  rev_nat_id: number;
  count: number;
  flags: number;
  algorithm: number;
  affinity_timeout: number;
}

export interface BackendValue {
  addr: string;
  port: number;
  proto: number;
  state: number;
  flags: number;
  zone: number;
}

export interface RevNatValue {
  addr: string;
  port: number;
}

export interface SkRevNatKey {
  cookie: bigint;
  addr: string;
  port: number;
}

export interface SkRevNatValue {
  addr: string;
  port: number;
  rev_nat_id: number;
}

export const svcKey = codec<SvcKey>(
  struct('svc_key', 12, [
    field('addr', 0, 'ipv4'),
    field('port', 4, 'be16'),
    field('slot', 6, 'u16'),
    field('proto', 8, 'u8'),
    field('scope', 9, 'u8'),
    pad('pad', 10, 2),
  ]),
);

export const svcValue = codec<SvcValue>(
  struct('svc_value', 20, [
    field('backend_id', 0, 'u32'),
    field('rev_nat_id', 4, 'u32'),
    field('count', 8, 'u16'),
    field('flags', 10, 'u16'),
    field('algorithm', 12, 'u8'),
    pad('pad', 13, 3),
    field('affinity_timeout', 16, 'u32'),
  ]),
);

// IPv6 twins (svcmap_svc6, svcmap_be6, svcmap_revnat6): the same typed
// objects as the IPv4 codecs, with 16-byte addresses, so the sync engine
// handles both families with one code path.
export const svc6Key = codec<SvcKey>(
  struct('svc6_key', 24, [
    field('addr', 0, 'ipv6'),
    field('port', 16, 'be16'),
    field('slot', 18, 'u16'),
    field('proto', 20, 'u8'),
    field('scope', 21, 'u8'),
    pad('pad', 22, 2),
  ]),
);

export const backend6Value = codec<BackendValue>(
  struct('backend6_value', 24, [
    field('addr', 0, 'ipv6'),
    field('port', 16, 'be16'),
    field('proto', 18, 'u8'),
    field('state', 19, 'u8'),
    field('flags', 20, 'u8'),
    pad('pad', 21, 1),
    field('zone', 22, 'u16'),
  ]),
);

export const revNat6Value = codec<RevNatValue>(
  struct('rev_nat6_value', 20, [field('addr', 0, 'ipv6'), field('port', 16, 'be16'), pad('pad', 18, 2)]),
);

export const skRevNat6Key = codec<SkRevNatKey>(
  struct('sk_rev_nat6_key', 32, [field('cookie', 0, 'u64'), field('addr', 8, 'ipv6'), field('port', 24, 'be16'), pad('pad', 26, 6)]),
);

export const skRevNat6Value = codec<SkRevNatValue>(
  struct('sk_rev_nat6_value', 24, [field('addr', 0, 'ipv6'), field('port', 16, 'be16'), pad('pad', 18, 2), field('rev_nat_id', 20, 'u32')]),
);

export const backendId = scalarCodec(scalar('__u32', 'u32'));

const BACKEND_FIELDS = [
  field('addr', 0, 'ipv4'),
  field('port', 4, 'be16'),
  field('proto', 6, 'u8'),
  field('state', 7, 'u8'),
  field('flags', 8, 'u8'),
  pad('pad', 9, 1),
  field('zone', 10, 'u16'),
];
/** The test layout (src/bpf/test-layout.ts) has reserved_test after zone. */
export const backendValue = codec<BackendValue>(
  testLayout()
    ? struct('backend_value', 16, [...BACKEND_FIELDS, pad('reserved_test', 12, 4)])
    : struct('backend_value', 12, BACKEND_FIELDS),
);

export const revNatId = scalarCodec(scalar('__u32', 'u32'));

/** svcmap_zones: zone id -> name (struct zone_name). */
export interface ZoneName {
  name: string;
}
export const zoneId = scalarCodec(scalar('__u32', 'u32'));
export const zoneNameValue = codec<ZoneName>(struct('zone_name', SVCMAP_ZONE_NAME_LEN, [text('name', 0, SVCMAP_ZONE_NAME_LEN)]));

export const revNatValue = codec<RevNatValue>(
  struct('rev_nat_value', 8, [field('addr', 0, 'ipv4'), field('port', 4, 'be16'), pad('pad', 6, 2)]),
);

export const skRevNatKey = codec<SkRevNatKey>(
  struct('sk_rev_nat_key', 16, [field('cookie', 0, 'u64'), field('addr', 8, 'ipv4'), field('port', 12, 'be16'), pad('pad', 14, 2)]),
);

export const skRevNatValue = codec<SkRevNatValue>(
  struct('sk_rev_nat_value', 12, [field('addr', 0, 'ipv4'), field('port', 4, 'be16'), pad('pad', 6, 2), field('rev_nat_id', 8, 'u32')]),
);

// ---- the tc datapath's maps

export interface CtKey {
  saddr: string;
  daddr: string;
  sport: number;
  dport: number;
  proto: number;
  dir: number;
}

export interface CtValue {
  new_saddr: string;
  new_daddr: string;
  new_sport: number;
  new_dport: number;
  backend_id: number;
  rev_nat_id: number;
  flags: number;
  last_seen: bigint;
}

export interface SrcRangeKey {
  prefixlen: number;
  rev_nat_id: number;
  addr: string;
}

export interface SvcmapConfig {
  node_ip: string;
  snat_port_min: number;
  snat_port_max: number;
  flags: number;
}

export const ctKey = codec<CtKey>(
  struct('ct_key', 16, [
    field('saddr', 0, 'ipv4'),
    field('daddr', 4, 'ipv4'),
    field('sport', 8, 'be16'),
    field('dport', 10, 'be16'),
    field('proto', 12, 'u8'),
    field('dir', 13, 'u8'),
    pad('pad', 14, 2),
  ]),
);

export const ctValue = codec<CtValue>(
  struct('ct_value', 32, [
    field('new_saddr', 0, 'ipv4'),
    field('new_daddr', 4, 'ipv4'),
    field('new_sport', 8, 'be16'),
    field('new_dport', 10, 'be16'),
    field('backend_id', 12, 'u32'),
    field('rev_nat_id', 16, 'u32'),
    field('flags', 20, 'u8'),
    pad('pad', 21, 3),
    field('last_seen', 24, 'u64'),
  ]),
);

export const srcRangeKey = codec<SrcRangeKey>(
  struct('src_range_key', 12, [field('prefixlen', 0, 'u32'), field('rev_nat_id', 4, 'u32'), field('addr', 8, 'ipv4')]),
);

export const srcRangeValue = scalarCodec(scalar('__u8', 'u8'));

// IPv6 twins of the tc maps (svcmap_ct6, svcmap_srcrng6): the same typed
// objects with 16-byte addresses, so the GC and dump read both families alike.
export const ct6Key = codec<CtKey>(
  struct('ct6_key', 40, [
    field('saddr', 0, 'ipv6'),
    field('daddr', 16, 'ipv6'),
    field('sport', 32, 'be16'),
    field('dport', 34, 'be16'),
    field('proto', 36, 'u8'),
    field('dir', 37, 'u8'),
    pad('pad', 38, 2),
  ]),
);

export const ct6Value = codec<CtValue>(
  struct('ct6_value', 56, [
    field('new_saddr', 0, 'ipv6'),
    field('new_daddr', 16, 'ipv6'),
    field('new_sport', 32, 'be16'),
    field('new_dport', 34, 'be16'),
    field('backend_id', 36, 'u32'),
    field('rev_nat_id', 40, 'u32'),
    field('flags', 44, 'u8'),
    pad('pad', 45, 3),
    field('last_seen', 48, 'u64'),
  ]),
);

export const srcRange6Key = codec<SrcRangeKey>(
  struct('src_range6_key', 24, [field('prefixlen', 0, 'u32'), field('rev_nat_id', 4, 'u32'), field('addr', 8, 'ipv6')]),
);

// ---- session affinity (both datapaths)

export interface AffinityKey {
  /** AFFINITY_ORIGIN_SOCK: the client's network namespace cookie; 0 for tc. */
  netns_cookie: bigint;
  /** AFFINITY_ORIGIN_TC: the client's address; 0.0.0.0 for the socket hooks. */
  client_addr: string;
  rev_nat_id: number;
  origin: number;
}

export interface AffinityValue {
  /** bpf_ktime_get_boot_ns() of the last connection that used the entry. */
  last_used: bigint;
  backend_id: number;
  slot: number;
}

export const affinityKey = codec<AffinityKey>(
  struct('affinity_key', 24, [
    field('netns_cookie', 0, 'u64'),
    field('client_addr', 8, 'ipv4'),
    field('rev_nat_id', 12, 'u32'),
    field('origin', 16, 'u8'),
    pad('pad', 17, 7),
  ]),
);

export const affinityValue = codec<AffinityValue>(
  struct('affinity_value', 16, [field('last_used', 0, 'u64'), field('backend_id', 8, 'u32'), field('slot', 12, 'u16'), pad('pad', 14, 2)]),
);

// ---- live connections per backend (both datapaths)

export interface BackendConns {
  /** Sockets the socket LB connected to the backend (may dip below 0 by drift; read as 0). */
  sock: bigint;
  /** tc flows to the backend that are open. */
  tc: bigint;
}

export const backendConnsValue = codec<BackendConns>(struct('backend_conns', 16, [field('sock', 0, 's64'), field('tc', 8, 's64')]));

/** Socket storage of a socket the socket LB counted (its key is a socket fd). */
export interface SkBackend {
  backend_id: number;
  addr: string;
  port: number;
}

export const skBackendKey = scalarCodec(scalar('int', 'u32'));

/** The socket recount's count per {backend_id, addr, port} (key: skBackendValue). */
export const skCountValue = scalarCodec<bigint>(scalar('__u64', 'u64'));

export const skBackendValue = codec<SkBackend>(
  struct('sk_backend', 12, [field('backend_id', 0, 'u32'), field('addr', 4, 'ipv4'), field('port', 8, 'be16'), pad('pad', 10, 2)]),
);

/** struct sk_backend6: the same for a socket counted for an IPv6 backend. */
export const skBackend6Value = codec<SkBackend>(
  struct('sk_backend6', 24, [field('backend_id', 0, 'u32'), field('addr', 4, 'ipv6'), field('port', 20, 'be16'), pad('pad', 22, 2)]),
);

export interface ConnsAdjust {
  backend_id: number;
  field: number;
  /** 4 (or 0): svcmap_be_conns; 6: svcmap_conns6. */
  family: number;
  delta: bigint;
}

/** The context of the svcmap_conns_adjust program. */
export const connsAdjust = codec<ConnsAdjust>(
  struct('conns_adjust', 16, [
    field('backend_id', 0, 'u32'),
    field('field', 4, 'u16'),
    field('family', 6, 'u16'),
    field('delta', 8, 's64'),
  ]),
);

export const configKey = scalarCodec(scalar('__u32', 'u32'));

export const configValue = codec<SvcmapConfig>(
  struct('svcmap_config', 12, [
    field('node_ip', 0, 'ipv4'),
    field('snat_port_min', 4, 'u16'),
    field('snat_port_max', 6, 'u16'),
    field('flags', 8, 'u32'),
  ]),
);

/** svcmap_sockcfg (one entry, key 0): the socket hooks' node settings. */
export interface SockConfig {
  /** The network namespace cookie of the node's own sockets (the agent's); 0: none. */
  host_netns: bigint;
  /** SOCK_CFG_*. */
  flags: number;
}

export const sockConfigKey = scalarCodec(scalar('__u32', 'u32'));

export const sockConfigValue = codec<SockConfig>(
  struct('sock_config', 16, [field('host_netns', 0, 'u64'), field('flags', 8, 'u32'), pad('pad', 12, 4)]),
);

/** svcmap_sock_byp: a bypassed Pod's cgroup id -> struct sock_bypass. */
export interface SockBypass {
  /** The cgroup's depth below the cgroup mount the agent sees. */
  level: number;
  /** The Pod, "namespace/name". */
  pod: string;
}

export const sockBypassKey = scalarCodec<bigint>(scalar('__u64', 'u64'));

export const sockBypassValue = codec<SockBypass>(
  struct('sock_bypass', 8 + SVCMAP_SOCK_BYP_POD_LEN, [field('level', 0, 'u32'), pad('pad', 4, 4), text('pod', 8, SVCMAP_SOCK_BYP_POD_LEN)]),
);

/** svcmap_devaddr: ifindex -> the device's primary IPv4 address (the SNAT source through it). */
export interface DevAddrValue {
  addr: string;
}

export const devAddrKey = scalarCodec(scalar('__u32', 'u32'));

export const devAddrValue = codec<DevAddrValue>(struct('dev_addr_value', 4, [field('addr', 0, 'ipv4')]));

/** svcmap_devaddr6: ifindex -> the device's first global IPv6 address. */
export const devAddr6Value = codec<DevAddrValue>(struct('dev_addr6_value', 16, [field('addr', 0, 'ipv6')]));

export interface DpCounter {
  packets: bigint;
}

/** The counters map's key: hook * DP_REASON_STRIDE + reason. */
export const dpIndexKey = scalarCodec(scalar('__u32', 'u32'));

export const dpCounter = codec<DpCounter>(struct('dp_counter', 8, [field('packets', 0, 'u64')]));

// ---- socket termination (bpf/sock_destroy.c): not pinned, the agent's working set

export interface SockTermKey {
  addr: string;
  port: number;
  proto: number;
  rev_nat_id: number;
}

export const sockTermKey = codec<SockTermKey>(
  struct('sock_term_key', 12, [
    field('addr', 0, 'ipv4'),
    field('port', 4, 'be16'),
    field('proto', 6, 'u8'),
    pad('pad', 7, 1),
    field('rev_nat_id', 8, 'u32'),
  ]),
);

/** struct sock_term6_key: the same for IPv6 backends (svcmap_sk_term6). */
export const sockTerm6Key = codec<SockTermKey>(
  struct('sock_term6_key', 24, [
    field('addr', 0, 'ipv6'),
    field('port', 16, 'be16'),
    field('proto', 18, 'u8'),
    pad('pad', 19, 1),
    field('rev_nat_id', 20, 'u32'),
  ]),
);

export const sockTermValue = scalarCodec(scalar('__u8', 'u8'));
