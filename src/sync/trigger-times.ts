// The network programming latency, measured as kube-proxy measures it: from
// an EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time to the
// map write that carries the change. Only changes that need programming
// count: a trigger time is kept only if it is later than the agent's start
// (the initial list and every relist re-deliver old slices, whose trigger
// times say nothing about this agent), and only if its Service's frontends
// actually changed when the model took the change in (a relisted, unchanged
// slice changes nothing). It is observed once, when the write succeeds; a
// failed sync keeps it for the retry, whose delay is part of the latency.

export class TriggerTimes {
  readonly #since: number;
  /** Trigger times by owner (Service) that the model has not been asked about yet. */
  readonly #arrived = new Map<string, Set<number>>();
  /** Trigger times by owner whose change is planned but not written yet. */
  readonly #unwritten = new Map<string, Set<number>>();

  /** since: when the agent started (ms since the epoch); earlier trigger times are never observed. */
  constructor(since: number) {
    this.#since = since;
  }

  /** An EndpointSlice of `owner` arrived with this trigger time (ms since the epoch). */
  arrived(owner: string, at: number): void {
    if (!(at > this.#since)) return;
    add(this.#arrived, owner, at);
  }

  /** The model took in every change so far; `changed` are the owners whose frontends differ. The others' trigger times needed no programming. */
  taken(changed: (owner: string) => boolean): void {
    for (const [owner, times] of this.#arrived) {
      if (!changed(owner)) continue;
      for (const at of times) add(this.#unwritten, owner, at);
    }
    this.#arrived.clear();
  }

  /**
   * The maps now hold every change taken in, except the frontends of the
   * owners `notWritten` (deferred for lack of map space). Returns the
   * latencies, in seconds, to observe.
   */
  written(now: number, notWritten: ReadonlySet<string> = new Set()): number[] {
    const out: number[] = [];
    for (const [owner, times] of this.#unwritten) {
      if (notWritten.has(owner)) continue;
      // A trigger time ahead of this clock (skew between nodes) is no latency to speak of.
      for (const at of times) if (now >= at) out.push((now - at) / 1000);
      this.#unwritten.delete(owner);
    }
    return out;
  }
}

function add(m: Map<string, Set<number>>, owner: string, at: number): void {
  const set = m.get(owner);
  if (set) set.add(at);
  else m.set(owner, new Set([at]));
}
