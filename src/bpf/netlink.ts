// Change notifications from rtnetlink (addresses, routes, links) or a
// generic netlink family's group (xdp-features.ts) of this process's
// network namespace: the shim's thread waits on a netlink socket
// and writes a byte to a pipe per batch of messages, which the event loop
// watches like any stream. What changed is not decoded: the caller re-reads
// the state it keeps (a lost message, ENOBUFS, is covered the same way).
import { Socket } from 'node:net';
import { BpfError } from './errors.ts';
import { native } from './native.ts';

/** rtnetlink multicast groups (linux/rtnetlink.h, RTMGRP_*). */
export const RTMGRP_LINK = 0x1;
export const RTMGRP_IPV4_IFADDR = 0x10;
export const RTMGRP_IPV4_ROUTE = 0x40;
export const RTMGRP_IPV6_IFADDR = 0x100;
export const RTMGRP_IPV6_ROUTE = 0x400;

export interface NetlinkWatch {
  close(): void;
}

/** Calls onChange after messages of the groups arrive; close() ends the watch (and the shim's thread). */
export function watchNetlink(groups: number, onChange: () => void): NetlinkWatch {
  const fd = native().nlWatch(groups) as number;
  if (fd < 0) throw new BpfError('subscribe to rtnetlink changes', fd, 'socket(AF_NETLINK, NETLINK_ROUTE)');
  return watchPipe(fd, onChange);
}

/** watchNetlink() for one generic netlink multicast group (its id from the family's CTRL_CMD_GETFAMILY reply). */
export function watchGenetlink(group: number, what: string, onChange: () => void): NetlinkWatch {
  const fd = native().genlWatch(group) as number;
  if (fd < 0) throw new BpfError(`subscribe to ${what}`, fd, 'socket(AF_NETLINK, NETLINK_GENERIC)');
  return watchPipe(fd, onChange);
}

function watchPipe(fd: number, onChange: () => void): NetlinkWatch {
  const pipe = new Socket({ fd, readable: true, writable: false });
  pipe.on('data', () => onChange());
  pipe.on('error', () => {
    /* closing the pipe is how the watch ends */
  });
  // A watch alone must not keep the process running.
  pipe.unref();
  return { close: () => pipe.destroy() };
}
