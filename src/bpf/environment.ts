// What the host must provide before anything is loaded, each failure with the
// command that fixes it: privileges, a bpffs mount, a cgroup v2 mount.
import { existsSync, readFileSync, statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { mountFs } from './mount.ts';

const BPF_FS_MAGIC = 0xcafe4a11;
const CGROUP2_SUPER_MAGIC = 0x63677270;

export const CAP_NET_ADMIN = 12;
export const CAP_SYS_ADMIN = 21;
export const CAP_PERFMON = 38;
export const CAP_BPF = 39;

export class EnvironmentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EnvironmentError';
  }
}

/** This process's effective capabilities (CapEff of /proc/self/status), one bit per capability number. */
export function effectiveCaps(): bigint {
  const status = readFileSync('/proc/self/status', 'utf8');
  const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(status);
  return m ? BigInt(`0x${m[1]}`) : 0n;
}

export function hasCap(caps: bigint, cap: number): boolean {
  return (caps & (1n << BigInt(cap))) !== 0n;
}

/** Loading programs and attaching them needs CAP_BPF (or CAP_SYS_ADMIN) and CAP_NET_ADMIN. */
export function checkPrivileges(): void {
  const caps = effectiveCaps();
  const bpf = hasCap(caps, CAP_BPF) || hasCap(caps, CAP_SYS_ADMIN);
  if (!bpf || !hasCap(caps, CAP_NET_ADMIN)) {
    throw new EnvironmentError('needs root or CAP_BPF and CAP_NET_ADMIN (run it with sudo, or grant those capabilities)');
  }
}

function fsType(path: string): number | undefined {
  try {
    return Number(statfsSync(path).type);
  } catch {
    return undefined;
  }
}

/** The nearest existing directory at or above path. */
function existingAncestor(path: string): string {
  let p = path;
  while (!existsSync(p)) {
    const up = dirname(p);
    if (up === p) break;
    p = up;
  }
  return p;
}

/** The bpffs mount point a pin directory must live under (the first two path levels, e.g. /sys/fs/bpf). */
export function bpffsMountFor(pinDir: string): string {
  const m = /^(\/sys\/fs\/bpf)(\/|$)/.exec(pinDir);
  return m ? m[1]! : existingAncestor(pinDir);
}

/**
 * Makes sure pinDir is on a bpffs. With mountIfMissing (the agent), mounts
 * bpffs at /sys/fs/bpf when nothing is mounted there yet.
 */
export function ensureBpffs(pinDir: string, mountIfMissing: boolean): void {
  const at = existingAncestor(pinDir);
  if (fsType(at) === BPF_FS_MAGIC) return;
  const mountPoint = bpffsMountFor(pinDir);
  if (mountIfMissing && mountPoint === '/sys/fs/bpf' && existsSync(mountPoint)) {
    try {
      mountFs({ kind: 'bpffs', target: mountPoint });
    } catch (err) {
      throw new EnvironmentError(
        `bpffs is not mounted at /sys/fs/bpf and mounting it failed (${(err as Error).message}): mount -t bpf bpf /sys/fs/bpf`,
      );
    }
    if (fsType(existingAncestor(pinDir)) === BPF_FS_MAGIC) return;
  }
  if (mountPoint === '/sys/fs/bpf') throw new EnvironmentError('bpffs is not mounted at /sys/fs/bpf: mount -t bpf bpf /sys/fs/bpf');
  throw new EnvironmentError(
    `--pin-dir ${pinDir} is not on a bpffs, which pins need: use a directory under /sys/fs/bpf, or mount -t bpf bpf ${at}`,
  );
}

/** Mount points of cgroup v2 filesystems, from /proc/self/mounts. */
export function cgroup2Mounts(): string[] {
  const text = readFileSync('/proc/self/mounts', 'utf8');
  return text
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f[2] === 'cgroup2')
    .map((f) => f[1]!.replace(/\\040/g, ' '));
}

export function defaultCgroup(): string {
  const mounts = cgroup2Mounts();
  if (mounts.length === 0) {
    throw new EnvironmentError('no cgroup v2 mount found: mount -t cgroup2 none /sys/fs/cgroup/unified (or pass --cgroup PATH)');
  }
  return mounts[0]!;
}

/** The cgroup the socket hooks attach to must be a cgroup v2 directory. */
export function checkCgroup(path: string): void {
  if (!existsSync(path)) throw new EnvironmentError(`cgroup ${path} does not exist`);
  if (fsType(path) !== CGROUP2_SUPER_MAGIC) {
    const mounts = cgroup2Mounts();
    throw new EnvironmentError(
      mounts.length === 0
        ? `no cgroup v2 mount found (${path} is not cgroup v2): mount -t cgroup2 none /sys/fs/cgroup/unified`
        : `${path} is not a cgroup v2 directory; cgroup v2 is mounted at ${mounts.join(', ')}`,
    );
  }
}
