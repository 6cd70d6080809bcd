// Attach points: cgroup links for the socket hooks and tcx links for the tc
// programs (classic tc filters are in tc.ts). Links are pinned so the
// datapath outlives the agent.
import { closeSync, constants, mkdirSync, openSync, statSync, unlinkSync } from 'node:fs';
import { dirname } from 'node:path';
import { BpfError } from './errors.ts';
import { libbpfText } from './map.ts';
import { native } from './native.ts';

export interface LinkInfo {
  type: number;
  id: number;
  progId: number;
  attachType: number;
  /** cgroup id (cgroup links) or ifindex (tcx links). */
  target: bigint;
}

export const LINK_TYPE_CGROUP = 3;
export const LINK_TYPE_TCX = 11;

export const ATTACH_TYPE_NAMES: Record<number, string> = {
  10: 'cgroup/connect4',
  11: 'cgroup/connect6',
  14: 'cgroup/sendmsg4',
  15: 'cgroup/sendmsg6',
  19: 'cgroup/recvmsg4',
  20: 'cgroup/recvmsg6',
  29: 'cgroup/getpeername4',
  30: 'cgroup/getpeername6',
  46: 'tcx/ingress',
  47: 'tcx/egress',
};

export function linkInfo(fd: number): LinkInfo {
  const [type, id, progId, attachType] = [Buffer.alloc(4), Buffer.alloc(4), Buffer.alloc(4), Buffer.alloc(4)];
  const target = Buffer.alloc(8);
  const rc = native().linkInfo(fd, type, id, progId, attachType, target) as number;
  if (rc < 0) throw new BpfError(`link info of fd ${fd}`, rc, libbpfText(rc));
  return {
    type: type.readUInt32LE(),
    id: id.readUInt32LE(),
    progId: progId.readUInt32LE(),
    attachType: attachType.readUInt32LE(),
    target: target.readBigUInt64LE(),
  };
}

/** The id the kernel reports for a cgroup v2 directory (its kernfs inode). */
export function cgroupId(path: string): bigint {
  return statSync(path, { bigint: true }).ino;
}

/** A link attaching a program to a cgroup; returns the link fd. */
export function attachCgroup(progFd: number, cgroupPath: string, attachType: number): number {
  let cg: number;
  try {
    cg = openSync(cgroupPath, constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (err) {
    throw new Error(`cannot open cgroup ${cgroupPath}: ${(err as Error).message}`);
  }
  try {
    const fd = native().linkCreate(progFd, cg, attachType, null) as number;
    if (fd < 0) {
      throw new BpfError(`attach ${ATTACH_TYPE_NAMES[attachType] ?? attachType} to cgroup ${cgroupPath}`, fd, libbpfText(fd));
    }
    return fd;
  } finally {
    closeSync(cg);
  }
}

/** A tcx link (kernel 6.6+) on an interface; returns the link fd. */
export function attachTcx(progFd: number, ifindex: number, ingress: boolean): number {
  const fd = native().tcxLinkCreate(progFd, ifindex, ingress ? 1 : 0) as number;
  if (fd < 0) throw new BpfError(`attach tcx ${ingress ? 'ingress' : 'egress'} on ifindex ${ifindex}`, fd, libbpfText(fd));
  return fd;
}

export function pinObject(fd: number, path: string): void {
  const rc = native().objPin(fd, path) as number;
  if (rc < 0) throw new BpfError(`pin at ${path}`, rc, libbpfText(rc));
}

/** The fd of a pinned object, or undefined when nothing is pinned there. */
export function openPinned(path: string): number | undefined {
  const fd = native().objGet(path) as number;
  if (fd === -2) return undefined; // ENOENT
  if (fd < 0) throw new BpfError(`open pin ${path}`, fd, libbpfText(fd));
  return fd;
}

/** Atomically swaps the program of a link: no moment without a hook. */
export function updateLink(linkFd: number, progFd: number): void {
  const rc = native().linkUpdate(linkFd, progFd, null) as number;
  if (rc < 0) throw new BpfError('update link program', rc, libbpfText(rc));
}

/** Detaches a link even while other fds or pins still hold it. */
export function detachLink(linkFd: number): void {
  const rc = native().linkDetach(linkFd) as number;
  if (rc < 0) throw new BpfError('detach link', rc, libbpfText(rc));
}

/**
 * Detaches the link pinned at path (also while other fds or pins hold it)
 * and removes the pin. False when nothing is pinned there.
 */
export function detachPinnedLink(path: string): boolean {
  const fd = openPinned(path);
  if (fd === undefined) return false;
  try {
    detachLink(fd);
  } finally {
    closeSync(fd);
  }
  unlinkSync(path);
  return true;
}

/**
 * Pins a link just created at path (making its directory), taking over its
 * fd: the fd is closed either way, and the link is detached when it cannot
 * be pinned. With replace, the link pinned at path until now is detached
 * and unpinned first; the new one is attached already, so a hook they share
 * has no gap.
 */
export function pinNewLink(fd: number, path: string, replace = false): void {
  try {
    if (replace) detachPinnedLink(path);
    mkdirSync(dirname(path), { recursive: true });
    pinObject(fd, path);
  } catch (err) {
    detachLink(fd);
    throw err;
  } finally {
    closeSync(fd);
  }
}

export interface ProgInfo {
  type: number;
  id: number;
  tag: string;
  name: string;
}

export function progInfo(fd: number): ProgInfo {
  const [type, id] = [Buffer.alloc(4), Buffer.alloc(4)];
  const tag = Buffer.alloc(17);
  const name = Buffer.alloc(32);
  const rc = native().progInfo(fd, type, id, tag, name, name.length) as number;
  if (rc < 0) throw new BpfError(`program info of fd ${fd}`, rc, libbpfText(rc));
  return {
    type: type.readUInt32LE(),
    id: id.readUInt32LE(),
    tag: tag.toString('utf8', 0, 16),
    name: name.toString('utf8', 0, name.indexOf(0)),
  };
}

export function progInfoById(id: number): ProgInfo | undefined {
  const fd = native().progGetFdById(id) as number;
  if (fd < 0) return undefined;
  try {
    return progInfo(fd);
  } finally {
    closeSync(fd);
  }
}
