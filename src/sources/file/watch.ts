// Signals when a manifest directory may have changed; the caller reloads it
// with loadManifestDir. fs.watch on the directory (not on files) sees editors
// that save via write-to-temp + rename and Kubernetes ConfigMap volumes, which
// swap a ..data symlink. Every event counts, debounced; the signal carries the
// names the events named (a hint: the caller re-reads those files only), or
// `all` when an event named none, named a ..data-style swap, or the
// directory itself was replaced: then the caller rescans the directory.
//
// fs.watch follows an inode, not a path, so the directory being deleted,
// re-created or replaced would leave us watching a ghost. After each burst,
// and on a slow timer, we check that the path still names the watched
// directory; if not we re-arm on the new one, or poll until it reappears. A
// missing directory is not reported as a change (the caller would see "no
// services"); its reappearance is.

import { watch, statSync, type FSWatcher, type Stats } from 'node:fs';
import { createDebouncer } from './debounce.ts';

export interface WatchOptions {
  /** Quiet time after the last event before signalling (default 100 ms). */
  debounceMs?: number;
  /** How often to look for a missing directory (default 500 ms). */
  retryMs?: number;
  /** How often to check that the path still names the watched directory (default 2000 ms). */
  checkMs?: number;
}

export interface DirWatch {
  close(): void;
}

/** What a change signal covers: these entry names, or (all) anything in the directory. */
export interface ChangeHint {
  all: boolean;
  names: ReadonlySet<string>;
}

function statDir(dir: string): Stats | undefined {
  try {
    const st = statSync(dir);
    return st.isDirectory() ? st : undefined;
  } catch {
    return undefined;
  }
}

export function watchManifestDir(dir: string, onChange: (hint: ChangeHint) => void, opts: WatchOptions = {}): DirWatch {
  const debounceMs = opts.debounceMs ?? 100;
  const retryMs = opts.retryMs ?? 500;
  const checkMs = opts.checkMs ?? 2000;

  let watcher: FSWatcher | undefined;
  let watched: { dev: number; ino: number } | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let closed = false;
  // The names the events of the current burst named.
  let names = new Set<string>();
  let all = false;
  const signal = (): void => {
    const hint = { all, names };
    names = new Set();
    all = false;
    onChange(hint);
  };
  const saw = (name: string | null): void => {
    // ConfigMap volumes swap ..data (every file changes at once); no name: the kernel did not say.
    if (name === null || name.startsWith('..')) all = true;
    else names.add(name);
    debouncer.trigger();
  };

  const stopWatching = (): void => {
    watcher?.close();
    watcher = undefined;
    watched = undefined;
  };

  const startWatching = (): boolean => {
    const st = statDir(dir);
    if (st === undefined) return false;
    try {
      const w = watch(dir, { persistent: true }, (_event, name) => saw(name));
      // e.g. the directory vanished under the watcher: treat like any change.
      w.on('error', () => saw(null));
      watcher = w;
      watched = { dev: st.dev, ino: st.ino };
      return true;
    } catch {
      return false;
    }
  };

  const scheduleRetry = (): void => {
    if (closed || retryTimer !== undefined) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      if (closed) return;
      if (startWatching()) {
        all = true;
        signal();
      } else scheduleRetry();
    }, retryMs);
  };

  const isSameDir = (): boolean => {
    const st = statDir(dir);
    return watcher !== undefined && st !== undefined && st.dev === watched?.dev && st.ino === watched.ino;
  };

  /** After a burst: signal if we are (again) watching the directory at `dir`. */
  const settle = (): void => {
    if (closed) return;
    if (!isSameDir()) {
      all = true; // another directory now: nothing we knew of it holds
      stopWatching();
      if (!startWatching()) {
        scheduleRetry();
        return;
      }
    }
    signal();
  };

  const debouncer = createDebouncer(settle, debounceMs);

  const checkTimer = setInterval(() => {
    if (watcher !== undefined && !isSameDir()) saw(null);
  }, checkMs);
  checkTimer.unref(); // the watcher or the retry timer keeps the process alive, not this

  if (!startWatching()) scheduleRetry();

  return {
    close() {
      closed = true;
      debouncer.cancel();
      clearInterval(checkTimer);
      if (retryTimer !== undefined) clearTimeout(retryTimer);
      retryTimer = undefined;
      stopWatching();
    },
  };
}
