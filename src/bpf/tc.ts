// Attaching sched_cls programs to interfaces: tcx links (kernel 6.6+), pinned
// so they outlive the agent and can have their program swapped atomically,
// or, where the kernel has no tcx, classic clsact + cls_bpf filters in
// direct-action mode through libbpf's bpf_tc_* calls (via the shim).
import { closeSync, readFileSync } from 'node:fs';
import koffi from 'koffi';
import { BpfError, errnoNumber } from './errors.ts';
import { LINK_TYPE_TCX, attachTcx, detachPinnedLink, linkInfo, openPinned, pinNewLink, progInfoById, updateLink } from './link.ts';
import { libbpfText } from './map.ts';
import { native } from './native.ts';

/** The classic filter's handle and priority: fixed, so cleanup finds svcmap's filters and nobody else's. */
export const TC_HANDLE = 0x53564d; // "SVM"
export const TC_PRIORITY = 0x5356;

export type TcMode = 'tcx' | 'tc';
export type TcDirection = 'ingress' | 'egress';

let libc: { ifNameToIndex: (name: string) => number } | undefined;

/** The interface index in this process's network namespace (sysfs may show another one). */
export function ifIndex(name: string): number {
  libc ??= { ifNameToIndex: koffi.load('libc.so.6').func('unsigned int if_nametoindex(const char *ifname)') as (n: string) => number };
  const idx = libc.ifNameToIndex(name);
  if (!idx) throw new Error(`no network interface ${name} in this network namespace`);
  return idx;
}

const EINVAL = errnoNumber('EINVAL');
const EOPNOTSUPP = errnoNumber('EOPNOTSUPP');

/**
 * Attaches a program to one direction of an interface; returns how. With a
 * pinned tcx link at pinPath for the same interface, the link gets the new
 * program atomically; else a new tcx link is made and pinned; a kernel
 * without tcx gets a classic filter instead (replacing svcmap's previous one
 * in place).
 */
export function attachTc(progFd: number, ifname: string, direction: TcDirection, pinPath: string, want: TcMode | 'auto' = 'auto'): TcMode {
  const ifindex = ifIndex(ifname);
  const ingress = direction === 'ingress';
  if (want === 'tc') return attachClassic(progFd, ifindex, ifname, direction, pinPath);
  const attachType = native().tcxAttachType(ingress ? 1 : 0) as number;
  const existing = openPinned(pinPath);
  if (existing !== undefined) {
    try {
      const info = linkInfo(existing);
      if (info.type === LINK_TYPE_TCX && Number(info.target) === ifindex && info.attachType === attachType) {
        updateLink(existing, progFd);
        return 'tcx';
      }
    } finally {
      closeSync(existing);
    }
  }
  let fd: number;
  try {
    fd = attachTcx(progFd, ifindex, ingress);
  } catch (err) {
    if (want === 'auto' && err instanceof BpfError && (err.errno === EINVAL || err.errno === EOPNOTSUPP)) {
      return attachClassic(progFd, ifindex, ifname, direction, pinPath); // a kernel before 6.6
    }
    throw err;
  }
  // A pinned link for an interface that was replaced (same name, new index) goes.
  pinNewLink(fd, pinPath, existing !== undefined);
  return 'tcx';
}

/** clsact + cls_bpf in direct-action mode, replacing svcmap's previous filter in place. */
function attachClassic(progFd: number, ifindex: number, ifname: string, direction: TcDirection, pinPath: string): TcMode {
  // A tcx link from an earlier run with the other mode would run the program twice.
  detachPinnedLink(pinPath);
  const rc = native().tcAttach(ifindex, direction === 'ingress' ? 1 : 0, progFd, TC_HANDLE, TC_PRIORITY, 1) as number;
  if (rc < 0) throw new BpfError(`attach tc ${direction} filter on ${ifname}`, rc, libbpfText(rc));
  return 'tc';
}

/** The program id of svcmap's classic filter on an interface, if there is one. */
export function classicTcProgram(ifindex: number, direction: TcDirection): number | undefined {
  const id = Buffer.alloc(4);
  const rc = native().tcQuery(ifindex, direction === 'ingress' ? 1 : 0, TC_HANDLE, TC_PRIORITY, id) as number;
  return rc === 0 ? id.readUInt32LE() : undefined;
}

/** Removes svcmap's classic filters (only those whose program is an svcmap one) from an interface. */
export function detachClassicTc(ifindex: number): number {
  let removed = 0;
  for (const dir of ['ingress', 'egress'] as const) {
    const id = classicTcProgram(ifindex, dir);
    if (id === undefined) continue;
    if (!progInfoById(id)?.name.startsWith('svcmap_')) continue;
    const rc = native().tcDetach(ifindex, dir === 'ingress' ? 1 : 0, TC_HANDLE, TC_PRIORITY) as number;
    if (rc < 0) throw new BpfError(`detach tc ${dir} filter on ifindex ${ifindex}`, rc, libbpfText(rc));
    removed++;
  }
  return removed;
}

/** Interface names of this process's network namespace (/proc/net is per namespace; /sys/class/net may not be). */
export function interfaceNames(): string[] {
  return readFileSync('/proc/net/dev', 'utf8')
    .split('\n')
    .slice(2)
    .map((l) => l.split(':')[0]!.trim())
    .filter((n) => n.length > 0);
}
