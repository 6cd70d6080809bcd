// The network programming latency, measured as kube-proxy measures it: from
// an EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time to the
// map write that carries the change. Only changes that need programming
// count: a trigger time is kept only if it is later than the agent's start
// (the initial list and every relist re-deliver old slices, whose trigger
// times say nothing about this agent), and only if its Service's frontends
// actually changed when the model took the change in (a relisted, unchanged
// slice changes nothing). It is observed once, when the write succeeds; a
// failed sync keeps it for the retry, whose delay is part of the latency.
// Each is kept with the address family of its slice (kube-proxy observes it
// per family: the two slices of a dual-stack Service carry the same time).
import type { Family } from '../util/family.ts';

/** A trigger time and the family of the slice that carried it, as one key ("4 1700000000000"). */
type Keyed = string;
const key = (at: number, family: Family): Keyed => `${family} ${at}`;

export class TriggerTimes {
  readonly #since: number;
  /** Trigger times by owner (Service) that the model has not been asked about yet. */
  readonly #arrived = new Map<string, Set<Keyed>>();
  /** Trigger times by owner whose change is planned but not written yet. */
  readonly #unwritten = new Map<string, Set<Keyed>>();

  /** since: when the agent started (ms since the epoch); earlier trigger times are never observed. */
  constructor(since: number) {
    this.#since = since;
  }

  /** An EndpointSlice of `owner` (of this address family) arrived with this trigger time (ms since the epoch). */
  arrived(owner: string, at: number, family: Family = 4): void {
    if (!(at > this.#since)) return;
    add(this.#arrived, owner, key(at, family));
  }

  /** The model took in every change so far; `changed` are the owners whose frontends differ. The others' trigger times needed no programming. */
  taken(changed: (owner: string) => boolean): void {
    for (const [owner, times] of this.#arrived) {
      if (!changed(owner)) continue;
      for (const k of times) add(this.#unwritten, owner, k);
    }
    this.#arrived.clear();
  }

  /**
   * The maps now hold every change taken in, except the frontends of the
   * owners `notWritten` (deferred for lack of map space). Returns the
   * latencies, in seconds, to observe, with their slices' family.
   */
  written(now: number, notWritten: ReadonlySet<string> = new Set()): Array<{ seconds: number; family: Family }> {
    const out: Array<{ seconds: number; family: Family }> = [];
    for (const [owner, times] of this.#unwritten) {
      if (notWritten.has(owner)) continue;
      for (const k of times) {
        const [family, at] = k.split(' ').map(Number) as [Family, number];
        // A trigger time ahead of this clock (skew between nodes) is no latency to speak of.
        if (now >= at) out.push({ seconds: (now - at) / 1000, family });
      }
      this.#unwritten.delete(owner);
    }
    return out;
  }
}

function add(m: Map<string, Set<Keyed>>, owner: string, k: Keyed): void {
  const set = m.get(owner);
  if (set) set.add(k);
  else m.set(owner, new Set([k]));
}
