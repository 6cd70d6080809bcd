// bpffs pin directories of lab runs (tests, demo, bench): named after the
// run, so that what a killed run left can be found and removed, and never
// what a live run is using.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cleanupPins } from '../src/cli/cleanup.ts';
import { ownerAlive, readRecords } from './cleanup.ts';

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

/** Detaches and removes the pins of lab runs whose owning process is gone. Returns what it removed. */
export function sweepStalePins(): string[] {
  if (!existsSync(PIN_ROOT)) return [];
  const live = new Set(readRecords().filter(ownerAlive).map((r) => r.id));
  const removed: string[] = [];
  for (const name of readdirSync(PIN_ROOT)) {
    const id = PIN_NAME.exec(name)?.[1];
    if (id === undefined || live.has(id)) continue;
    try {
      cleanupPins(join(PIN_ROOT, name));
      removed.push(join(PIN_ROOT, name));
    } catch {
      // another sweeper got there first
    }
  }
  return removed;
}
