// The datapath's maps as typed maps, from freshly loaded objects (the agent)
// or from their pins (dump, status), with the codec check against BTF.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { btfStruct } from '../bpf/btf.ts';
import { BpfMap } from '../bpf/map.ts';
import type { BpfObject } from '../bpf/object.ts';
import type * as c from './codecs.ts';
import { LayoutDriftError, codecDrift, mapSizeDrift } from './btf-check.ts';
import {
  ALL_MAPS,
  FAMILY_MAPS,
  type MapSpec,
  affinityMap,
  backendsMap,
  configMap,
  metricsMap,
  revNatMap,
  servicesMap,
  skRevNatMap,
  sockConfigMap,
  sockBypassMap,
  zonesMap,
} from './registry.ts';
import { MaglevTables } from './maglev-tables.ts';
import { TypedMap } from './typed-map.ts';
import type { Family } from '../util/family.ts';

/** The maps of one address family: every family has one of each (FAMILY_MAPS). */
export interface FamilyMaps {
  readonly family: Family;
  readonly services: TypedMap<c.SvcKey, c.SvcValue>;
  readonly backends: TypedMap<number, c.BackendValue>;
  readonly revNat: TypedMap<number, c.RevNatValue>;
  /** Per-socket reverse NAT; IPv6's is absent in pins older than it. */
  readonly skRevNat: TypedMap<c.SkRevNatKey, c.SkRevNatValue> | undefined;
  /** Live connections per backend id of the family. */
  readonly conns: TypedMap<number, c.BackendConns> | undefined;
  /** Maglev tables, keyed by the family's reverse-NAT ids. */
  readonly maglev: MaglevTables | undefined;
  /** The same map as a list (rev_nat_id -> inner map id), for status and dump. */
  readonly maglevIndex: TypedMap<number, number> | undefined;
  /** The tc datapath's: conntrack, loadBalancerSourceRanges, SNAT address per egress device. */
  readonly ct: TypedMap<c.CtKey, c.CtValue> | undefined;
  readonly srcRange: TypedMap<c.SrcRangeKey, number> | undefined;
  readonly devAddr: TypedMap<number, c.DevAddrValue> | undefined;
}

/** The maps every pinned datapath has (the others are opened when present). */
const REQUIRED = [servicesMap, backendsMap, revNatMap, skRevNatMap];

/** One family's maps, built alike for both; undefined when its service maps are not there (pins older than them). */
function familyMaps(family: Family, open: (name: string) => BpfMap | undefined): FamilyMaps | undefined {
  const s = FAMILY_MAPS[family];
  const typed = <K, V>(spec: MapSpec<K, V>) => {
    const m = open(spec.name);
    return m ? new TypedMap(spec, m) : undefined;
  };
  const [services, backends, revNat] = [typed(s.services), typed(s.backends), typed(s.revNat)];
  if (!services || !backends || !revNat) return undefined;
  const maglev = open(s.maglev.name);
  return {
    family,
    services,
    backends,
    revNat,
    skRevNat: typed(s.skRevNat),
    conns: typed(s.conns),
    maglev: maglev ? new MaglevTables(maglev) : undefined,
    maglevIndex: maglev ? new TypedMap(s.maglev, maglev) : undefined,
    ct: typed(s.ct),
    srcRange: typed(s.srcRange),
    devAddr: typed(s.devAddr),
  };
}

export class DatapathMaps {
  readonly v4: FamilyMaps;
  /** The IPv6 maps; absent in pins older than them. */
  readonly v6: FamilyMaps | undefined;
  /** Session affinity (both families, apart by origin); absent only in the pins of a datapath older than it. */
  readonly affinity: TypedMap<c.AffinityKey, c.AffinityValue> | undefined;
  /** The tc datapath's configuration, when it is loaded. */
  readonly config: TypedMap<number, c.SvcmapConfig> | undefined;
  /** The socket hooks' settings; absent in pins older than it. */
  readonly sockConfig: TypedMap<number, c.SockConfig> | undefined;
  /** Pods that bypass the socket LB (cgroup id -> struct sock_bypass); absent in pins older than it. */
  readonly sockBypass: TypedMap<bigint, c.SockBypass> | undefined;
  /** The datapath's counters (per CPU: read with readDatapathCounters()); absent in pins older than it. */
  readonly counters: BpfMap | undefined;
  /** Zone id -> name, for the backends' zone field; absent in pins older than it. */
  readonly zones: TypedMap<number, c.ZoneName> | undefined;

