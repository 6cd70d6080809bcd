// What the sync engine is asked to program: one frontend as map keys, master
// flags and backend values. Built from the model by src/agent/loops/targets.ts.
import type { BackendValue } from '../maps/codecs.ts';
import type { FrontendKey } from './state.ts';

export interface FrontendTarget {
  id: string;
  key: FrontendKey;
  flags: number;
  algorithm: number;
  affinityTimeout: number;
  /** LB_ALG_MAGLEV: the table size M; absent for other algorithms. */
  maglevSize?: number;
  backends: BackendValue[];
  /** loadBalancerSourceRanges, normalized CIDRs (host bits cleared), sorted. */
  sourceRanges: string[];
  /** The Service it belongs to (namespace/name): partial syncs replace an owner's frontends. */
  owner: string;
  /** For messages: namespace/name:port of the service. */
  label: string;
}
