// The datapath's counters (bpf/lib/maps.h dp_count(), map svcmap_metrics):
// one per-CPU counter per (hook, reason), summed over the CPUs here.
import type { BpfMap } from '../bpf/map.ts';
import { dpCounter, dpIndexKey } from './codecs.ts';
import { DP_HOOKS, DP_REASONS, dpIndex } from './constants.ts';

export interface DpCounterRow {
  hook: string;
  reason: string;
  packets: bigint;
  /** The reason is a drop (tc) or a refusal (socket hooks). */
  drop: boolean;
}

/**
 * Every counter a hook declares (DP_REASONS), zero or not, plus any other
 * (hook, reason) that is not zero: one that the datapath counts and the
 * table does not declare still shows.
 */
export function readDatapathCounters(map: BpfMap): DpCounterRow[] {
  const key = Buffer.alloc(dpIndexKey.layout.size);
  const rows: DpCounterRow[] = [];
  for (const hook of DP_HOOKS) {
    for (const reason of DP_REASONS) {
      dpIndexKey.encode(dpIndex(hook.id, reason.id), key, 0);
      const perCpu = map.lookupPerCpu(key);
      let packets = 0n;
      for (const v of perCpu ?? []) packets += dpCounter.decode(v, 0).packets;
      if (packets > 0n || reason.hooks.includes(hook.name)) rows.push({ hook: hook.name, reason: reason.name, packets, drop: reason.drop });
    }
  }
  return rows;
}
