// The client part of the affinity key the tc programs write (svcmap_maps.h,
// struct affinity_key): an IPv4 client's address as it is (origin tc), an
// IPv6 client's /64 in netns_cookie and its interface id folded to 32 bits
// in client_addr (origin tc6, lb6_tc_select()). The bytes are laid out as
// the datapath lays them and read back through the key's codec, so the u64
// comes out in host order as the map's readers see it.
import { type AffinityKey, affinityKey } from './codecs.ts';
import { AFFINITY_ORIGIN_TC, AFFINITY_ORIGIN_TC6 } from './constants.ts';
import { bytesToIpv6, ipv6ToBytes } from '../util/ipv6.ts';
import { familyOf } from '../util/family.ts';

/** The key of the entry that tc reads for a client address (IPv4 text, or canonical IPv6 text) and frontend. */
export function tcAffinityKey(client: string, revNatId: number): AffinityKey {
  if (familyOf(client) === 4) return { netns_cookie: 0n, client_addr: client, rev_nat_id: revNatId, origin: AFFINITY_ORIGIN_TC };
  const a = ipv6ToBytes(client);
  const buf = Buffer.alloc(24);
  buf.set(a.subarray(0, 8), 0);
  // saddr[2] ^ saddr[3]: the XOR of two big-endian words is their bytes' XOR.
  for (let i = 0; i < 4; i++) buf[8 + i] = a[8 + i]! ^ a[12 + i]!;
  const k = affinityKey.decode(buf, 0);
  return { ...k, rev_nat_id: revNatId, origin: AFFINITY_ORIGIN_TC6 };
}

/** An origin tc6 entry's client as text: its /64 and the folded interface id (the address itself is not kept). */
export function tc6ClientText(k: AffinityKey): string {
  const buf = Buffer.alloc(24);
  affinityKey.encode(k, buf, 0);
  const prefix = new Uint8Array(16);
  prefix.set(buf.subarray(0, 8), 0);
  return `${bytesToIpv6(prefix)}/64 fold ${buf.subarray(8, 12).toString('hex')}`;
}
