// After a full sync that grew the heap, one collection that hands memory back
// to the system. A first list and full sync of 10k Services allocate several
// times what stays live, and V8 keeps the pages it grew to committed (they
// count as RSS) until a memory-reducing collection, which an idle agent never
// triggers by itself: measured at 10k x 10, RSS stayed at ~440 MiB for a
// minute after the sync with ~110 MiB live. The collection is V8's
// memory-reducing one (gc flavor 'last-resort'), run once after such a sync
// with the sync's log line already written; it needs node's --expose-gc,
// which bin/svcmap passes. Without it (node run by hand) nothing is done.
// Then malloc's arenas, which the first list and the BPF load grew too, are
// trimmed (glibc's malloc_trim; at 10k x 10 another 25 MiB).
import { mallocTrim } from '../../bpf/native.ts';
import type { Logger } from '../log.ts';

/** Heap growth since the last collection that makes the next full sync collect. */
export const RECLAIM_GROWTH_BYTES = 32 * 2 ** 20;

type Gc = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

export class HeapReclaimer {
  readonly #gc: Gc | undefined;
  readonly #log: Logger;
  readonly #heapTotal: () => number;
  readonly #trim: () => boolean;
  /** The committed heap after the last collection (0: none yet). */
  #after = 0;
  #scheduled = false;

  constructor(
    log: Logger,
    gc: Gc | undefined = (globalThis as { gc?: Gc }).gc,
    heapTotal = () => process.memoryUsage().heapTotal,
    trim = mallocTrim,
  ) {
    this.#gc = gc;
    this.#log = log;
    this.#heapTotal = heapTotal;
    this.#trim = trim;
  }

  get available(): boolean {
    return this.#gc !== undefined;
  }

  /** Called after every successful full sync. */
  afterFullSync(): void {
    if (!this.#gc || this.#scheduled || this.#heapTotal() - this.#after < RECLAIM_GROWTH_BYTES) return;
    this.#scheduled = true;
    setImmediate(() => this.reclaim());
  }

  reclaim(): void {
    this.#scheduled = false;
    if (!this.#gc) return;
    const before = process.memoryUsage();
    const t0 = performance.now();
    this.#gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    const trimmed = this.#trim();
    const after = process.memoryUsage();
    this.#after = this.#heapTotal();
    const mib = (n: number) => Math.round(n / 2 ** 20);
    this.#log.info(
      {
        durationMs: Number((performance.now() - t0).toFixed(1)),
        heapTotalMiB: [mib(before.heapTotal), mib(after.heapTotal)],
        rssMiB: [mib(before.rss), mib(after.rss)],
        trimmed,
      },
      'heap reclaimed after a full sync',
    );
  }
}
