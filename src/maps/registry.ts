// The maps the datapath shares with the agent: what TypeScript needs to know
// about each (its codecs, what it is for, which --max-* option sizes it).
// Which object has a map, and that it is pinned, the C definitions say
// (bpf/lib/maps*.h, LIBBPF_PIN_BY_NAME): the loader reads it from the objects,
// and test/maps/declared.test.ts holds this table to them. The order is the
// order `svcmap status` and `dump` list them.
import * as c from './codecs.ts';
import type { Codec } from './codecs.ts';
import type { Family } from '../util/family.ts';
import {
  SVCMAP_MAP_BACKENDS6,
  SVCMAP_MAP_BE_CONNS6,
  SVCMAP_MAP_CT6,
  SVCMAP_MAP_DEV_ADDR6,
  SVCMAP_MAP_MAGLEV6,
  SVCMAP_MAP_REVNAT6,
  SVCMAP_MAP_SERVICES6,
  SVCMAP_MAP_SK_BACKEND6,
  SVCMAP_MAP_SK_REVNAT6,
  SVCMAP_MAP_SRC_RANGE6,
} from './constants.ts';
import {
  SVCMAP_MAP_AFFINITY,
  SVCMAP_MAP_BACKENDS,
  SVCMAP_MAP_BE_CONNS,
  SVCMAP_MAP_SK_BACKEND,
  SVCMAP_MAP_CONFIG,
  SVCMAP_MAP_CT,
  SVCMAP_MAP_DEV_ADDR,
  SVCMAP_MAP_MAGLEV,
  SVCMAP_MAP_METRICS,
  SVCMAP_MAP_REVNAT,
  SVCMAP_MAP_SERVICES,
  SVCMAP_MAP_SK_REVNAT,
  SVCMAP_MAP_SOCK_CFG,
  SVCMAP_MAP_SOCK_BYP,
  SVCMAP_MAP_SRC_RANGE,
  SVCMAP_MAP_ZONES,
} from './constants.ts';

export interface MapSpec<K = unknown, V = unknown> {
  name: string;
  /**
   * The version of this map's layout (type, flags, key and value structs):
   * raise it by one whenever any of them changes, then run `make layouts`,
   * which records the new layout beside the old ones in
   * src/maps/generated/layouts.gen.ts (the migration on start converts
   * pinned maps from any recorded layout). Every pinned map (ALL_MAPS) has
   * one, test/maps/layout-versions.test.ts checks; a map of one run (not
   * pinned) has none.
   */
  layoutVersion?: number;
  key: Codec<K>;
  value: Codec<V>;
  /** What the map is for, for status and docs. */
  purpose: string;
  /** The agent option (--max-*) that sizes it when it is created, when it can be sized. */
  size?: MapSizeOption;
  /** False for a map user space cannot list (socket storage: keyed by socket fds); status leaves it out. */
  listable?: boolean;
}

export type MapSizeOption = 'maxServices' | 'maxBackends' | 'maxConntrack' | 'maxAffinity';
/** Capacities for maps created now; a map left out keeps the size its C definition gives. */
export type MapSizes = Partial<Record<MapSizeOption, number>>;

export const servicesMap: MapSpec<c.SvcKey, c.SvcValue> = {
  name: SVCMAP_MAP_SERVICES,
  layoutVersion: 1,
  key: c.svcKey,
  value: c.svcValue,
  purpose: 'frontend -> master entry and backend slots',
  size: 'maxServices',
};
export const backendsMap: MapSpec<number, c.BackendValue> = {
  name: SVCMAP_MAP_BACKENDS,
  layoutVersion: 1,
  key: c.backendId,
  value: c.backendValue,
  purpose: 'backend id -> endpoint',
  size: 'maxBackends',
};
export const revNatMap: MapSpec<number, c.RevNatValue> = {
  name: SVCMAP_MAP_REVNAT,
  layoutVersion: 1,
  key: c.revNatId,
  value: c.revNatValue,
  purpose: 'reverse NAT id -> frontend',
  size: 'maxServices',
};
export const skRevNatMap: MapSpec<c.SkRevNatKey, c.SkRevNatValue> = {
  name: SVCMAP_MAP_SK_REVNAT,
  layoutVersion: 1,
  key: c.skRevNatKey,
  value: c.skRevNatValue,
  purpose: 'socket -> frontend it asked for (LRU)',
};
export const affinityMap: MapSpec<c.AffinityKey, c.AffinityValue> = {
  name: SVCMAP_MAP_AFFINITY,
  layoutVersion: 1,
  key: c.affinityKey,
  value: c.affinityValue,
  purpose: 'session affinity: client + frontend -> backend (LRU)',
  size: 'maxAffinity',
};

