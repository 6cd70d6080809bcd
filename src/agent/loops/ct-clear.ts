// When a backend leaves a frontend, the conntrack entries of its UDP flows
// go (both entries of each flow), as kube-proxy clears UDP conntrack entries
// for removed endpoints: a client that keeps its port (DNS resolvers,
// statsd) would otherwise keep sending to a backend that is gone. The tc and
// veth datapaths would also notice it themselves on the flow's next datagram
// (lb_flow_stale() in bpf/lib/tc_lb.h: the backend id no longer names that
// backend), but an id reused for another endpoint in between would not be
// noticed, and the entries would hold the map until the GC's idle limit.
// Socket termination has no job for these flows: no socket of this node was
// translated. TCP flows are left to finish (or fail) as kube-proxy leaves
// them; the GC removes them when they close or idle out.
import type { CtKey, CtValue } from '../../maps/codecs.ts';
import { CT_DIR_FWD, IPPROTO_UDP } from '../../maps/constants.ts';
import type { FamilyMaps } from '../../maps/datapath-maps.ts';
import type { RemovedBackend } from '../../sync/removed.ts';
import { CT_FORMATS, readCtPacked } from './ct-gc.ts';

/** The entries of the removed backends' UDP flows: forward entries translated to one, reply entries from one. */
export function removedFlowKeys(entries: Iterable<readonly [CtKey, CtValue]>, removed: readonly RemovedBackend[]): CtKey[] {
  const gone = new Set(removed.filter((r) => r.proto === IPPROTO_UDP).map((r) => `${r.addr}|${r.port}|${r.revNatId}`));
  if (!gone.size) return [];
  const out: CtKey[] = [];
  for (const [k, v] of entries) {
    if (k.proto !== IPPROTO_UDP) continue;
    const backend = k.dir === CT_DIR_FWD ? `${v.new_daddr}|${v.new_dport}` : `${k.saddr}|${k.sport}`;
    if (gone.has(`${backend}|${v.rev_nat_id}`)) out.push(k);
  }
  return out;
}

/**
 * Deletes the conntrack entries of the removed backends' UDP flows; how many.
 * Runs in the sync that removed them: the map is read as the GC reads it
 * (batched, packed), and only UDP entries are decoded.
 */
export function clearRemovedFlows(maps: Pick<FamilyMaps, 'ct' | 'family'>, removed: readonly RemovedBackend[]): number {
  if (!maps.ct || !removed.some((r) => r.proto === IPPROTO_UDP)) return 0;
  const fmt = CT_FORMATS[maps.family];
  const ct = readCtPacked(maps.ct.raw, fmt);
  function* udpEntries(): Generator<[CtKey, CtValue]> {
    for (let i = 0; i < ct.count; i++) {
      const k = i * fmt.keySize;
      if (ct.keys[k + fmt.K.proto] !== IPPROTO_UDP) continue;
      yield [
        fmt.key.decode(Buffer.from(ct.keys.buffer, ct.keys.byteOffset + k, fmt.keySize), 0),
        fmt.value.decode(Buffer.from(ct.values.buffer, ct.values.byteOffset + i * fmt.valueSize, fmt.valueSize), 0),
      ];
    }
  }
  let n = 0;
  // One by one: an entry the datapath or the GC removed meanwhile is no error.
  for (const k of removedFlowKeys(udpEntries(), removed)) if (maps.ct.delete(k)) n++;
  return n;
}
