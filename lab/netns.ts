// Network namespaces: create, delete, list, run `ip` / commands inside one, write
// sysctls inside one, and find the processes living in one. Every function here
// takes a namespace name and acts only inside that namespace; nothing touches the
// root namespace's addresses, routes or links.

import { readdirSync, statSync } from 'node:fs';
import { run, runSync } from './run.ts';

export const NETNS_DIR = '/run/netns';

function checkNs(ns: string): string {
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(ns) || ns === '.' || ns === '..') {
    throw new Error(`bad netns name ${JSON.stringify(ns)}`);
  }
  return ns;
}

export function netnsPath(ns: string): string {
  return `${NETNS_DIR}/${checkNs(ns)}`;
}

export async function addNetns(ns: string): Promise<void> {
  await run('ip', ['netns', 'add', checkNs(ns)]);
}

/** Deletes several namespaces in one `ip -batch` run, ignoring the ones already gone. */
export function delNetnsSync(names: readonly string[]): void {
  if (names.length === 0) return;
  const input = names.map((n) => `netns del ${checkNs(n)}\n`).join('');
  runSync('ip', ['-force', '-batch', '-'], { input });
}

export function listNetns(): string[] {
  try {
    return readdirSync(NETNS_DIR);
  } catch {
    return [];
  }
}

export function netnsExists(ns: string): boolean {
  try {
    statSync(netnsPath(ns));
    return true;
  } catch {
    return false;
  }
}

/** `ip -n NS ...args` (iproute2 switches into NS; the command acts only there). */
export function ipIn(ns: string, args: readonly string[]): Promise<string> {
  return run('ip', ['-n', checkNs(ns), ...args]);
}

/** `ip -n NS -batch -`: several ip commands inside NS in one process. */
export function ipBatchIn(ns: string, lines: readonly string[]): Promise<string> {
  return run('ip', ['-n', checkNs(ns), '-batch', '-'], { input: lines.map((l) => `${l}\n`).join('') });
}

/** The argv prefix that runs a command inside NS without remounting /sys. */
export function nsenterArgv(ns: string): string[] {
  return ['nsenter', `--net=${netnsPath(ns)}`, '--'];
}

/** Runs cmd inside NS (via nsenter) and resolves with its stdout. */
export function execIn(ns: string, cmd: string, args: readonly string[], timeoutMs?: number): Promise<string> {
  const [nsenter, ...pre] = nsenterArgv(ns);
  return run(nsenter as string, [...pre, cmd, ...args], timeoutMs === undefined ? {} : { timeoutMs });
}

/**
 * Writes a sysctl inside NS: /proc/sys/net is per network namespace, and nsenter
 * (unlike `ip netns exec`) does not remount /sys, so this is a plain write.
 */
export async function sysctlIn(ns: string, key: string, value: string | number): Promise<void> {
  if (!/^net\.[A-Za-z0-9_.-]+$/.test(key)) throw new Error(`only net.* sysctls are per-netns: ${key}`);
  const v = String(value);
  if (!/^[A-Za-z0-9 _.-]*$/.test(v)) throw new Error(`bad sysctl value ${JSON.stringify(v)}`);
  const path = `/proc/sys/${key.replace(/\./g, '/')}`;
  await execIn(ns, 'sh', ['-c', 'printf "%s\\n" "$1" > "$2"', 'sh', v, path]);
}

/** Identity of a network namespace file: device + inode of the nsfs object. */
function nsIdentity(path: string): string | undefined {
  try {
    const st = statSync(path);
    return `${st.dev}:${st.ino}`;
  } catch {
    return undefined;
  }
}

/** Pids of processes whose network namespace is NS (like `ip netns pids`). */
export function pidsInNetns(ns: string): number[] {
  const id = nsIdentity(netnsPath(ns));
  if (id === undefined) return [];
  const pids: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  for (const e of entries) {
    if (!/^[0-9]+$/.test(e)) continue;
    if (Number(e) === process.pid) continue;
    if (nsIdentity(`/proc/${e}/ns/net`) === id) pids.push(Number(e));
  }
  return pids;
}

/** SIGKILLs every process living in NS (never our own process). */
export function killNetnsPids(ns: string): number[] {
  const pids = pidsInNetns(ns);
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  return pids;
}
