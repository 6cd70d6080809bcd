// Making sure a lab never leaks:
//  - run records (/run/svcmap-lab/<id>.json, written before anything is created) name
//    the owning process (pid + start time), so a later run can tell a crashed lab
//    from a live one;
//  - one process-wide registry runs every live lab's synchronous teardown on 'exit'
//    (which also covers uncaught exceptions) and on SIGINT / SIGTERM / SIGHUP / SIGALRM ..., then
//    re-raises the signal so other handlers (tap's) and the default action still run;
//  - sweepStale() removes namespaces, cgroups and processes of dead runs.

import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cgroup2Mount, cgroupExists, removeCgroupSync } from './cgroup.ts';
import { CGROUP_PATTERN, DEFAULT_PREFIX, isRunId, netnsPattern, netnsRunPrefix } from './names.ts';
import { delNetnsSync, killNetnsPids, listNetns, netnsExists } from './netns.ts';

export const RECORD_DIR = '/run/svcmap-lab';

export interface RunRecord {
  id: string;
  prefix: string;
  pid: number;
  /** Field 22 of /proc/<pid>/stat: tells a live owner from a recycled pid. */
  startTime: string;
  createdAt: string;
  argv: string[];
}

function procStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // comm (field 2) may contain spaces and parentheses: split after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return rest[19]; // field 22 overall = index 19 after "pid (comm) "
  } catch {
    return undefined;
  }
}

export function recordPath(id: string): string {
  if (!isRunId(id)) throw new Error(`bad run id ${id}`);
  return join(RECORD_DIR, `${id}.json`);
}

/** Claims a run id by creating its record exclusively; false if the id is taken. */
export function claimRecord(id: string, prefix: string): boolean {
  mkdirSync(RECORD_DIR, { recursive: true, mode: 0o755 });
  const rec: RunRecord = {
    id,
    prefix,
    pid: process.pid,
    startTime: procStartTime(process.pid) ?? '',
    createdAt: new Date().toISOString(),
    argv: process.argv.slice(0, 4),
  };
  try {
    writeFileSync(recordPath(id), `${JSON.stringify(rec)}\n`, { flag: 'wx' });
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  }
}

export function removeRecord(id: string): void {
  rmSync(recordPath(id), { force: true });
}

export function readRecords(): RunRecord[] {
  let files: string[];
  try {
    files = readdirSync(RECORD_DIR);
  } catch {
    return [];
  }
  const out: RunRecord[] = [];
  for (const f of files) {
    const m = /^([0-9a-f]{6})\.json$/.exec(f);
    if (!m) continue;
    try {
      const r = JSON.parse(readFileSync(join(RECORD_DIR, f), 'utf8')) as RunRecord;
      if (r.id === m[1]) out.push(r);
    } catch {
      // A half-written record of a run being created right now: alive (pid -1) for a
      // minute, dead (pid 0) after that.
      let fresh = false;
      try {
        fresh = Date.now() - statSync(join(RECORD_DIR, f)).mtimeMs < 60_000;
      } catch {
        /* gone meanwhile */
      }
      out.push({ id: m[1] as string, prefix: '', pid: fresh ? -1 : 0, startTime: '', createdAt: '', argv: [] });
    }
  }
  return out;
}

/** True if the run's owning process is still the one that wrote the record. */
export function ownerAlive(r: RunRecord): boolean {
  if (r.pid === -1) return true;
  if (r.pid <= 0) return false;
  if (r.pid === process.pid) return true;
  const st = procStartTime(r.pid);
  return st !== undefined && (r.startTime === '' || st === r.startTime);
}

// ---------------------------------------------------------------------------
// Teardown of one run's leftovers, by naming pattern.

export interface SweepReport {
  runs: string[];
  netns: string[];
  cgroups: string[];
  pids: number[];
}

function labCgroupsOf(id: string): string[] {
  let mount: string;
  try {
    mount = cgroup2Mount();
  } catch {
    return [];
  }
  let names: string[];
  try {
    names = readdirSync(mount);
  } catch {
    return [];
  }
  return names.filter((n) => CGROUP_PATTERN.exec(n)?.[1] === id).map((n) => join(mount, n));
}

/** Kills the processes of, and deletes, the given namespaces and cgroups (synchronous). */
export function teardownSync(netns: readonly string[], cgroups: readonly string[], report?: SweepReport): void {
  for (const ns of netns) {
    const pids = killNetnsPids(ns);
    report?.pids.push(...pids);
  }
  delNetnsSync(netns);
  report?.netns.push(...netns);
  for (const cg of cgroups) {
    if (!cgroupExists(cg)) continue;
    try {
      removeCgroupSync(cg);
      report?.cgroups.push(cg);
    } catch {
      /* refuses to kill a cgroup holding this process; leave it */
    }
  }
}

