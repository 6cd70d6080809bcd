// The agent as a list of parts: each part is added once it has started, and
// the agent stops them in the reverse order, so a part never outlives the
// parts it was built on (the sync loop stops before the maps it writes are
// closed, the datapath's objects go last).

/** A running part of the agent. */
export interface Component {
  /** For the log, should its stop fail. */
  readonly name: string;
  stop(): void;
}

export class Components {
  readonly #started: Component[] = [];
  readonly #onError: (name: string, err: unknown) => void;

  constructor(onError: (name: string, err: unknown) => void) {
    this.#onError = onError;
  }

  /** Records a part that has started; stop() stops it. */
  add(name: string, stop: () => void): void {
    this.#started.push({ name, stop });
  }

  /** Stops every part, the last started first; one that fails to stop is reported and the others still stop. */
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
