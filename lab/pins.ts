// bpffs pin directories of lab runs (tests, demo, bench): named after the
// run, so that what a killed run left can be found and removed, and never
// what a live run is using.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cleanupPins } from '../src/cli/cleanup.ts';
import { claimRecord, ownerAlive, readRecords, registerTeardown, removeRecord, unregisterTeardown } from './cleanup.ts';
import { DEFAULT_PREFIX, newRunId } from './names.ts';

export const PIN_ROOT = '/sys/fs/bpf';
const PIN_NAME = /^svcmap-(?:lab|demo|bench)-([0-9a-f]{6})(?:-|$)/;

/** The pin directory of a lab run: /sys/fs/bpf/svcmap-<kind>-<run id>[-<suffix>]. */
export function labPinDir(runId: string, suffix = '', kind: 'lab' | 'demo' | 'bench' = 'lab'): string {
  return join(PIN_ROOT, `svcmap-${kind}-${runId}${suffix ? `-${suffix}` : ''}`);
}

/** Mounts bpffs at /sys/fs/bpf when nothing is mounted there. */
export function ensureBpffs(): void {
  try {
    execFileSync('mountpoint', ['-q', PIN_ROOT]);
  } catch {
    execFileSync('mount', ['-t', 'bpf', 'bpf', PIN_ROOT]);
  }
}

/**
 * Detaches and removes a pin directory, and first the pin directories nested in
 * it (the bench keeps one per part under svcmap-bench-<id>). Tries every nested
 * one, then throws the first failure. Returns what it removed.
 */
export function removePinDir(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const removed: string[] = [];
  let failure: unknown;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    // links/ is the directory's own link pins: cleanupPins detaches those.
    if (!e.isDirectory() || e.name === 'links') continue;
    try {
      removed.push(...removePinDir(join(dir, e.name)));
    } catch (err) {
      failure ??= err;
    }
  }
  if (failure !== undefined) throw failure;
  removed.push(...cleanupPins(dir));
  return removed;
}

/** Detaches and removes the pins of lab runs whose owning process is gone. Returns what it removed. */
export function sweepStalePins(): string[] {
  if (!existsSync(PIN_ROOT)) return [];
  const live = new Set(
    readRecords()
      .filter(ownerAlive)
      .map((r) => r.id),
  );
  const removed: string[] = [];
  for (const name of readdirSync(PIN_ROOT)) {
    const id = PIN_NAME.exec(name)?.[1];
    if (id === undefined || live.has(id)) continue;
    try {
      removePinDir(join(PIN_ROOT, name));
      removed.push(join(PIN_ROOT, name));
    } catch {
      // another sweeper got there first
    }
  }
  return removed;
}

export interface ClaimedPinDir {
  /** The claimed run id. */
  readonly id: string;
  /** labPinDir(id, suffix): not created yet. */
  readonly dir: string;
  /** Removes the pins and drops the claim; throws (keeping both) if the pins could not be removed. */
  release(): void;
}

/**
 * A pin directory for code that has no Lab (e.g. maps loaded in the test
 * process): claims a run id the way Lab.create does (a run record naming this
 * process), so that sweepStalePins spares the directory while this process
 * lives and removes it once it is gone, and registers exit / signal teardown.
 */
export function claimPinDir(suffix = ''): ClaimedPinDir {
  for (let attempt = 0; attempt < 20; attempt++) {
    const id = newRunId();
    // Pins a dead run of the same id left (record already swept) are not ours to reuse.
    if (existsSync(PIN_ROOT) && readdirSync(PIN_ROOT).some((n) => PIN_NAME.exec(n)?.[1] === id)) continue;
    if (!claimRecord(id, DEFAULT_PREFIX)) continue;
    const dir = labPinDir(id, suffix);
    const teardown = {
      emergency(): void {
        try {
          removePinDir(dir);
          removeRecord(id);
        } catch {
          /* the record stays: a later sweep removes the pins */
        }
      },
    };
    registerTeardown(teardown);
    let released = false;
    return {
      id,
      dir,
      release(): void {
        if (released) return;
        removePinDir(dir);
        released = true;
        unregisterTeardown(teardown);
        removeRecord(id);
      },
    };
  }
  throw new Error('could not find a free lab run id');
}
