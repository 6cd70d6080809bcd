// From EndpointSlices to the backends of one Service port, with kube-proxy's
// rules: slices are merged, endpoints deduplicated by ip:port, ready endpoints
// used, and serving+terminating ones only while nothing is ready.

import type { Backend, NodeInfo, Protocol } from './types.ts';
import type { Endpoint, EndpointPort, EndpointSlice } from './schemas.ts';
import { ipv4ToU32 } from '../util/ipv4.ts';
import { ipv6SortKey } from '../util/ipv6.ts';
import { familyOf } from '../util/family.ts';

/** A slice of addressType IPv4 or IPv6 (FQDN slices are not proxied); one family per slice, as the controller writes them. */
export type IpSlice = Extract<EndpointSlice, { addressType: 'IPv4' | 'IPv6' }>;

/** Condition bits of ModelSlice.conditions. */
const READY = 1;
const SERVING = 2;
const TERMINATING = 4;

/**
 * What the model keeps of one IP EndpointSlice: its ports and, per endpoint,
 * the fields kube-proxy's rules read, as parallel arrays (the first address,
 * the conditions as bits, and node name, zone, zone and node hints only when some
 * endpoint has them). The validated slice holds three objects and an array
 * per endpoint (~1.5 KiB per slice of 10); this is a few hundred bytes.
 */
export interface ModelSlice {
  addressType: 'IPv4' | 'IPv6';
  ports: readonly EndpointPort[];
  /** Each endpoint's first address: the API says addresses are fungible and consumers may use only the first; kube-proxy does. */
  ips: readonly string[];
  /** READY | SERVING | TERMINATING per endpoint. */
  conditions: readonly number[];
  nodeNames?: ReadonlyArray<string | undefined>;
  zones?: ReadonlyArray<string | undefined>;
  /** hints.forZones per endpoint; undefined: no hints. */
  zoneHints?: ReadonlyArray<readonly string[] | undefined>;
  /** hints.forNodes per endpoint; undefined: no hints. */
  nodeHints?: ReadonlyArray<readonly string[] | undefined>;
}

/** A column of one optional endpoint field, or undefined when no endpoint has it. */
function column<T>(endpoints: readonly Endpoint[], get: (ep: Endpoint) => T | undefined): Array<T | undefined> | undefined {
  return endpoints.some((ep) => get(ep) !== undefined) ? endpoints.map(get) : undefined;
}

export function modelSlice(slice: IpSlice): ModelSlice {
  const eps = slice.endpoints;
  const out: ModelSlice = {
    addressType: slice.addressType,
    ports: slice.ports,
    ips: eps.map((ep) => ep.addresses[0]!),
    conditions: eps.map(
      (ep) => (ep.conditions.ready ? READY : 0) | (ep.conditions.serving ? SERVING : 0) | (ep.conditions.terminating ? TERMINATING : 0),
    ),
  };
  const nodeNames = column(eps, (ep) => ep.nodeName);
  if (nodeNames) out.nodeNames = nodeNames;
  const zones = column(eps, (ep) => ep.zone);
  if (zones) out.zones = zones;
  const zoneHints = column(eps, (ep) => ep.hints.zones);
  if (zoneHints) out.zoneHints = zoneHints;
  const nodeHints = column(eps, (ep) => ep.hints.nodes);
  if (nodeHints) out.nodeHints = nodeHints;
  return out;
}

/** One endpoint address on one port, before selection. */
export interface Candidate {
  ip: string;
  port: number;
  protocol: Protocol;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
  nodeName?: string;
  zone?: string;
  /** hints.forZones: the zones the endpoint is meant for; undefined: no hints. */
  zoneHints?: readonly string[];
  /** hints.forNodes: the nodes the endpoint is meant for (trafficDistribution: PreferSameNode); undefined: none. */
  nodeHints?: readonly string[];
}

/** How usable an endpoint is; duplicates keep the most usable copy. */
function rank(c: Candidate): number {
  if (c.ready) return 2;
  if (c.serving && c.terminating) return 1;
  return 0;
}

/**
 * Every endpoint of `slices` on the slice port named `portName` with
 * `protocol`. The slice port's number is the backend port: that is how a named
 * targetPort resolves, per slice, even while pods disagree during a rollout.
 * `slices` must be in a stable order (the caller sorts them by name) so that
 * ties between duplicates resolve the same way every time.
 */
