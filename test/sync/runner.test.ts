// The bounded-frequency runner with a fake clock: coalescing, the minimum
// interval between runs, and the periodic resync.
import t from 'tap';
import { BoundedFrequencyRunner, type RunReason, type Timers } from '../../src/sync/runner.ts';

class FakeClock implements Timers {
  t = 0;
  #timers = new Map<number, { at: number; fn: () => void }>();
  #next = 1;
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#timers.set(id, { at: this.t + ms, fn });
    return id;
  }
  clearTimeout(h: unknown): void { this.#timers.delete(h as number); }
  now(): number { return this.t; }
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      const due = [...this.#timers].filter(([, x]) => x.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.#timers.delete(due[0]);
      this.t = due[1].at;
      due[1].fn();
    }
    this.t = end;
  }
}

t.test('requests are coalesced and run at once when the minimum interval allows', async (t) => {
  const clock = new FakeClock();
  const runs: Array<[RunReason, number]> = [];
  const r = new BoundedFrequencyRunner((why) => runs.push([why, clock.t]), { minIntervalMs: 0, maxIntervalMs: 3_600_000, timers: clock });
  r.start();
  r.run(); r.run(); r.run();
  clock.advance(0);
  t.same(runs, [['change', 0]], 'three requests, one run');
});

t.test('runs are at least minInterval apart', async (t) => {
  const clock = new FakeClock();
  const runs: number[] = [];
  const r = new BoundedFrequencyRunner(() => runs.push(clock.t), { minIntervalMs: 1000, maxIntervalMs: 3_600_000, timers: clock });
  r.start();
  r.run();
  clock.advance(10);
  r.run();
  clock.advance(100);
  r.run();
  clock.advance(2000);
  t.same(runs, [0, 1000]);
});

t.test('a periodic run happens maxInterval after the last run', async (t) => {
  const clock = new FakeClock();
  const runs: Array<[RunReason, number]> = [];
  const r = new BoundedFrequencyRunner((why) => runs.push([why, clock.t]), { minIntervalMs: 0, maxIntervalMs: 60_000, timers: clock });
  r.start();
  clock.advance(30_000);
  r.run();
  clock.advance(80_000);
  t.same(runs, [['change', 30_000], ['periodic', 90_000]]);
  r.stop();
  clock.advance(200_000);
  t.equal(runs.length, 2, 'nothing after stop');
});

t.test('a failing run does not stop the periodic timer', async (t) => {
  const clock = new FakeClock();
  let n = 0;
  const r = new BoundedFrequencyRunner(() => { n++; throw new Error('boom'); }, { minIntervalMs: 0, maxIntervalMs: 1000, timers: clock });
  r.start();
  t.throws(() => clock.advance(1000));
  t.throws(() => clock.advance(1000));
  t.equal(n, 2);
});
