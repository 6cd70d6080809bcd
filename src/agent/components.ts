// The agent as a list of parts: each part starts in the order of the list,
// and the agent stops them in the reverse order, so a part never outlives the
// parts it was built on (the sync loop stops before the maps it writes are
// closed, the datapath's objects go last). A part that fails to start stops
// the ones started before it: nothing is left running behind the error.

/** A part of the agent: built without side effects, then started once and stopped once. */
export interface Component {
  /** For the log, should its stop fail. */
  readonly name: string;
  /** Acquires what the part holds; a part that throws has cleaned up after itself. */
  start(): Promise<void> | void;
  stop(): void;
}

export class Components {
  readonly #started: Component[] = [];
  readonly #onError: (name: string, err: unknown) => void;

  /** onError: told of each part whose stop threw (the others still stop). */
  constructor(onError: (name: string, err: unknown) => void) {
    this.#onError = onError;
  }

  /**
   * Starts the parts in order, after those of earlier calls; when one fails,
   * every part started so far (earlier calls' too) is stopped, the last first,
   * and the error is rethrown.
   */
  async start(list: readonly Component[]): Promise<void> {
    for (const c of list) {
      try {
        const started = c.start();
        if (started) await started; // a synchronous part starts without a turn of the event loop
      } catch (err) {
        this.stop();
        throw err;
      }
      this.#started.push(c);
    }
  }

  /** Stops every started part, the last started first; one that fails to stop is reported and the others still stop. */
  stop(): void {
    for (let c = this.#started.pop(); c; c = this.#started.pop()) {
      try {
        c.stop();
      } catch (err) {
        this.#onError(c.name, err);
      }
    }
  }
}
