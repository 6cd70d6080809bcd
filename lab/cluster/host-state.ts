// The few things of the host that a real kubelet touches outside its own
// directories, kept so that a cluster run leaves the machine as it found it:
//  - kernel sysctls the kubelet rewrites at start (vm.overcommit_memory,
//    kernel.panic_on_oops, ...: global, not per namespace) are saved before the
//    first kubelet starts and put back as soon as it changes them, and at teardown;
//  - the kubelet's --cgroup-root must exist in every cgroup v1 hierarchy of this
//    hybrid layout (the cgroupfs driver uses v1; runc also joins the v2 tree),
//    so those directories are made here and removed (members killed) at teardown.
// Synchronous where teardown needs it: it runs from exit and signal handlers.

import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sleepSync } from '../run.ts';

/** What kubelet 1.34's setupKernelTunables sets (pkg/kubelet/cm/container_manager_linux.go). */
export const KUBELET_SYSCTLS = [
  'vm.overcommit_memory',
  'vm.panic_on_oom',
  'kernel.panic',
  'kernel.panic_on_oops',
  'kernel.keys.root_maxkeys',
  'kernel.keys.root_maxbytes',
] as const;

const sysctlPath = (key: string) => `/proc/sys/${key.replace(/\./g, '/')}`;

export type SysctlValues = Record<string, string>;

export function readSysctls(keys: readonly string[] = KUBELET_SYSCTLS): SysctlValues {
  const out: SysctlValues = {};
  for (const k of keys) out[k] = readFileSync(sysctlPath(k), 'utf8').trim();
  return out;
}

/** Writes back every value that differs; returns the keys it had to restore. */
export function restoreSysctls(saved: SysctlValues): string[] {
  const restored: string[] = [];
  for (const [k, v] of Object.entries(saved)) {
    try {
      if (readFileSync(sysctlPath(k), 'utf8').trim() === v) continue;
      writeFileSync(sysctlPath(k), `${v}\n`);
      restored.push(k);
    } catch {
      /* keep restoring the others */
    }
  }
  return restored;
}

/**
 * Saves the kubelet's sysctls once per run (the file survives a crash, so the
 * sweep can restore them) and returns the saved values.
 */
export function saveSysctlsOnce(file: string): SysctlValues {
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as SysctlValues;
  const values = readSysctls();
  writeFileSync(file, `${JSON.stringify(values)}\n`);
  return values;
}

/**
 * Restores the saved values whenever something changes them, every intervalMs,
 * until stopped: the kubelet writes them once, right after it starts.
 */
export function guardSysctls(saved: SysctlValues, onRestore: (keys: string[]) => void, intervalMs = 50): { stop(): void } {
  const timer = setInterval(() => {
    const keys = restoreSysctls(saved);
    if (keys.length > 0) onRestore(keys);
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

// ---------------------------------------------------------------------------
// cgroup v1 hierarchies

/** Mount points of the cgroup v1 hierarchies (type cgroup, not cgroup2). */
export function cgroupV1Mounts(): string[] {
  const out: string[] = [];
  for (const line of readFileSync('/proc/self/mounts', 'utf8').split('\n')) {
    const f = line.split(' ');
    if (f[2] === 'cgroup' && f[1]) out.push(f[1]);
  }
  return out;
}

function checkName(name: string): string {
  if (!/^svcmap-[0-9a-f]{6}-[a-z0-9-]{1,32}$/.test(name)) throw new Error(`not a lab cgroup name: ${name}`);
  return name;
}

/**
 * Makes /<name> in every v1 hierarchy. A new cpuset cgroup has no CPUs or memory
 * nodes, and nothing can join it until they are copied from the parent.
 */
export function createCgroupV1(name: string): string[] {
  const made: string[] = [];
  for (const mount of cgroupV1Mounts()) {
    const dir = join(mount, checkName(name));
    mkdirSync(dir, { recursive: true });
    made.push(dir);
    for (const f of ['cpuset.cpus', 'cpuset.mems']) {
      if (existsSync(join(dir, f))) writeFileSync(join(dir, f), readFileSync(join(mount, f), 'utf8'));
    }
  }
  return made;
}

function subdirs(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => join(dir, d.name));
  } catch {
    return [];
  }
}

function killTasks(dir: string): number {
  let n = 0;
  for (const c of subdirs(dir)) n += killTasks(c);
  let tasks: string[] = [];
  try {
    tasks = readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
  } catch {
    /* gone */
  }
  for (const pid of tasks) {
    try {
      process.kill(Number(pid), 'SIGKILL');
      n++;
    } catch {
      /* gone */
    }
  }
  return n;
}

function rmTree(dir: string): void {
  for (const c of subdirs(dir)) rmTree(c);
  try {
    rmdirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}

/** Kills what is left in /<name> of every v1 hierarchy and removes the trees; false if some stayed. */
export function removeCgroupV1Sync(name: string, timeoutMs = 5000): boolean {
  const deadline = Date.now() + timeoutMs;
  for (const mount of cgroupV1Mounts()) {
    const dir = join(mount, checkName(name));
    for (;;) {
      if (!existsSync(dir)) break;
      killTasks(dir);
      try {
        rmTree(dir);
        break;
      } catch {
        if (Date.now() > deadline) return false;
        sleepSync(20);
      }
    }
  }
  return true;
}

/** Lab-named directories at the top of the v1 hierarchies, by run id. */
export function labCgroupsV1(runId: string): string[] {
  const names = new Set<string>();
  for (const mount of cgroupV1Mounts()) {
    for (const d of subdirs(mount)) {
      const n = d.slice(mount.length + 1);
      if (n.startsWith(`svcmap-${runId}-`)) names.add(n);
    }
  }
  return [...names];
}
