// Sends what the EventBook queues, off the sync loop: record() only books the
// observation and returns; one asynchronous drain writes the queue in order,
// one request at a time, so a slow or failing API server delays Events and
// never a sync. Failures are logged once per streak (and again when writes
// work again), counted, and never thrown.
import type { Logger } from '../log.ts';
import {
  type Dropped,
  type EventBook,
  type EventInput,
  type EventReason,
  type EventWrite,
  type Outcome,
  type Regarding,
  type WriteResult,
} from './recorder.ts';

export interface NewEvent {
  /** The name to create the Event under (unique per agent: object name + time). */
  name: string;
  regarding: Regarding;
  reason: EventReason;
  note: string;
  /** First observation, ms since the epoch. */
  eventTime: number;
  /** Set when the problem was seen more than once before the Event could be created. */
  series?: EventSeries;
}

export interface EventSeries {
  count: number;
  /** ms since the epoch */
  lastObservedTime: number;
}

/** Where Events go: the API server (k8s-sink.ts), or a test's fake. */
export interface EventSink {
  /** Creates the Event; resolves to the name the API server gave it. */
  create(ev: NewEvent): Promise<string>;
  /** Replaces the series (count, lastObservedTime) of an existing Event. */
  patchSeries(namespace: string, name: string, series: EventSeries): Promise<void>;
}

/** A failed write; `status` is the HTTP status when the API server answered (404: the object or Event is gone). */
export class EventSinkError extends Error {
  readonly status: number | undefined;
  constructor(message: string, status: number | undefined, options?: ErrorOptions) {
    super(message, options);
    this.name = 'EventSinkError';
    this.status = status;
  }
}

export type DropReason = Dropped | 'api_error';

export interface RecorderOptions {
  log: Logger;
  /** Counts observations that were not written (svcmap_events_dropped_total). */
  dropped: (reason: DropReason) => void;
  /** Wall clock, ms since the epoch (Events carry wall-clock times). */
  now?: () => number;
}

export class EventRecorder {
  readonly #book: EventBook;
  readonly #sink: EventSink;
  readonly #log: Logger;
  readonly #dropped: (reason: DropReason) => void;
  readonly #now: () => number;
  #draining: Promise<void> | undefined;
  #stopped = false;
  /** Inside a streak of failed writes: logged at its start only. */
  #failing = false;
  readonly #warnedDrops = new Set<DropReason>();

  constructor(book: EventBook, sink: EventSink, opts: RecorderOptions) {
    this.#book = book;
    this.#sink = sink;
    this.#log = opts.log;
    this.#dropped = opts.dropped;
    this.#now = opts.now ?? Date.now;
  }

  /** Books one observation; never blocks and never throws into the caller. */
  record(input: EventInput): void {
    if (this.#stopped) return;
    this.#handle(this.#book.observe(input, this.#now()), input);
  }

  /** Resolves once nothing is queued or being written (for tests and an orderly stop). */
  async idle(): Promise<void> {
    while (this.#draining) await this.#draining;
  }

  /** Stops writing; what is still queued is dropped (the process is going away). */
  stop(): void {
    this.#stopped = true;
  }

  #handle(outcome: Outcome | undefined, input: EventInput): void {
    if (outcome === 'queued') this.#kick();
    else if (outcome === 'rate_limited' || outcome === 'queue_full') this.#drop(outcome, input);
  }

  #drop(reason: DropReason, input: EventInput): void {
    this.#dropped(reason);
    // Per-object rate limiting is the filter doing its job: debug. A full
    // queue or a failing API server is worth one warning.
    const fields = { reason: input.reason, object: `${input.regarding.kind} ${input.regarding.namespace}/${input.regarding.name}` };
    if (reason === 'rate_limited' || this.#warnedDrops.has(reason)) this.#log.debug(fields, `Event not written: ${reason}`);
    else {
      this.#warnedDrops.add(reason);
      this.#log.warn(fields, `Event not written: ${reason} (further drops are counted in svcmap_events_dropped_total, not logged)`);
    }
  }

  #kick(): void {
    if (this.#draining) return;
    this.#draining = this.#drain().finally(() => {
      this.#draining = undefined;
    });
  }

  async #drain(): Promise<void> {
    // Leave the caller's stack first: nothing of the write runs inside a sync.
    await Promise.resolve();
    for (;;) {
      if (this.#stopped) return;
      const w = this.#book.take(this.#now());
      if (!w) return;
      const result = await this.#write(w);
      this.#handle(this.#book.settle(w, result, this.#now()), w.input);
    }
  }

  async #write(w: EventWrite): Promise<WriteResult> {
    const { regarding, reason, note } = w.input;
    try {
      if (w.op === 'create') {
        const name = await this.#sink.create({
          name: w.name,
          regarding,
          reason,
          note,
          eventTime: w.firstAt,
          ...(w.count > 1 ? { series: { count: w.count, lastObservedTime: w.lastAt } } : {}),
        });
        this.#succeeded();
        return { ok: true, name };
      }
      await this.#sink.patchSeries(regarding.namespace, w.name, { count: w.count, lastObservedTime: w.lastAt });
      this.#succeeded();
      return { ok: true };
    } catch (err) {
      const status = err instanceof EventSinkError ? err.status : undefined;
      // A 404 is routine, not an API error: on a patch the Event expired (it
      // is re-created); on a create the object or its namespace was deleted
      // meanwhile (nothing left to report on).
      if (status === 404) return { ok: false, gone: true };
      this.#dropped('api_error');
      const fields = { err, op: w.op, reason, object: `${regarding.kind} ${regarding.namespace}/${regarding.name}`, status };
      if (this.#failing) this.#log.debug(fields, 'writing an Event failed');
      else {
        this.#failing = true;
        this.#log.warn(
          fields,
          'writing an Event failed; further failures are counted in svcmap_events_dropped_total{reason="api_error"} and not logged until a write succeeds',
        );
      }
      return { ok: false, gone: false };
    }
  }

  #succeeded(): void {
    if (!this.#failing) return;
    this.#failing = false;
    this.#log.info('writing Events works again');
  }
}
