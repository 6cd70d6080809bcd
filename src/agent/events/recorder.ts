// The bookkeeping behind svcmap's Kubernetes Events, pure and clock-free (the
// caller passes `now`), so that de-duplication and rate limiting are tested
// without waiting:
//   - one series per (object, reason, note): a repeat within the series
//     window becomes a patch of the existing Event's series (count,
//     lastObservedTime), not a new Event, as client-go's events recorder does;
//   - a token bucket per object (client-go's spam filter: burst 25, then one
//     write per 5 minutes) and one for the whole agent, charged per API write;
//   - a bounded queue of series, not of snapshots: a series waiting to be
//     written is written once, with its latest count, however often it is
//     observed meanwhile.
// Nothing here blocks or throws on overload: an observation that cannot be
// written now is reported as dropped (the caller counts it), and its count is
// kept, so the next write of that series carries it.

export const EVENT_REASONS = [
  'InvalidObject',
  'FrontendConflict',
  'MapFull',
  'UnknownAnnotationValue',
  'HostPortIgnored',
  'SocketLbBypassIgnored',
] as const;
export type EventReason = (typeof EVENT_REASONS)[number];

/** The objects svcmap reports about; all are namespaced (a Pod: about its hostPorts). */
export type RegardingKind = 'Service' | 'EndpointSlice' | 'Pod';

export interface Regarding {
  kind: RegardingKind;
  namespace: string;
  name: string;
}

/** One observation: svcmap could not program (part of) an object, for this reason. */
export interface EventInput {
  regarding: Regarding;
  reason: EventReason;
  note: string;
}

export interface EventLimits {
  /** Writes one object may have at once, and how often one more is allowed. */
  perObjectBurst: number;
  perObjectRefillMs: number;
  /** The same for all of this agent's Event writes together. */
  globalBurst: number;
  globalRefillMs: number;
  /** Series waiting to be written; beyond it observations are dropped. */
  queueSize: number;
  /** A repeat this long after the last observation starts a new Event instead of extending the series. */
  seriesWindowMs: number;
  /** Series and per-object buckets remembered (memory bound; the least recently observed go first). */
  maxTracked: number;
}

/**
 * Per object, client-go's EventSourceObjectSpamFilter values (burst 25, one
 * token per 5 minutes). Globally, a node agent's share of the API server:
 * burst 50, then one write per second (the kubelet allows 50/s; an agent on
 * every node should ask far less). The series window is client-go's series
 * heartbeat (30 minutes): a problem seen again within it extends the Event,
 * later it gets a new one (Events live one hour by default anyway).
 */
export const DEFAULT_LIMITS: EventLimits = {
  perObjectBurst: 25,
  perObjectRefillMs: 5 * 60_000,
  globalBurst: 50,
  globalRefillMs: 1_000,
  queueSize: 1_000,
  seriesWindowMs: 30 * 60_000,
  maxTracked: 10_000,
};

/** What observe() and settle() did with an observation. */
export type Outcome =
  | 'queued' // a write (create or patch) is queued
  | 'coalesced' // a write of this series is queued or in flight already and will carry it
  | 'rate_limited' // no token for the object or the agent: dropped for now, the count is kept
  | 'queue_full'; // the queue is full: dropped for now, the count is kept

export type Dropped = Extract<Outcome, 'rate_limited' | 'queue_full'>;

/** A write to make: create the Event (it has no name yet) or patch its series. */
export interface EventWrite {
  op: 'create' | 'patch';
  /** The Event's name: made up for a create, the created one for a patch. */
  name: string;
  input: EventInput;
  /** The series as of when the write was taken. */
  firstAt: number;
  lastAt: number;
  count: number;
  series: Series;
}

/** How a write went; `gone`: the API server answered 404. */
export type WriteResult = { ok: true; name?: string } | { ok: false; gone: boolean };

/** One (object, reason, note) and what the API server has of it. Opaque to callers. */
export interface Series {
  readonly key: string;
  readonly objectKey: string;
  readonly input: EventInput;
  firstAt: number;
  lastAt: number;
  count: number;
  /** The Event's name once created. */
  eventName: string | undefined;
  /** idle: nothing pending; queued: in the queue; inflight: taken by the sender. */
  state: 'idle' | 'queued' | 'inflight';
  /** Observed since the last write was taken. */
  dirty: boolean;
}

export class TokenBucket {
  #tokens: number;
  #at: number;
  readonly #burst: number;
  readonly #refillMs: number;

  constructor(burst: number, refillMs: number, now: number) {
    this.#tokens = burst;
    this.#at = now;
    this.#burst = burst;
    this.#refillMs = refillMs;
  }

  #refill(now: number): void {
    if (now > this.#at) {
      this.#tokens = Math.min(this.#burst, this.#tokens + (now - this.#at) / this.#refillMs);
      this.#at = now;
    }
  }

  has(now: number): boolean {
    this.#refill(now);
    return this.#tokens >= 1;
  }

  take(now: number): boolean {
    if (!this.has(now)) return false;
    this.#tokens -= 1;
    return true;
  }

  /** A full bucket is the same as a fresh one: it can be forgotten. */
  isFull(now: number): boolean {
    this.#refill(now);
    return this.#tokens >= this.#burst;
  }
}

export function objectKeyOf(r: Regarding): string {
  return `${r.kind} ${r.namespace}/${r.name}`;
}

// Kubernetes object names are at most 253 characters: room for "." and the
// 16 hex digits of the time in nanoseconds, as client-go names its Events.
const MAX_NAME = 253;

