// The datapath's core maps pinned by hand (root-owned, mode 0600, as the
// agent pins them) in a claimed lab pin directory, holding one ClusterIP
// 10.96.7.1:80/TCP with one backend 10.244.7.1:8080: enough for dump,
// status and explain to read, without an agent. Removed in teardown.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { claimPinDir, ensureBpffs } from '../../lab/pins.ts';
import { BpfMap } from '../../src/bpf/map.ts';
import { IPPROTO_TCP, SVC_F_CLUSTERIP, SVC_SCOPE_EXT } from '../../src/maps/constants.ts';
import { type MapSpec, backendsMap, revNatMap, servicesMap, skRevNatMap } from '../../src/maps/registry.ts';
import { TypedMap } from '../../src/maps/typed-map.ts';

const BPF_MAP_TYPE_HASH = 1;

export const PINNED_SPECS = [servicesMap, backendsMap, revNatMap, skRevNatMap] as const;

/**
 * Claims a pin directory named for `name`, and pins the maps with the one
 * service there, or in the directory `prepare(outer)` gives (made if
 * missing: outer/ stands for a bpffs mount point, the pins in one below).
 */
export function pinOneService(
  t: { teardown(fn: () => void): void },
  name: string,
  prepare: (outer: string) => string = (outer) => outer,
): string {
  ensureBpffs();
  const claim = claimPinDir(name);
  t.teardown(() => claim.release());
  const pinDir = prepare(claim.dir);
  mkdirSync(pinDir, { recursive: true });
  const pin = <K, V>(spec: MapSpec<K, V>): TypedMap<K, V> => {
    const m = BpfMap.create(BPF_MAP_TYPE_HASH, spec.name, spec.key.layout.size, spec.value.layout.size, 16);
    m.pin(join(pinDir, spec.name));
    return new TypedMap(spec, m);
  };
  const maps = [pin(servicesMap), pin(backendsMap), pin(revNatMap), pin(skRevNatMap)] as const;
  t.teardown(() => {
    for (const m of maps) m.raw.close();
  });
  const [services, backends, revNat] = maps;
  const vip = { addr: '10.96.7.1', port: 80, proto: IPPROTO_TCP, scope: SVC_SCOPE_EXT };
  backends.put(1, { addr: '10.244.7.1', port: 8080, proto: IPPROTO_TCP, state: 0, flags: 0, zone: 0 });
  revNat.put(1, { addr: vip.addr, port: vip.port });
  services.put({ ...vip, slot: 1 }, { backend_id: 1, rev_nat_id: 0, count: 0, flags: 0, algorithm: 0, affinity_timeout: 0 });
  services.put({ ...vip, slot: 0 }, { backend_id: 0, rev_nat_id: 1, count: 1, flags: SVC_F_CLUSTERIP, algorithm: 0, affinity_timeout: 0 });
  return pinDir;
}
