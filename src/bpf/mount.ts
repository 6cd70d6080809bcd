// Mounting a file system (bpffs, cgroup v2) without mount(8): the agent's
// bpffs mount and `svcmap mount-host-fs` (the host's mount namespace, entered
// through its namespace files) share this one path, so the image needs no
// util-linux. The shim forks, enters the namespaces and mounts
// (svcmap_mount in native/svcmap_shim.c).
import { closeSync, openSync } from 'node:fs';
import { constants } from 'node:os';
import { native } from './native.ts';

// <sys/mount.h>
const MS_NOSUID = 0x2;
const MS_NODEV = 0x4;
const MS_NOEXEC = 0x8;
const MS_RELATIME = 0x200000;

export interface FsMount {
  /** bpffs or cgroup v2, with the options systemd mounts them with. */
  kind: 'bpffs' | 'cgroup2';
  target: string;
  /** Namespace files (/proc/PID/ns/mnt, .../cgroup) of the namespaces to mount in; the caller's when absent. */
  mntns?: string;
  cgroupns?: string;
  /** Creates target (and its missing parents) first. */
  makeDir?: boolean;
}

const KINDS = {
  bpffs: { source: 'bpffs', fstype: 'bpf', data: 'mode=700' },
  cgroup2: { source: 'cgroup2', fstype: 'cgroup2', data: null },
} as const;

export class MountError extends Error {
  /** The errno's name: EPERM, ENOENT, ... */
  readonly errno: string;
  constructor(message: string, errno: string) {
    super(message);
    this.name = 'MountError';
    this.errno = errno;
  }
}

const errnoName = (n: number) => Object.entries(constants.errno).find(([, v]) => v === n)?.[0] ?? `errno ${n}`;

/** Mounts m.kind at m.target (rw,nosuid,nodev,noexec,relatime); throws MountError naming the errno. */
export function mountFs(m: FsMount): void {
  const k = KINDS[m.kind];
  const fds: number[] = [];
  const open = (path: string | undefined) => {
    if (path === undefined) return -1;
    const fd = openSync(path, 'r');
    fds.push(fd);
    return fd;
  };
  try {
    const rc = native().mount(
      open(m.mntns),
      open(m.cgroupns),
      k.source,
      m.target,
      k.fstype,
      MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME,
      k.data,
      m.makeDir ? 1 : 0,
    ) as number;
    if (rc < 0) {
      const name = errnoName(-rc);
      throw new MountError(`mount -t ${k.fstype} ${k.source} ${m.target}: ${name}`, name);
    }
  } finally {
    for (const fd of fds) closeSync(fd);
  }
}

const unescape = (s: string) => s.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));

/**
 * The type of the file system mounted at path in a mount table (the text of
 * /proc/PID/mountinfo), the topmost when several are stacked; undefined when
 * path is no mount point. mountinfo lines read
 *   ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
 */
export function mountedFsType(mountinfo: string, path: string): string | undefined {
  let type: string | undefined;
  for (const line of mountinfo.split('\n')) {
    const f = line.split(' ');
    if (f.length < 7 || unescape(f[4]!) !== path) continue;
    const dash = f.indexOf('-', 6);
    if (dash > 0) type = f[dash + 1];
  }
  return type;
}