export class EventBook {
  readonly #limits: EventLimits;
  /** Series by key, least recently observed first (re-inserted on each observation). */
  readonly #series = new Map<string, Series>();
  /** Per-object buckets, least recently charged first. */
  readonly #buckets = new Map<string, TokenBucket>();
  readonly #global: TokenBucket;
  readonly #queue: Series[] = [];
  /** Disambiguates Event names made in the same millisecond. */
  #seq = 0;

  constructor(limits: EventLimits, now: number) {
    this.#limits = limits;
    this.#global = new TokenBucket(limits.globalBurst, limits.globalRefillMs, now);
  }

  get queued(): number {
    return this.#queue.length;
  }

  get tracked(): { series: number; buckets: number } {
    return { series: this.#series.size, buckets: this.#buckets.size };
  }

  observe(input: EventInput, now: number): Outcome {
    const objectKey = objectKeyOf(input.regarding);
    const key = `${objectKey}\u0000${input.reason}\u0000${input.note}`;
    let s = this.#series.get(key);
    // A series is over once quiet for the window; one still being written is not.
    if (s && s.state === 'idle' && now - s.lastAt > this.#limits.seriesWindowMs) {
      this.#series.delete(key);
      s = undefined;
    }
    if (s) {
      this.#series.delete(key); // re-inserted below: most recently observed last
      s.count++;
      s.lastAt = now;
      s.dirty = true;
    } else {
      s = { key, objectKey, input, firstAt: now, lastAt: now, count: 1, eventName: undefined, state: 'idle', dirty: true };
    }
    this.#series.set(key, s);
    const outcome = s.state === 'idle' ? this.#enqueue(s, now) : 'coalesced';
    this.#bound(now, s);
    return outcome;
  }

  /** The next write, or undefined when none is queued. The series is in flight until settle(). */
  take(now: number): EventWrite | undefined {
    const s = this.#queue.shift();
    if (!s) return undefined;
    s.state = 'inflight';
    s.dirty = false;
    const base = { input: s.input, firstAt: s.firstAt, count: s.count, lastAt: s.lastAt, series: s };
    if (s.eventName !== undefined) return { op: 'patch', name: s.eventName, ...base };
    return { op: 'create', name: this.#eventName(s.input.regarding.name, now), ...base };
  }

  /**
   * Records how a write went. Returns what became of observations made while
   * it was in flight (or of a re-create after a 404), if anything was tried.
   */
  settle(w: EventWrite, result: WriteResult, now: number): Outcome | undefined {
    const s = w.series;
    s.state = 'idle';
    if (result.ok) {
      if (w.op === 'create') s.eventName = result.name ?? w.name;
      return s.dirty ? this.#enqueue(s, now) : undefined;
    }
    if (result.gone && w.op === 'patch') {
      // The Event expired (the API server's event TTL) or was deleted: make
      // it again, with the series so far, as client-go does.
      s.eventName = undefined;
      s.dirty = true;
      return this.#enqueue(s, now);
    }
    if (result.gone) {
      // Create answered 404: the object or its namespace is gone; nothing to report on.
      if (this.#series.get(s.key) === s) this.#series.delete(s.key);
      return undefined;
    }
    // Any other failure: kept for the next observation to retry, never retried
    // in a loop against an API server that is failing.
    s.dirty = true;
    return undefined;
  }

  #enqueue(s: Series, now: number): Outcome {
    if (this.#queue.length >= this.#limits.queueSize) return 'queue_full';
    let bucket = this.#buckets.get(s.objectKey);
    if (bucket)
      this.#buckets.delete(s.objectKey); // re-inserted: most recently charged last
    else bucket = new TokenBucket(this.#limits.perObjectBurst, this.#limits.perObjectRefillMs, now);
    this.#buckets.set(s.objectKey, bucket);
    // Both or neither: a token is never spent on a write that is not made.
    if (!bucket.has(now) || !this.#global.has(now)) return 'rate_limited';
    bucket.take(now);
    this.#global.take(now);
    s.state = 'queued';
    this.#queue.push(s);
    return 'queued';
  }

  #eventName(objectName: string, now: number): string {
    // client-go: <object name>.<hex of the time in ns>; a sequence number in
    // the sub-millisecond digits keeps names made in one millisecond apart.
    const ns = BigInt(Math.floor(now)) * 1_000_000n + BigInt(this.#seq++ % 1_000_000);
    const suffix = ns.toString(16);
    return `${objectName.slice(0, MAX_NAME - suffix.length - 1)}.${suffix}`;
  }

  /**
   * Keeps memory bounded: past maxTracked, drops finished series and full
   * buckets, then the least recently used, down to 90% of it, so that the
   * scan is paid once per tenth of maxTracked new entries, not per entry.
   */
  #bound(now: number, keep: Series): void {
    const max = this.#limits.maxTracked;
    const target = Math.floor(max * 0.9);
    if (this.#series.size > max) {
      for (const [key, s] of this.#series) {
        if (s.state === 'idle' && s !== keep && now - s.lastAt > this.#limits.seriesWindowMs) this.#series.delete(key);
      }
      for (const [key, s] of this.#series) {
        if (this.#series.size <= target) break;
        // Forgetting a series only means that its next repeat creates a new Event.
        if (s.state === 'idle' && s !== keep) this.#series.delete(key);
      }
    }
    if (this.#buckets.size > max) {
      for (const [key, b] of this.#buckets) if (b.isFull(now)) this.#buckets.delete(key);
      for (const key of this.#buckets.keys()) {
        if (this.#buckets.size <= target) break;
        // Forgetting a bucket refills it early; it takes maxTracked objects written to since to get here.
        this.#buckets.delete(key);
      }
    }
  }
}