export const ctMap: MapSpec<c.CtKey, c.CtValue> = {
  name: SVCMAP_MAP_CT,
  layoutVersion: 1,
  key: c.ctKey,
  value: c.ctValue,
  purpose: 'tc connection tracking: flow -> translation (LRU)',
  size: 'maxConntrack',
};
export const srcRangeMap: MapSpec<c.SrcRangeKey, number> = {
  name: SVCMAP_MAP_SRC_RANGE,
  layoutVersion: 1,
  key: c.srcRangeKey,
  value: c.srcRangeValue,
  purpose: 'loadBalancerSourceRanges (LPM trie)',
};
export const configMap: MapSpec<number, c.SvcmapConfig> = {
  name: SVCMAP_MAP_CONFIG,
  layoutVersion: 1,
  key: c.configKey,
  value: c.configValue,
  purpose: 'tc datapath settings (node IP, SNAT ports)',
};
export const sockConfigMap: MapSpec<number, c.SockConfig> = {
  name: SVCMAP_MAP_SOCK_CFG,
  layoutVersion: 1,
  key: c.sockConfigKey,
  value: c.sockConfigValue,
  purpose: "socket hooks' settings (the node's network namespace, localhost NodePorts, bind protection)",
};
export const sockBypassMap: MapSpec<bigint, c.SockBypass> = {
  name: SVCMAP_MAP_SOCK_BYP,
  layoutVersion: 1,
  key: c.sockBypassKey,
  value: c.sockBypassValue,
  purpose: 'pods whose sockets the socket LB leaves to their veths: pod cgroup id -> level (svcmap.io/socket-lb: bypass)',
};
export const devAddrMap: MapSpec<number, c.DevAddrValue> = {
  name: SVCMAP_MAP_DEV_ADDR,
  layoutVersion: 1,
  key: c.devAddrKey,
  value: c.devAddrValue,
  purpose: 'SNAT address per egress device: ifindex -> IPv4',
};
export const metricsMap: MapSpec<number, c.DpCounter> = {
  name: SVCMAP_MAP_METRICS,
  layoutVersion: 1,
  key: c.dpIndexKey,
  value: c.dpCounter,
  purpose: 'datapath counters: hook + reason -> packets (per CPU)',
};

export const backendConnsMap: MapSpec<number, c.BackendConns> = {
  name: SVCMAP_MAP_BE_CONNS,
  layoutVersion: 1,
  key: c.backendId,
  value: c.backendConnsValue,
  purpose: 'backend id -> live connections (socket LB, tc)',
  size: 'maxBackends',
};
/** Socket storage: not iterable from user space (its key is a socket fd). */
export const skBackendMap: MapSpec<number, c.SkBackend> = {
  name: SVCMAP_MAP_SK_BACKEND,
  layoutVersion: 1,
  key: c.skBackendKey,
  value: c.skBackendValue,
  purpose: 'socket storage: the backend a connected socket counts for',
  listable: false,
};

/** Map of maps: the value is an inner map's fd when written, its id when read (src/maps/maglev-tables.ts). */
export const maglevMap: MapSpec<number, number> = {
  name: SVCMAP_MAP_MAGLEV,
  layoutVersion: 1,
  key: c.revNatId,
  value: c.revNatId,
  purpose: 'Maglev tables: reverse NAT id -> lookup table (map of maps)',
};

/** The names of the backends' zone ids (both families'); the agent's and dump's only. */
export const zonesMap: MapSpec<number, c.ZoneName> = {
  name: SVCMAP_MAP_ZONES,
  layoutVersion: 1,
  key: c.zoneId,
  value: c.zoneNameValue,
  purpose: "zone id -> zone name (the backends' zone field; for dump)",
};