  private constructor(open: (name: string) => BpfMap | undefined) {
    const missing = REQUIRED.filter((spec) => !open(spec.name));
    if (missing.length) throw new Error(`map ${missing[0]!.name} is missing`);
    this.v4 = familyMaps(4, open)!;
    this.v6 = familyMaps(6, open);
    const affinity = open(affinityMap.name);
    this.affinity = affinity ? new TypedMap(affinityMap, affinity) : undefined;
    const config = open(configMap.name);
    this.config = config ? new TypedMap(configMap, config) : undefined;
    const sockConfig = open(sockConfigMap.name);
    this.sockConfig = sockConfig ? new TypedMap(sockConfigMap, sockConfig) : undefined;
    const sockBypass = open(sockBypassMap.name);
    this.sockBypass = sockBypass ? new TypedMap(sockBypassMap, sockBypass) : undefined;
    this.counters = open(metricsMap.name);
    const zones = open(zonesMap.name);
    this.zones = zones ? new TypedMap(zonesMap, zones) : undefined;
  }

  /** One family's maps (IPv6: undefined when the datapath has none). */
  family(family: 4): FamilyMaps;
  family(family: Family): FamilyMaps | undefined;
  family(family: Family): FamilyMaps | undefined {
    return family === 4 ? this.v4 : this.v6;
  }

  /** Each family's maps the datapath has, IPv4's first: code that serves every family walks this list. */
  families(): FamilyMaps[] {
    return this.v6 ? [this.v4, this.v6] : [this.v4];
  }

  /**
   * The maps of loaded objects (shared maps are the same pinned map in each),
   * after checking every codec against the BTF of the objects that use it.
   */
  static fromObjects(objects: readonly BpfObject[]): DatapathMaps {
    // Each object's own BTF is checked for the maps it has: a stale cached
    // copy of one object must not hide behind the other's fresh layouts.
    const owner = new Map<string, BpfObject>();
    const drift = new Set<string>();
    for (const o of objects) {
      const names = new Set(o.maps().map((m) => m.name));
      const specs = ALL_MAPS.filter((spec) => names.has(spec.name));
      for (const d of codecDrift(specs, (struct) => btfStruct(o.btf(), struct))) drift.add(d);
      for (const spec of specs) if (!owner.has(spec.name)) owner.set(spec.name, o);
    }
    for (const [name, o] of owner) {
      const spec = ALL_MAPS.find((x) => x.name === name)!;
      const m = o.map(name);
      for (const d of mapSizeDrift(spec, m.keySize, m.valueSize)) drift.add(d);
    }
    if (drift.size) throw new LayoutDriftError(objects.map((o) => o.path).join(' + '), [...drift]);
    return new DatapathMaps((name) => owner.get(name)?.map(name));
  }

  /** The pinned maps under pinDir (for dump and status). */
  static openPinned(pinDir: string): DatapathMaps {
    const missing = REQUIRED.map((s) => join(pinDir, s.name)).filter((p) => !existsSync(p));
    if (missing.length) {
      throw new Error(
        `no svcmap datapath is pinned at ${pinDir} (missing ${missing.join(', ')}): is the agent running, with --pin-dir ${pinDir}?`,
      );
    }
    return new DatapathMaps((name) => {
      const p = join(pinDir, name);
      return existsSync(p) ? BpfMap.openPinned(p) : undefined;
    });
  }

  all(): Array<TypedMap<unknown, unknown>> {
    const family = (f: FamilyMaps | undefined) =>
      f ? [f.services, f.backends, f.revNat, f.skRevNat, f.conns, f.maglevIndex, f.ct, f.srcRange, f.devAddr] : [];
    return [...family(this.v4), this.affinity, this.config, this.sockConfig, this.sockBypass, this.zones, ...family(this.v6)].filter(
      (m) => m !== undefined,
    ) as Array<TypedMap<unknown, unknown>>;
  }

  close(): void {
    for (const m of this.all()) m.raw.close();
    this.counters?.close();
  }
}
