// cgroup v2: find the cgroup2 mount, create lab cgroups directly below it, list and
// kill their members, and remove them (children first). Never writes to the root
// cgroup: every path is checked to be a strict descendant of the mount.

import { readFileSync, readdirSync, rmdirSync, writeFileSync, statSync } from 'node:fs';
import { readFile, mkdir } from 'node:fs/promises';
import { join, resolve, sep } from 'node:path';
import { sleepSync } from './run.ts';

let cachedMount: string | undefined;

/** The cgroup2 mount point, from /proc/self/mounts (e.g. /sys/fs/cgroup or /sys/fs/cgroup/unified). */
export function cgroup2Mount(): string {
  if (cachedMount !== undefined) return cachedMount;
  const mounts = readFileSync('/proc/self/mounts', 'utf8');
  for (const line of mounts.split('\n')) {
    const f = line.split(' ');
    if (f[2] === 'cgroup2' && f[1]) {
      // /proc/self/mounts escapes spaces etc. as \040.
      cachedMount = f[1].replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));
      return cachedMount;
    }
  }
  throw new Error('no cgroup2 filesystem mounted (see /proc/self/mounts)');
}

/** Throws unless path is a strict descendant of the cgroup2 mount. */
export function checkCgroupPath(path: string): string {
  const mount = cgroup2Mount();
  const p = resolve(path);
  if (!p.startsWith(mount + sep) || p === mount) throw new Error(`not a child cgroup of ${mount}: ${path}`);
  return p;
}

export async function createCgroup(name: string): Promise<string> {
  if (!/^[A-Za-z0-9_.-]+$/.test(name)) throw new Error(`bad cgroup name ${name}`);
  const path = checkCgroupPath(join(cgroup2Mount(), name));
  await mkdir(path);
  return path;
}

function parsePids(text: string): number[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map(Number);
}

export async function cgroupProcs(path: string): Promise<number[]> {
  return parsePids(await readFile(join(checkCgroupPath(path), 'cgroup.procs'), 'utf8'));
}

export function cgroupProcsSync(path: string): number[] {
  try {
    return parsePids(readFileSync(join(checkCgroupPath(path), 'cgroup.procs'), 'utf8'));
  } catch {
    return [];
  }
}

function populated(path: string): boolean {
  try {
    return /^populated 1$/m.test(readFileSync(join(path, 'cgroup.events'), 'utf8'));
  } catch {
    return false;
  }
}

/** Kills every process in the cgroup subtree: cgroup.kill (5.14+), else SIGKILL each member. */
function killMembersSync(path: string): void {
  try {
    writeFileSync(join(path, 'cgroup.kill'), '1');
    return;
  } catch {
    /* old kernel: fall through */
  }
  const walk = (p: string): void => {
    for (const pid of cgroupProcsSync(p)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    for (const c of childDirs(p)) walk(c);
  };
  walk(path);
}

function childDirs(path: string): string[] {
  try {
    return readdirSync(path, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => join(path, d.name));
  } catch {
    return [];
  }
}

function rmTreeSync(path: string): void {
  for (const c of childDirs(path)) rmTreeSync(c);
  rmdirSync(path);
}

export function cgroupExists(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Kills the members of a lab cgroup (and of its descendants), waits until it is
 * unpopulated, and removes the directories bottom-up. Synchronous: usable from an
 * exit handler. Returns false if it could not remove everything within timeoutMs.
 */
export function removeCgroupSync(path: string, timeoutMs = 3000): boolean {
  const p = checkCgroupPath(path);
  if (!cgroupExists(p)) return true;
  if (cgroupProcsSync(p).includes(process.pid)) {
    throw new Error(`refusing to kill cgroup ${p}: it holds this process`);
  }
  const deadline = Date.now() + timeoutMs;
  killMembersSync(p);
  for (;;) {
    if (!populated(p)) {
      try {
        rmTreeSync(p);
        return true;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return true;
      }
    }
    if (Date.now() > deadline) return false;
    sleepSync(10);
    killMembersSync(p);
  }
}
