// Trailing-edge debounce with a ceiling: a burst of file events (an editor's
// write + rename + chmod) becomes one reload, and a file rewritten non-stop
// still gets reloaded at least every `maxWaitMs`.

import type { Timers } from '../../sync/runner.ts';

// Not the runner's timers: a pending reload keeps the process alive (no unref).
const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
  now: () => Date.now(),
};

export interface Debouncer {
  trigger(): void;
  cancel(): void;
}

export function createDebouncer(fn: () => void, waitMs: number, maxWaitMs = waitMs * 10, timers: Timers = realTimers): Debouncer {
  let handle: unknown;
  let firstTrigger: number | undefined;

  const fire = (): void => {
    handle = undefined;
    firstTrigger = undefined;
    fn();
  };

  return {
    trigger() {
      const now = timers.now();
      firstTrigger ??= now;
      if (handle !== undefined) timers.clearTimeout(handle);
      const delay = Math.max(0, Math.min(waitMs, firstTrigger + maxWaitMs - now));
      handle = timers.setTimeout(fire, delay);
    },
    cancel() {
      if (handle !== undefined) timers.clearTimeout(handle);
      handle = undefined;
      firstTrigger = undefined;
    },
  };
}