export function mergeEndpoints(slices: readonly ModelSlice[], portName: string, protocol: Protocol): Candidate[] {
  const byAddress = new Map<string, Candidate>();
  for (const slice of slices) {
    for (const sp of slice.ports) {
      if (sp.name !== portName || sp.protocol !== protocol || sp.port === undefined) continue;
      for (let i = 0; i < slice.ips.length; i++) {
        const ip = slice.ips[i]!;
        const f = slice.conditions[i]!;
        const c: Candidate = {
          ip,
          port: sp.port,
          protocol,
          ready: (f & READY) !== 0,
          serving: (f & SERVING) !== 0,
          terminating: (f & TERMINATING) !== 0,
        };
        const nodeName = slice.nodeNames?.[i];
        if (nodeName !== undefined) c.nodeName = nodeName;
        const zone = slice.zones?.[i];
        if (zone !== undefined) c.zone = zone;
        const hints = slice.zoneHints?.[i];
        if (hints !== undefined) c.zoneHints = hints;
        const nodes = slice.nodeHints?.[i];
        if (nodes !== undefined) c.nodeHints = nodes;
        const key = `${ip}/${sp.port}`;
        const seen = byAddress.get(key);
        if (seen === undefined || rank(c) > rank(seen)) byAddress.set(key, c);
      }
    }
  }
  return [...byAddress.values()];
}

/**
 * Topology Aware Routing with kube-proxy's rules (pkg/proxy/topology.go,
 * Kubernetes 1.34): node hints first, then zone hints. The node hints
 * (hints.forNodes, which the EndpointSlice controller writes for
 * trafficDistribution: PreferSameNode) are used when every ready endpoint
 * has some and at least one is meant for this node; else the zone hints
 * (hints.forZones: PreferClose, and the topology-mode annotation) when every
 * ready endpoint has some and at least one is meant for the node's zone.
 * Used hints leave out the ready endpoints not meant for the node (its zone);
 * the others stay (selectBackends() picks ready ones first, and one is
 * meant for it). Otherwise, and for zone hints when the node has no zone
 * label, every endpoint stays. svcmap reads the hints and makes none.
 */
export function topologyFilter(candidates: readonly Candidate[], node: NodeInfo | undefined): readonly Candidate[] {
  const byNode = hintFilter(candidates, node?.name, (c) => c.nodeHints);
  return byNode ?? hintFilter(candidates, node?.zone, (c) => c.zoneHints) ?? candidates;
}

/** The candidates meant for `target` by hints(), when every ready one has hints and one is meant for it; else undefined. */
function hintFilter(
  candidates: readonly Candidate[],
  target: string | undefined,
  hints: (c: Candidate) => readonly string[] | undefined,
): readonly Candidate[] | undefined {
  if (!target) return undefined;
  let meant = false;
  for (const c of candidates) {
    if (!c.ready) continue;
    const h = hints(c);
    if (!h) return undefined;
    if (h.includes(target)) meant = true;
  }
  return meant ? candidates.filter((c) => !c.ready || hints(c)!.includes(target)) : undefined;
}

/** The endpoint runs on the agent's node. Without node information nothing is local. */
export function isLocal(c: Candidate, node: NodeInfo | undefined): boolean {
  return node !== undefined && c.nodeName !== undefined && c.nodeName === node.name;
}

/**
 * kube-proxy's selection, applied to whatever set the traffic policy left:
 * the ready endpoints; only when there are none, the ones that are still
 * serving while terminating (so connections drain during a rollout instead of
 * failing). Endpoints that are neither are never used. Sorted by ip, then port.
 */
export function selectBackends(candidates: readonly Candidate[], node: NodeInfo | undefined): Backend[] {
  let chosen = candidates.filter((c) => c.ready);
  let state: Backend['state'] = 'active';
  if (chosen.length === 0) {
    chosen = candidates.filter((c) => c.serving && c.terminating);
    state = 'terminating';
  }
  // Sort on a precomputed numeric key: this runs for every Service on every rebuild.
  return chosen
    .map((c) => {
      const b: Backend = { ip: c.ip, port: c.port, protocol: c.protocol, state, local: isLocal(c, node) };
      if (c.nodeName !== undefined) b.nodeName = c.nodeName;
      if (c.zone !== undefined) b.zone = c.zone;
      return { b, order: ipOrder(c.ip, c.port) };
    })
    .sort((x, y) => (x.order < y.order ? -1 : x.order > y.order ? 1 : 0))
    .map((x) => x.b);
}

/** Sorts by address, then port: a number for IPv4 (cheap, the common case), a fixed-width string for IPv6. */
export function ipOrder(ip: string, port: number): number | string {
  if (familyOf(ip) === 4) return ipv4ToU32(ip) * 65536 + port;
  return ipv6SortKey(ip) + port.toString(16).padStart(4, '0');
}
