// Writes svcmap_devaddr (ifindex -> the device's primary IPv4 address, the
// SNAT source of flows leaving through it; see bpf/lib/snat_addr.h), and
// svcmap_devaddr6 (its first global IPv6 address) alike, to match the
// node's devices. Each entry is one atomic element update, so a reader
// sees a device's old address or its new one, never a mix; new and changed
// entries go in before stale ones go, so a device that keeps an address is
// never without one.
import type { DevAddrValue } from '../../maps/codecs.ts';
import type { TypedMap } from '../../maps/typed-map.ts';

export interface DeviceAddressChanges {
  /** ifindex -> the address written (new or changed). */
  set: Map<number, string>;
  /** ifindexes removed (the device is gone or has no address of the map's family any more). */
  removed: number[];
}

export function syncDeviceAddresses(map: TypedMap<number, DevAddrValue>, desired: ReadonlyMap<number, string>): DeviceAddressChanges {
  const current = new Map(map.entries().map(([k, v]) => [k, v.addr]));
  const set = new Map<number, string>();
  for (const [ifindex, addr] of desired) {
    if (current.get(ifindex) === addr) continue;
    map.put(ifindex, { addr });
    set.set(ifindex, addr);
  }
  const removed = [...current.keys()].filter((k) => !desired.has(k));
  for (const k of removed) map.delete(k);
  return { set, removed };
}
