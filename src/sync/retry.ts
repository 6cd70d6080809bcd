// What the next sync owes after failures. A failed partial sync is retried
// as a partial sync of the same owners (Services), together with whatever
// changed meanwhile: its cost stays that of the change. Only repeated
// failure (escalateAfter consecutive failed syncs), or a failed full sync,
// makes the retry a full resync: the maps re-read, every frontend re-planned.
// When the retry runs is the runner's business (its backoff).

export type SyncKind = 'full' | 'partial';

/** Consecutive failed syncs after which the retry is a full resync. */
export const DEFAULT_ESCALATE_AFTER = 3;

export class RetryState {
  readonly #escalateAfter: number;
  readonly #owners = new Set<string>();
  #failures = 0;
  #full = false;

  constructor(escalateAfter = DEFAULT_ESCALATE_AFTER) {
    this.#escalateAfter = escalateAfter;
  }

  /** Consecutive failed syncs (0 after a success). */
  get failures(): number {
    return this.#failures;
  }

  /** The owners of failed partial syncs: the next partial sync writes them again, as they are now. */
  get owners(): ReadonlySet<string> {
    return this.#owners;
  }

  /** The next sync must be a full resync. */
  get full(): boolean {
    return this.#full;
  }

  /** What the next sync must be. */
  get next(): SyncKind {
    return this.#full ? 'full' : 'partial';
  }

  failed(kind: SyncKind, owners: Iterable<string> = []): void {
    this.#failures++;
    for (const o of owners) this.#owners.add(o);
    if (kind === 'full' || this.#failures >= this.#escalateAfter) this.#full = true;
  }

  succeeded(): void {
    this.#failures = 0;
    this.#full = false;
    this.#owners.clear();
  }
}
