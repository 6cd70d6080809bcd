// svcmap mount-host-fs: the chart's first init container. Makes sure the host
// has bpffs at /sys/fs/bpf (the pins) and cgroup v2 at --cgroup-root (where
// the socket hooks attach), mounting them in the host's mount namespace when
// missing. The host is PID 1 of --host-proc: its mountinfo says what is
// mounted, its namespace files are where the mounts go (src/bpf/mount.ts).
//
// Why the host's namespaces and not a Bidirectional volume mount: the API
// server accepts Bidirectional propagation only on privileged containers, and
// no svcmap container is privileged. Entering the host's mount namespace
// needs SYS_ADMIN + SYS_CHROOT (setns), opening PID 1's namespace files
// SYS_PTRACE.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { MountError, mountedFsType, mountFs } from '../bpf/mount.ts';
import { command, parseFlags } from './args.ts';

const BPFFS = '/sys/fs/bpf';
const absolute = z.string().startsWith('/', 'must be an absolute path');

const CAPS = 'run it as root with SYS_ADMIN, SYS_CHROOT and SYS_PTRACE (the chart sets these on the mount-host-fs init container)';
const denied = (code: string) => code === 'EPERM' || code === 'EACCES';

export const mountHostFsCommand = command({
  name: 'mount-host-fs',
  summary: "mounts bpffs and cgroup v2 in the host's mount namespace when missing",
  description: `Makes sure the host (PID 1 of --host-proc) has bpffs at ${BPFFS} and cgroup v2 at --cgroup-root, and mounts what is missing in the host's mount and cgroup namespaces (cgroup v2 from the host's cgroup namespace, so it is the root of the hierarchy; --cgroup-root is created first). Prints one line per file system. The chart runs it as an init container with the host's /proc at /hostproc and SYS_ADMIN, SYS_CHROOT and SYS_PTRACE.`,
  flags: {
    'host-proc': { value: 'DIR', schema: absolute, default: '/proc', help: "the host's /proc (PID 1 is the host's init)" },
    'cgroup-root': {
      value: 'DIR',
      schema: absolute,
      default: '/run/svcmap/cgroupv2',
      help: "host path of the cgroup v2 root the socket hooks attach to (the agent's --cgroup, as the host sees it)",
    },
    'no-mount-bpffs': { help: `fails instead of mounting bpffs when the host has none at ${BPFFS} (the chart's bpf.autoMount=false)` },
    'no-mount-cgroup': {
      help: "fails instead of mounting cgroup v2 when the host has none at --cgroup-root (the chart's cgroup.autoMount=false)",
    },
  },
});

export function mountHostFs(argv: string[], out: (s: string) => void): void {
  const f = parseFlags(mountHostFsCommand, argv);
  const hostProc = f['host-proc'];
  const cgroupRoot = f['cgroup-root'];
  const pid1 = join(hostProc, '1');
  const say = (s: string) => out(`svcmap mount-host-fs: ${s}\n`);
  const fsAt = (path: string) => {
    try {
      return mountedFsType(readFileSync(join(pid1, 'mountinfo'), 'utf8'), path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new Error(
        `svcmap mount-host-fs: cannot read ${pid1}/mountinfo (${code}): ${denied(code) ? CAPS : `mount the host's /proc at ${hostProc} (a hostPath volume of /proc), or pass --host-proc`}`,
      );
    }
  };
  const mount = (kind: 'bpffs' | 'cgroup2', target: string) => {
    try {
      mountFs({ kind, target, mntns: join(pid1, 'ns', 'mnt'), cgroupns: join(pid1, 'ns', 'cgroup'), makeDir: kind === 'cgroup2' });
    } catch (err) {
      const code = err instanceof MountError ? err.errno : ((err as NodeJS.ErrnoException).code ?? '');
      const fix = denied(code)
        ? CAPS
        : `mount it on the host yourself (mount -t ${kind === 'bpffs' ? 'bpf bpffs' : 'cgroup2 cgroup2'} ${target})`;
      throw new Error(`svcmap mount-host-fs: cannot mount ${kind} at ${target} on the host: ${(err as Error).message}; ${fix}`);
    }
  };

  const bpf = fsAt(BPFFS);
  if (bpf === 'bpf') say(`bpffs is mounted at ${BPFFS} on the host`);
  else if (f['no-mount-bpffs'])
    throw new Error(
      `svcmap mount-host-fs: the host has no bpffs at ${BPFFS} (found: ${bpf ?? 'nothing'}) and mounting is off (--no-mount-bpffs, the chart's bpf.autoMount=false); mount it on the host (e.g. a sys-fs-bpf.mount unit) or set bpf.autoMount=true`,
    );
  else {
    mount('bpffs', BPFFS);
    if (fsAt(BPFFS) !== 'bpf') throw new Error(`svcmap mount-host-fs: mounting bpffs at ${BPFFS} on the host did not take effect`);
    say(`mounted bpffs at ${BPFFS} on the host (found: ${bpf ?? 'nothing'})`);
  }

  const cg = fsAt(cgroupRoot);
  if (cg === 'cgroup2') say(`cgroup v2 is mounted at ${cgroupRoot} on the host`);
  else if (cg !== undefined)
    throw new Error(
      `svcmap mount-host-fs: ${cgroupRoot} on the host holds a ${cg} mount, not cgroup v2; set cgroup.hostRoot (--cgroup-root) to a cgroup v2 mount point or to an unused directory (default /run/svcmap/cgroupv2)`,
    );
  else if (f['no-mount-cgroup'])
    throw new Error(
      `svcmap mount-host-fs: the host has no cgroup v2 mount at ${cgroupRoot} and mounting is off (--no-mount-cgroup, the chart's cgroup.autoMount=false); set cgroup.hostRoot to the host's cgroup v2 mount point (often /sys/fs/cgroup) or set cgroup.autoMount=true`,
    );
  else {
    mount('cgroup2', cgroupRoot);
    if (fsAt(cgroupRoot) !== 'cgroup2')
      throw new Error(`svcmap mount-host-fs: mounting cgroup v2 at ${cgroupRoot} on the host did not take effect`);
    say(`mounted cgroup v2 at ${cgroupRoot} on the host`);
  }
}
