// The maps the datapath shares with the agent, with their codecs and default
// capacities. The order is the order `svcmap status` and `dump` list them.
import * as c from './codecs.ts';
import type { Codec } from './codecs.ts';
import { MAP_AFFINITY, MAP_BACKENDS, MAP_CONFIG, MAP_CT, MAP_REVNAT, MAP_SERVICES, MAP_SK_REVNAT, MAP_SRC_RANGE } from './constants.ts';

export interface MapSpec<K = unknown, V = unknown> {
  name: string;
  key: Codec<K>;
  value: Codec<V>;
  /** What the map is for, for status and docs. */
  purpose: string;
  /** The flag that resizes it, when it can be resized. */
  sizeFlag?: string;
}

export const servicesMap: MapSpec<c.SvcKey, c.SvcValue> = {
  name: MAP_SERVICES, key: c.svcKey, value: c.svcValue,
  purpose: 'frontend -> master entry and backend slots', sizeFlag: '--max-services',
};
export const backendsMap: MapSpec<number, c.BackendValue> = {
  name: MAP_BACKENDS, key: c.backendId, value: c.backendValue,
  purpose: 'backend id -> endpoint', sizeFlag: '--max-backends',
};
export const revNatMap: MapSpec<number, c.RevNatValue> = {
  name: MAP_REVNAT, key: c.revNatId, value: c.revNatValue,
  purpose: 'reverse NAT id -> frontend', sizeFlag: '--max-services',
};
export const skRevNatMap: MapSpec<c.SkRevNatKey, c.SkRevNatValue> = {
  name: MAP_SK_REVNAT, key: c.skRevNatKey, value: c.skRevNatValue,
  purpose: 'socket -> frontend it asked for (LRU)',
};
export const affinityMap: MapSpec<c.AffinityKey, c.AffinityValue> = {
  name: MAP_AFFINITY, key: c.affinityKey, value: c.affinityValue,
  purpose: 'session affinity: client + frontend -> backend (LRU)', sizeFlag: '--max-affinity',
};

export const ctMap: MapSpec<c.CtKey, c.CtValue> = {
  name: MAP_CT, key: c.ctKey, value: c.ctValue,
  purpose: 'tc connection tracking: flow -> translation (LRU)', sizeFlag: '--max-conntrack',
};
export const srcRangeMap: MapSpec<c.SrcRangeKey, number> = {
  name: MAP_SRC_RANGE, key: c.srcRangeKey, value: c.srcRangeValue,
  purpose: 'loadBalancerSourceRanges (LPM trie)',
};
export const configMap: MapSpec<number, c.SvcmapConfig> = {
  name: MAP_CONFIG, key: c.configKey, value: c.configValue,
  purpose: 'tc datapath settings (node IP, SNAT ports)',
};

/** The maps the socket hooks use (bpf/sock.c); the tc programs share all but skRevNatMap. */
export const SOCK_MAPS: readonly MapSpec[] = [servicesMap, backendsMap, revNatMap, skRevNatMap, affinityMap] as MapSpec[];
/** The maps only the tc programs use (bpf/tc.c), besides the shared ones. */
export const TC_MAPS: readonly MapSpec[] = [ctMap, srcRangeMap, configMap] as MapSpec[];
export const ALL_MAPS: readonly MapSpec[] = [...SOCK_MAPS, ...TC_MAPS];