export const services6Map: MapSpec<c.SvcKey, c.SvcValue> = {
  name: SVCMAP_MAP_SERVICES6,
  layoutVersion: 1,
  key: c.svc6Key,
  value: c.svcValue,
  purpose: 'IPv6 frontend -> master entry and backend slots',
  size: 'maxServices',
};
export const backends6Map: MapSpec<number, c.BackendValue> = {
  name: SVCMAP_MAP_BACKENDS6,
  layoutVersion: 1,
  key: c.backendId,
  value: c.backend6Value,
  purpose: 'IPv6 backend id -> endpoint',
  size: 'maxBackends',
};
export const revNat6Map: MapSpec<number, c.RevNatValue> = {
  name: SVCMAP_MAP_REVNAT6,
  layoutVersion: 1,
  key: c.revNatId,
  value: c.revNat6Value,
  purpose: 'IPv6 reverse NAT id -> frontend',
  size: 'maxServices',
};
export const skRevNat6Map: MapSpec<c.SkRevNatKey, c.SkRevNatValue> = {
  name: SVCMAP_MAP_SK_REVNAT6,
  layoutVersion: 1,
  key: c.skRevNat6Key,
  value: c.skRevNat6Value,
  purpose: 'IPv6 socket -> frontend it asked for (LRU)',
};
export const skBackend6Map: MapSpec<number, c.SkBackend> = {
  name: SVCMAP_MAP_SK_BACKEND6,
  layoutVersion: 1,
  key: c.skBackendKey,
  value: c.skBackend6Value,
  purpose: 'socket storage: the IPv6 backend a connected socket counts for',
  listable: false,
};
export const maglev6Map: MapSpec<number, number> = {
  name: SVCMAP_MAP_MAGLEV6,
  layoutVersion: 1,
  key: c.revNatId,
  value: c.revNatId,
  purpose: 'Maglev tables of IPv6 frontends: reverse NAT id -> lookup table (map of maps)',
};
/** The IPv6 maps only the socket hooks have, listed after the IPv4 ones. */
export const IPV6_MAPS: readonly MapSpec[] = [services6Map, backends6Map, revNat6Map, skRevNat6Map, skBackend6Map, maglev6Map] as MapSpec[];
/** In both datapaths' objects: svcmap_conns_adjust (tc.c) changes it. */
export const backendConns6Map: MapSpec<number, c.BackendConns> = {
  name: SVCMAP_MAP_BE_CONNS6,
  layoutVersion: 1,
  key: c.backendId,
  value: c.backendConnsValue,
  purpose: 'IPv6 backend id -> live connections (socket LB, tc)',
  size: 'maxBackends',
};

export const ct6Map: MapSpec<c.CtKey, c.CtValue> = {
  name: SVCMAP_MAP_CT6,
  layoutVersion: 1,
  key: c.ct6Key,
  value: c.ct6Value,
  purpose: 'tc connection tracking of IPv6 flows (LRU)',
  size: 'maxConntrack',
};
export const srcRange6Map: MapSpec<c.SrcRangeKey, number> = {
  name: SVCMAP_MAP_SRC_RANGE6,
  layoutVersion: 1,
  key: c.srcRange6Key,
  value: c.srcRangeValue,
  purpose: 'loadBalancerSourceRanges of IPv6 frontends (LPM trie)',
};
export const devAddr6Map: MapSpec<number, c.DevAddrValue> = {
  name: SVCMAP_MAP_DEV_ADDR6,
  layoutVersion: 1,
  key: c.devAddrKey,
  value: c.devAddr6Value,
  purpose: 'SNAT address per egress device: ifindex -> IPv6',
};
/** The tc datapath's IPv6 maps. */
export const TC6_MAPS: readonly MapSpec[] = [ct6Map, srcRange6Map, devAddr6Map] as MapSpec[];

/** The maps each address family has, one of each kind (the others are shared by both families). */
export interface FamilyMapSpecs {
  services: MapSpec<c.SvcKey, c.SvcValue>;
  backends: MapSpec<number, c.BackendValue>;
  revNat: MapSpec<number, c.RevNatValue>;
  skRevNat: MapSpec<c.SkRevNatKey, c.SkRevNatValue>;
  conns: MapSpec<number, c.BackendConns>;
  maglev: MapSpec<number, number>;
  ct: MapSpec<c.CtKey, c.CtValue>;
  srcRange: MapSpec<c.SrcRangeKey, number>;
  devAddr: MapSpec<number, c.DevAddrValue>;
}

export const FAMILY_MAPS: Readonly<Record<Family, FamilyMapSpecs>> = {
  4: {
    services: servicesMap,
    backends: backendsMap,
    revNat: revNatMap,
    skRevNat: skRevNatMap,
    conns: backendConnsMap,
    maglev: maglevMap,
    ct: ctMap,
    srcRange: srcRangeMap,
    devAddr: devAddrMap,
  },
  6: {
    services: services6Map,
    backends: backends6Map,
    revNat: revNat6Map,
    skRevNat: skRevNat6Map,
    conns: backendConns6Map,
    maglev: maglev6Map,
    ct: ct6Map,
    srcRange: srcRange6Map,
    devAddr: devAddr6Map,
  },
};

export const ALL_MAPS: readonly MapSpec[] = [
  servicesMap,
  backendsMap,
  revNatMap,
  skRevNatMap,
  affinityMap,
  ctMap,
  srcRangeMap,
  configMap,
  sockConfigMap,
  sockBypassMap,
  metricsMap,
  devAddrMap,
  backendConnsMap,
  skBackendMap,
  maglevMap,
  zonesMap,
  ...IPV6_MAPS,
  backendConns6Map,
  ...TC6_MAPS,
] as MapSpec[];

/** The capacity `sizes` asks for map `name` (undefined: its C default). */
export function mapSize(sizes: MapSizes, name: string): number | undefined {
  const option = ALL_MAPS.find((m) => m.name === name)?.size;
  return option === undefined ? undefined : sizes[option];
}
