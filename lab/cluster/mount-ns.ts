// One mount namespace per node, persisted on a file (as `ip netns` persists
// network namespaces), so that every process of a node (containerd, kubelet,
// the pods) sees the same node-local filesystem, the way a kind node container
// does: its own bpffs at /sys/fs/bpf (each node's svcmap pins at the chart's
// default /sys/fs/bpf/svcmap), its own /run (containerd's state and shim
// sockets, runc's state, the chart's cgroup mount point), /var/lib/cni and
// /var/log. Mounts propagate from the host into it (slave), never back, and
// all of them go away with the namespace: nothing global is left to clean.
// Beside it, persisted on the same file name + '.uts', a UTS namespace whose
// hostname is the node's name, as a node container's: the kubelet,
// containerd and every hostNetwork pod of node N see hostname = N (the
// e2e hostNetwork specs compare the hostname a pod answers with its node).

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { MNTNS_DIR } from './paths.ts';

function sh(cmd: string, args: readonly string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function isMountpoint(path: string): boolean {
  try {
    execFileSync('mountpoint', ['-q', path]);
    return true;
  } catch {
    return false;
  }
}

/**
 * The directory holding the namespace files must be a private mount, or the
 * bind mount that keeps a namespace alive would propagate (and pin it) elsewhere.
 */
function ensureMntnsDir(): void {
  mkdirSync(MNTNS_DIR, { recursive: true });
  if (!isMountpoint(MNTNS_DIR)) {
    sh('mount', ['--bind', MNTNS_DIR, MNTNS_DIR]);
  }
  sh('mount', ['--make-private', MNTNS_DIR]);
}

/**
 * Unmounts the namespace directory's private bind mount once no namespace file
 * is left in it (as a fresh machine has it).
 */
export function releaseMntnsDir(): void {
  try {
    if (readdirSync(MNTNS_DIR).length > 0 || !isMountpoint(MNTNS_DIR)) return;
    execFileSync('umount', [MNTNS_DIR], { stdio: 'ignore' });
  } catch {
    /* missing, or in use by a run that just started */
  }
}

/** The file the node's UTS namespace is persisted on, beside its mount namespace's. */
export function utsFile(file: string): string {
  return `${file}.uts`;
}

/** argv prefix that runs a command in the mount (and UTS) namespace persisted on `file`. */
export function inMountNs(file: string): string[] {
  return ['nsenter', `--mount=${file}`, `--uts=${utsFile(file)}`, '--'];
}

export interface NodeMounts {
  /** Host directory bind-mounted at /run/svcmap/cgroupv2 (the node's cgroup v2 subtree). */
  cgroupV2: string;
  /** The node's hostname (its name), set in its UTS namespace. */
  hostname: string;
}

/**
 * Creates the namespace on `file` and sets up the node-local mounts. The mount
 * points it needs below /var/lib (cni) are created on the host when missing:
 * empty directories, which removeMountNsSync leaves alone (another run may use them).
 */
export function createMountNs(file: string, mounts: NodeMounts): void {
  ensureMntnsDir();
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, '', { flag: 'wx' });
  writeFileSync(utsFile(file), '', { flag: 'wx' });
  mkdirSync('/var/lib/cni', { recursive: true });
  try {
    sh('unshare', [`--mount=${file}`, '--propagation', 'slave', 'true']);
    sh('unshare', [`--uts=${utsFile(file)}`, 'hostname', mounts.hostname]);
    // /run first: everything else the node keeps there lives on its own tmpfs.
    const script = [
      'set -e',
      'mount -t tmpfs -o mode=0755 svcmap-node-run /run',
      'mkdir -p /run/containerd /run/svcmap/cgroupv2',
      'mount --bind "$1" /run/svcmap/cgroupv2',
      'mount -t bpf -o mode=0700 bpffs /sys/fs/bpf',
      'mount -t tmpfs -o mode=0755 svcmap-node-cni /var/lib/cni',
      'mount -t tmpfs -o mode=0755 svcmap-node-log /var/log',
      // Shared inside the node, as on a host booted by systemd: containers'
      // HostToContainer mounts need a shared or slave source. Recursive, so
      // /run is shared too: the pod netns files containerd pins in
      // /run/netns reach the agent's mount of it. The host stays the
      // master, so nothing propagates back to it.
      'mount --make-rshared /',
    ].join('\n');
    sh('nsenter', [`--mount=${file}`, '--', 'sh', '-c', script, 'sh', mounts.cgroupV2]);
  } catch (e) {
    removeMountNsSync(file);
    const err = e as Error & { stderr?: string };
    throw new Error(`mount namespace ${file}: ${err.stderr?.trim() || err.message}`);
  }
}

/**
 * Drops the files' hold on the namespaces (mount and UTS): the namespace, and
 * every mount in it, is freed once its last process has exited.
 */
export function removeMountNsSync(file: string): void {
  for (const f of [file, utsFile(file)]) {
    if (!existsSync(f)) continue;
    try {
      execFileSync('umount', ['-l', f], { stdio: 'ignore' });
    } catch {
      /* not mounted (creation failed half-way) */
    }
    rmSync(f, { force: true });
  }
}
