// A bounded-frequency runner, as kube-proxy's: requests to sync are coalesced,
// runs are at least minInterval apart (0: as soon as the event loop turns),
// and at most maxInterval apart (a periodic full resync even when nothing
// changed). Timers are injectable so the behaviour is testable without waiting.

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  now(): number;
}

const realTimers: Timers = {
  setTimeout: (fn, ms) => {
    const h = setTimeout(fn, ms);
    h.unref?.();
    return h;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
  now: () => performance.now(),
};

export type RunReason = 'change' | 'periodic';

export interface RunnerOptions {
  minIntervalMs: number;
  maxIntervalMs: number;
  timers?: Timers;
}

export class BoundedFrequencyRunner {
  readonly #fn: (reason: RunReason) => void;
  readonly #min: number;
  readonly #max: number;
  readonly #t: Timers;
  #lastRun = Number.NEGATIVE_INFINITY;
  #pending: unknown;
  #periodic: unknown;
  #stopped = true;

  constructor(fn: (reason: RunReason) => void, opts: RunnerOptions) {
    this.#fn = fn;
    this.#min = Math.max(0, opts.minIntervalMs);
    this.#max = opts.maxIntervalMs;
    this.#t = opts.timers ?? realTimers;
  }

  start(): void {
    this.#stopped = false;
    this.#armPeriodic();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#pending !== undefined) this.#t.clearTimeout(this.#pending);
    if (this.#periodic !== undefined) this.#t.clearTimeout(this.#periodic);
    this.#pending = this.#periodic = undefined;
  }

  /** Asks for a run; several asks before it happens give one run. */
  run(): void {
    if (this.#stopped || this.#pending !== undefined) return;
    const wait = Math.max(0, this.#lastRun + this.#min - this.#t.now());
    this.#pending = this.#t.setTimeout(() => this.#go('change'), wait);
  }

  #armPeriodic(): void {
    if (this.#periodic !== undefined) this.#t.clearTimeout(this.#periodic);
    this.#periodic = this.#stopped || !Number.isFinite(this.#max) ? undefined : this.#t.setTimeout(() => this.#go('periodic'), this.#max);
  }

  #go(reason: RunReason): void {
    if (this.#stopped) return;
    if (reason === 'change') this.#pending = undefined;
    else this.#periodic = undefined;
    this.#lastRun = this.#t.now();
    try {
      this.#fn(reason);
    } finally {
      this.#armPeriodic();
    }
  }
}
