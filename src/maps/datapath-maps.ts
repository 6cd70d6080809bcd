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
  ALL_MAPS, zonesMap, affinityMap, backendConns6Map, backendConnsMap, backends6Map, maglev6Map, backendsMap, revNat6Map, services6Map, skRevNat6Map, configMap, ct6Map, ctMap, devAddr6Map, devAddrMap, maglevMap, metricsMap, revNatMap, servicesMap, skRevNatMap, srcRange6Map, srcRangeMap,
} from './registry.ts';
import { MaglevTables } from './maglev-tables.ts';
import { TypedMap } from './typed-map.ts';

/** The maps of one address family that the sync engine writes. */
export interface FamilyMaps {
  services: TypedMap<c.SvcKey, c.SvcValue>;
  backends: TypedMap<number, c.BackendValue>;
  revNat: TypedMap<number, c.RevNatValue>;
  /** loadBalancerSourceRanges (tc). */
  srcRange?: TypedMap<c.SrcRangeKey, number> | undefined;
  /** Maglev tables, keyed by the family's reverse-NAT ids. */
  maglev?: MaglevTables | undefined;
  /** Live connections per backend id of the family. */
  conns?: TypedMap<number, c.BackendConns> | undefined;
}

/** The maps every pinned datapath has (the others are opened when present). */
const REQUIRED = [servicesMap, backendsMap, revNatMap, skRevNatMap];

export class DatapathMaps {
  readonly services: TypedMap<c.SvcKey, c.SvcValue>;
  readonly backends: TypedMap<number, c.BackendValue>;
  readonly revNat: TypedMap<number, c.RevNatValue>;
  readonly skRevNat: TypedMap<c.SkRevNatKey, c.SkRevNatValue>;
  /** Session affinity; absent only in the pins of a datapath older than it. */
  readonly affinity: TypedMap<c.AffinityKey, c.AffinityValue> | undefined;
  /** The tc datapath's maps, when it is loaded. */
  readonly ct: TypedMap<c.CtKey, c.CtValue> | undefined;
  readonly srcRange: TypedMap<c.SrcRangeKey, number> | undefined;
  readonly config: TypedMap<number, c.SvcmapConfig> | undefined;
  /** SNAT address per egress device; absent in pins older than it. */
  readonly devAddr: TypedMap<number, c.DevAddrValue> | undefined;
  /** Live connections per backend; absent only in the pins of a datapath older than it. */
  readonly conns: TypedMap<number, c.BackendConns> | undefined;
  /** The datapath's counters (per CPU: read with readDatapathCounters()); absent in pins older than it. */
  readonly counters: BpfMap | undefined;
  /** The IPv6 service maps; absent in pins older than them. */
  readonly v6: FamilyMaps | undefined;
  readonly skRevNat6: TypedMap<c.SkRevNatKey, c.SkRevNatValue> | undefined;
  /** The tc datapath's IPv6 conntrack and SNAT addresses; absent in pins older than them. */
  readonly ct6: TypedMap<c.CtKey, c.CtValue> | undefined;
  readonly devAddr6: TypedMap<number, c.DevAddrValue> | undefined;
  /** Maglev tables; absent only in the pins of a datapath older than them. */
  readonly maglev: MaglevTables | undefined;
  /** The same map as a list (rev_nat_id -> inner map id), for status and dump. */
  readonly maglevIndex: TypedMap<number, number> | undefined;
  /** svcmap_maglev6 as a list. */
  readonly maglev6Index: TypedMap<number, number> | undefined;
  /** Zone id -> name, for the backends' zone field; absent in pins older than it. */
  readonly zones: TypedMap<number, c.ZoneName> | undefined;

