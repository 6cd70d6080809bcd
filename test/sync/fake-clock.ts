// Timers and a clock that move only when the test says so: the runner's
// scheduling is checked against exact times, with no waiting.
import type { Timers } from '../../src/sync/runner.ts';

export class FakeClock implements Timers {
  t = 0;
  #timers = new Map<number, { at: number; fn: () => void }>();
  #next = 1;
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#timers.set(id, { at: this.t + ms, fn });
    return id;
  }
  clearTimeout(h: unknown): void {
    this.#timers.delete(h as number);
  }
  now(): number {
    return this.t;
  }
  /** Moves the clock forward, running every timer that falls due, in order. */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      const due = [...this.#timers].filter(([, x]) => x.at <= end).sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0];
      if (!due) break;
      this.#timers.delete(due[0]);
      this.t = due[1].at;
      due[1].fn();
    }
    this.t = end;
  }
}