export interface SweepOptions {
  /**
   * Also remove lab-shaped namespaces and cgroups that have no run record at all.
   * Records are written before anything is created and removed only once everything
   * is gone, so these belong to no live lab run; but something that merely looks
   * like a lab name would go too, hence opt-in.
   */
  orphans?: boolean;
}

/**
 * Removes what crashed lab runs left behind: for every run record whose owner is
 * dead, its namespaces (and the processes in them), its cgroups and the record.
 * Runs whose owner is alive are never touched.
 */
export function sweepStale(prefix?: string, opts: SweepOptions = {}): SweepReport {
  const report: SweepReport = { runs: [], netns: [], cgroups: [], pids: [] };
  const records = readRecords().filter((r) => prefix === undefined || r.prefix === prefix || r.prefix === '');
  const live = new Set(records.filter(ownerAlive).map((r) => r.id));
  const known = new Set(records.map((r) => r.id));
  const allNs = listNetns();

  for (const r of records) {
    if (live.has(r.id)) continue;
    const start = netnsRunPrefix(r.prefix || prefix || DEFAULT_PREFIX, r.id);
    const netns = allNs.filter((n) => n.startsWith(start));
    const cgroups = labCgroupsOf(r.id);
    teardownSync(netns, cgroups, report);
    // Drop the record only once everything is gone, so a later sweep can retry.
    if (!netns.some(netnsExists) && !cgroups.some(cgroupExists)) removeRecord(r.id);
    report.runs.push(r.id);
  }

  if (opts.orphans) sweepOrphans(prefix ?? DEFAULT_PREFIX, known, allNs, report);
  return report;
}

function sweepOrphans(prefix: string, known: ReadonlySet<string>, allNs: readonly string[], report: SweepReport): void {
  // Re-read the records so that a run that started after the listing is not mistaken for an orphan.
  const stillKnown = new Set([...known, ...readRecords().map((r) => r.id)]);
  const pattern = netnsPattern(prefix);
  const orphanNs = allNs.filter((n) => {
    const id = pattern.exec(n)?.[1];
    return id !== undefined && !stillKnown.has(id);
  });
  let orphanCg: string[] = [];
  try {
    const mount = cgroup2Mount();
    orphanCg = readdirSync(mount)
      .filter((n) => {
        const id = CGROUP_PATTERN.exec(n)?.[1];
        return id !== undefined && !stillKnown.has(id);
      })
      .map((n) => join(mount, n));
  } catch {
    /* no cgroup2 */
  }
  if (orphanNs.length === 0 && orphanCg.length === 0) return;
  teardownSync(orphanNs, orphanCg, report);
  const ids = [
    ...orphanNs.map((n) => pattern.exec(n)?.[1]),
    ...orphanCg.map((c) => CGROUP_PATTERN.exec(c.slice(c.lastIndexOf('/') + 1))?.[1]),
  ];
  for (const id of ids) if (id !== undefined && !report.runs.includes(id)) report.runs.push(id);
}

// ---------------------------------------------------------------------------
// Process-wide exit / signal registry.

export interface Teardown {
  /** Synchronous, idempotent, never throws: kill everything, delete everything. */
  emergency(): void;
}

const live = new Set<Teardown>();
// The catchable signals whose default action ends the process (signal-exit's list,
// minus the synchronous faults): SIGALRM included, it is how tap kills a test that
// timed out.
const SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGALRM', 'SIGQUIT', 'SIGUSR2', 'SIGVTALRM', 'SIGXCPU', 'SIGXFSZ'];
let installed = false;

function runAll(): void {
  for (const t of [...live]) {
    live.delete(t);
    try {
      t.emergency();
    } catch {
      /* keep going: tear down the others */
    }
  }
}

function onExit(): void {
  runAll();
}

function onSignal(sig: NodeJS.Signals): void {
  runAll();
  uninstall();
  // Re-raise: with our listeners gone, the next delivery goes to the remaining
  // listeners (e.g. tap's signal-exit, which reports and re-raises itself) or, if
  // there are none, to the default action, so the process dies of `sig` as it would have.
  process.kill(process.pid, sig);
}

function install(): void {
  if (installed) return;
  installed = true;
  process.on('exit', onExit);
  for (const s of SIGNALS) process.on(s, onSignal);
}

function uninstall(): void {
  if (!installed) return;
  installed = false;
  process.off('exit', onExit);
  for (const s of SIGNALS) process.off(s, onSignal);
}

export function registerTeardown(t: Teardown): void {
  live.add(t);
  install();
}

export function unregisterTeardown(t: Teardown): void {
  live.delete(t);
  if (live.size === 0) uninstall();
}