  private constructor(open: (name: string) => BpfMap | undefined) {
    const need = (name: string) => {
      const m = open(name);
      if (!m) throw new Error(`map ${name} is missing`);
      return m;
    };
    this.services = new TypedMap(servicesMap, need(servicesMap.name));
    this.backends = new TypedMap(backendsMap, need(backendsMap.name));
    this.revNat = new TypedMap(revNatMap, need(revNatMap.name));
    this.skRevNat = new TypedMap(skRevNatMap, need(skRevNatMap.name));
    const affinity = open(affinityMap.name);
    this.affinity = affinity ? new TypedMap(affinityMap, affinity) : undefined;
    const ct = open(ctMap.name);
    const srcRange = open(srcRangeMap.name);
    const config = open(configMap.name);
    this.ct = ct ? new TypedMap(ctMap, ct) : undefined;
    this.srcRange = srcRange ? new TypedMap(srcRangeMap, srcRange) : undefined;
    this.config = config ? new TypedMap(configMap, config) : undefined;
    const devAddr = open(devAddrMap.name);
    this.devAddr = devAddr ? new TypedMap(devAddrMap, devAddr) : undefined;
    this.counters = open(metricsMap.name);
    const conns = open(backendConnsMap.name);
    this.conns = conns ? new TypedMap(backendConnsMap, conns) : undefined;
    const maglev = open(maglevMap.name);
    this.maglev = maglev ? new MaglevTables(maglev) : undefined;
    this.maglevIndex = maglev ? new TypedMap(maglevMap, maglev) : undefined;
    const [svc6, be6, rn6] = [open(services6Map.name), open(backends6Map.name), open(revNat6Map.name)];
    const [mgl6, conns6, srcRange6] = [open(maglev6Map.name), open(backendConns6Map.name), open(srcRange6Map.name)];
    this.v6 = svc6 && be6 && rn6
      ? {
        services: new TypedMap(services6Map, svc6), backends: new TypedMap(backends6Map, be6), revNat: new TypedMap(revNat6Map, rn6),
        maglev: mgl6 ? new MaglevTables(mgl6) : undefined,
        conns: conns6 ? new TypedMap(backendConns6Map, conns6) : undefined,
        srcRange: srcRange6 ? new TypedMap(srcRange6Map, srcRange6) : undefined,
      }
      : undefined;
    this.maglev6Index = mgl6 ? new TypedMap(maglev6Map, mgl6) : undefined;
    const zones = open(zonesMap.name);
    this.zones = zones ? new TypedMap(zonesMap, zones) : undefined;
    const ct6 = open(ct6Map.name);
    this.ct6 = ct6 ? new TypedMap(ct6Map, ct6) : undefined;
    const devAddr6 = open(devAddr6Map.name);
    this.devAddr6 = devAddr6 ? new TypedMap(devAddr6Map, devAddr6) : undefined;
    const sk6 = open(skRevNat6Map.name);
    this.skRevNat6 = sk6 ? new TypedMap(skRevNat6Map, sk6) : undefined;
  }

  /** The maps the sync engine writes for one family (IPv6: undefined when the datapath has none). */
  family(family: 4 | 6): FamilyMaps | undefined {
    return family === 4 ? this : this.v6;
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
      throw new Error(`no svcmap datapath is pinned at ${pinDir} (missing ${missing.join(', ')}): is the agent running, with --pin-dir ${pinDir}?`);
    }
    return new DatapathMaps((name) => {
      const p = join(pinDir, name);
      return existsSync(p) ? BpfMap.openPinned(p) : undefined;
    });
  }

  all(): Array<TypedMap<unknown, unknown>> {
    const v6 = this.v6 ? [this.v6.services, this.v6.backends, this.v6.revNat, this.skRevNat6, this.v6.conns, this.maglev6Index, this.ct6, this.v6.srcRange, this.devAddr6] : [];
    return [this.services, this.backends, this.revNat, this.skRevNat, this.affinity, this.ct, this.srcRange, this.config, this.devAddr, this.conns, this.maglevIndex, this.zones, ...v6]
      .filter((m) => m !== undefined) as Array<TypedMap<unknown, unknown>>;
  }

  close(): void {
    for (const m of this.all()) m.raw.close();
    this.counters?.close();
  }
}

