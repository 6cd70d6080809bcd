import t from 'tap';
import { createDebouncer } from '../../src/sources/file/debounce.ts';
import type { Timers } from '../../src/sync/runner.ts';

/** Deterministic timers: time moves only when the test says so. */
class FakeTimers implements Timers {
  #now = 0;
  #next = 1;
  #pending = new Map<number, { at: number; fn: () => void }>();
  now = () => this.#now;
  setTimeout = (fn: () => void, ms: number) => {
    const id = this.#next++;
    this.#pending.set(id, { at: this.#now + ms, fn });
    return id;
  };
  clearTimeout = (id: unknown) => {
    this.#pending.delete(id as number);
  };
  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      const due = [...this.#pending.entries()].filter(([, p]) => p.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (due === undefined) break;
      this.#pending.delete(due[0]);
      this.#now = due[1].at;
      due[1].fn();
    }
    this.#now = end;
  }
}

t.test('a burst becomes one call after the quiet period', async (t) => {
  const clock = new FakeTimers();
  let calls = 0;
  const d = createDebouncer(() => calls++, 100, 1000, clock);
  d.trigger();
  clock.advance(60);
  d.trigger();
  clock.advance(60);
  d.trigger();
  clock.advance(99);
  t.equal(calls, 0, 'still within 100 ms of the last event');
  clock.advance(1);
  t.equal(calls, 1);
  clock.advance(1000);
  t.equal(calls, 1, 'no trailing repeat');
  d.trigger();
  clock.advance(100);
  t.equal(calls, 2, 'a later event is a new burst');
});

t.test('a never-ending burst still fires every maxWait', async (t) => {
  const clock = new FakeTimers();
  let calls = 0;
  const d = createDebouncer(() => calls++, 100, 300, clock);
  for (let i = 0; i < 10; i++) {
    d.trigger();
    clock.advance(50);
  }
  t.equal(calls, 1, 'fired at 300 ms although events kept coming every 50 ms');
  clock.advance(100);
  t.equal(calls, 2);
});

t.test('cancel drops a pending call', async (t) => {
  const clock = new FakeTimers();
  let calls = 0;
  const d = createDebouncer(() => calls++, 100, 1000, clock);
  d.trigger();
  d.cancel();
  clock.advance(5000);
  t.equal(calls, 0);
});
