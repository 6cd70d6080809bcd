// The datapath's maps as typed maps, from a freshly loaded object (the agent)
// or from their pins (dump, status), with the codec check against BTF.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { btfStruct } from '../bpf/btf.ts';
import { BpfMap } from '../bpf/map.ts';
import type { BpfObject } from '../bpf/object.ts';
import type { Ptr } from '../bpf/native.ts';
import type { BackendValue, RevNatValue, SkRevNatKey, SkRevNatValue, SvcKey, SvcValue } from './codecs.ts';
import { LayoutDriftError, codecDrift, mapSizeDrift } from './btf-check.ts';
import { ALL_MAPS, backendsMap, revNatMap, servicesMap, skRevNatMap } from './registry.ts';
import { TypedMap } from './typed-map.ts';

export class DatapathMaps {
  readonly services: TypedMap<SvcKey, SvcValue>;
  readonly backends: TypedMap<number, BackendValue>;
  readonly revNat: TypedMap<number, RevNatValue>;
  readonly skRevNat: TypedMap<SkRevNatKey, SkRevNatValue>;

  private constructor(open: (name: string) => BpfMap) {
    this.services = new TypedMap(servicesMap, open(servicesMap.name));
    this.backends = new TypedMap(backendsMap, open(backendsMap.name));
    this.revNat = new TypedMap(revNatMap, open(revNatMap.name));
    this.skRevNat = new TypedMap(skRevNatMap, open(skRevNatMap.name));
  }

  /** The maps of a loaded object, after checking every codec against the object's BTF. */
  static fromObject(object: BpfObject): DatapathMaps {
    checkCodecsAgainstBtf(object.btf(), object.path);
    const drift: string[] = [];
    for (const spec of ALL_MAPS) {
      const m = object.map(spec.name);
      drift.push(...mapSizeDrift(spec, m.keySize, m.valueSize));
    }
    if (drift.length) throw new LayoutDriftError(object.path, drift);
    return new DatapathMaps((name) => object.map(name));
  }

  /** The pinned maps under pinDir (for dump and status). */
  static openPinned(pinDir: string): DatapathMaps {
    const missing = ALL_MAPS.map((s) => join(pinDir, s.name)).filter((p) => !existsSync(p));
    if (missing.length) {
      throw new Error(`no svcmap datapath is pinned at ${pinDir} (missing ${missing.join(', ')}): is the agent running, with --pin-dir ${pinDir}?`);
    }
    return new DatapathMaps((name) => BpfMap.openPinned(join(pinDir, name)));
  }

  all(): Array<TypedMap<unknown, unknown>> {
    return [this.services, this.backends, this.revNat, this.skRevNat] as Array<TypedMap<unknown, unknown>>;
  }

  close(): void {
    for (const m of this.all()) m.raw.close();
  }
}

/** Throws LayoutDriftError naming each struct and field where codecs and BTF differ. */
export function checkCodecsAgainstBtf(btf: Ptr, objectPath: string): void {
  const drift = codecDrift(ALL_MAPS, (name) => btfStruct(btf, name));
  if (drift.length) throw new LayoutDriftError(objectPath, drift);
}
