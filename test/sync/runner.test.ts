// The bounded-frequency runner with a fake clock: coalescing, the minimum
// interval between runs, the periodic resync, and retries with backoff.
import { readFile } from 'node:fs';
import t from 'tap';
import { BoundedFrequencyRunner, type RunReason } from '../../src/sync/runner.ts';
import { FakeClock } from './fake-clock.ts';

t.test('requests are coalesced and run at once when the minimum interval allows', async (t) => {
  const clock = new FakeClock();
  const runs: Array<[RunReason, number]> = [];
  const r = new BoundedFrequencyRunner((why) => runs.push([why, clock.t]), { minIntervalMs: 0, maxIntervalMs: 3_600_000, timers: clock });
  r.start();
  r.run();
  r.run();
  r.run();
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
  t.same(runs, [
    ['change', 30_000],
    ['periodic', 90_000],
  ]);
  r.stop();
  clock.advance(200_000);
  t.equal(runs.length, 2, 'nothing after stop');
});

t.test('a failing run does not stop the periodic timer', async (t) => {
  const clock = new FakeClock();
  let n = 0;
  const r = new BoundedFrequencyRunner(
    () => {
      n++;
      throw new Error('boom');
    },
    { minIntervalMs: 0, maxIntervalMs: 1000, timers: clock },
  );
  r.start();
  t.throws(() => clock.advance(1000));
  t.throws(() => clock.advance(1000));
  t.equal(n, 2);
});

t.test('a failed run is retried after 1, 2, 4 ... s, capped at 30 s; a success resets the backoff', async (t) => {
  const clock = new FakeClock();
  const runs: Array<[RunReason, number]> = [];
  const waits: number[] = [];
  let fail = true;
  const r: BoundedFrequencyRunner = new BoundedFrequencyRunner(
    (why) => {
      runs.push([why, clock.t]);
      if (fail) waits.push(r.retryAfter());
    },
    { minIntervalMs: 0, maxIntervalMs: Infinity, timers: clock },
  );
  r.start();
  r.run();
  clock.advance(1000 + 2000 + 4000 + 8000 + 16000 + 30000 + 30000);
  const gaps = runs.slice(1).map(([, at], i) => at - runs[i]![1]);
  t.same(gaps, [1000, 2000, 4000, 8000, 16000, 30000, 30000], 'the time between attempts doubles up to 30 s');
  t.same(waits.slice(0, 7), gaps, 'retryAfter() returns the backoff it waits');
  t.same(
    runs.slice(1).map(([why]) => why),
    Array(7).fill('retry'),
  );

  fail = false;
  clock.advance(30000);
  const successAt = runs.at(-1)![1];
  clock.advance(600_000);
  t.equal(runs.at(-1)![1], successAt, 'no retry after a run that succeeded');

  fail = true;
  r.run();
  clock.advance(0);
  clock.advance(1000);
  t.same(
    runs.slice(-2).map(([why, at]) => [why, at - successAt]),
    [
      ['change', 600_000],
      ['retry', 601_000],
    ],
    'the next failure waits 1 s again',
  );
  r.stop();
});

t.test('while a retry waits, changes and the periodic run wait for it', async (t) => {
  const clock = new FakeClock();
  const runs: Array<[RunReason, number]> = [];
  let fail = true;
  const r: BoundedFrequencyRunner = new BoundedFrequencyRunner(
    (why) => {
      runs.push([why, clock.t]);
      if (fail) r.retryAfter();
      fail = false;
    },
    { minIntervalMs: 0, maxIntervalMs: 600, timers: clock },
  );
  r.start();
  r.run();
  clock.advance(0);
  clock.advance(300);
  r.run();
  r.run();
  clock.advance(700);
  t.same(
    runs,
    [
      ['change', 0],
      ['retry', 1000],
    ],
    'the changes at 300 ms and the periodic run at 600 ms are covered by the retry',
  );
  clock.advance(600);
  t.same(runs.at(-1), ['periodic', 1600], 'the periodic run is due maxInterval after the retry');
  r.stop();
});

t.test('a retry comes no sooner than minInterval after the last run', async (t) => {
  const clock = new FakeClock();
  const runs: number[] = [];
  const r: BoundedFrequencyRunner = new BoundedFrequencyRunner(
    () => {
      runs.push(clock.t);
      if (runs.length === 1) r.retryAfter();
    },
    { minIntervalMs: 5000, maxIntervalMs: Infinity, timers: clock },
  );
  r.start();
  r.run();
  clock.advance(20_000);
  t.same(runs, [0, 5000]);
});

t.test('a run that throws does not reset the backoff', async (t) => {
  const clock = new FakeClock();
  const runs: number[] = [];
  const r: BoundedFrequencyRunner = new BoundedFrequencyRunner(
    () => {
      runs.push(clock.t);
      if (runs.length <= 3) r.retryAfter();
      if (runs.length === 2) throw new Error('boom');
    },
    { minIntervalMs: 0, maxIntervalMs: Infinity, timers: clock },
  );
  r.start();
  r.run();
  // 0: fails, retry in 1 s; 1000: retryAfter() (2 s) then throws; 3000: retry in 4 s.
  t.throws(() => clock.advance(2000));
  clock.advance(20_000);
  t.same(runs, [0, 1000, 3000, 7000]);
});

t.test(
  'with the real timers, a run asked for while the loop handles I/O comes in the same turn, before the loop waits again',
  async (t) => {
    const runs: RunReason[] = [];
    const r = new BoundedFrequencyRunner((why) => runs.push(why), { minIntervalMs: 0, maxIntervalMs: 3_600_000 });
    r.start();
    t.teardown(() => r.stop());
    // From an I/O callback, setImmediate callbacks run in order before any timer: the probe,
    // queued after the requests, sees the run done only if it was queued there too (a 0 ms
    // timer, node's 1 ms, comes after the probe).
    const seen = await new Promise<RunReason[]>((resolve, reject) => {
      readFile(import.meta.filename, (err) => {
        if (err) return reject(err);
        r.run();
        r.run();
        setImmediate(() => resolve([...runs]));
      });
    });
    t.same(seen, ['change'], 'two requests, one run, on this turn');
  },
);
