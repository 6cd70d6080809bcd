// The network interfaces of this process's network namespace as rtnetlink
// lists them (RTM_GETLINK dump): name, index, kind (IFLA_INFO_KIND: "veth",
// "bridge", ...), whether the link's peer lives in another network
// namespace (IFLA_LINK_NETNSID) and which XDP program runs on it in which
// mode (IFLA_XDP: a link's info does not say the mode). sysfs cannot say the kind, and may show
// another namespace than this process's; the agent image has no `ip`.
import { NETLINK_ROUTE, NLM_F_DUMP, nlAttributes as attributes, nlRequest, nlString as cString } from './nlmsg.ts';

export interface NetLink {
  name: string;
  ifindex: number;
  /** IFLA_INFO_KIND ('' for a device without one: a physical NIC, lo). */
  kind: string;
  /** The link's other end is in another network namespace (a pod's veth, seen from the node). */
  peerInOtherNetns: boolean;
  /** The XDP program attached, if any: native (driver), generic (skb) or offloaded mode. */
  xdp?: { mode: XdpAttachedMode; progId: number };
}

export type XdpAttachedMode = 'native' | 'generic' | 'offload' | 'multi';

const RTM_NEWLINK = 16;
const RTM_GETLINK = 18;
const IFLA_IFNAME = 3;
const IFLA_LINKINFO = 18;
const IFLA_INFO_KIND = 1;
const IFLA_LINK_NETNSID = 37;
const IFLA_XDP = 43;
const IFLA_XDP_ATTACHED = 2;
const IFLA_XDP_PROG_ID = 4;
/** XDP_ATTACHED_* (linux/if_link.h), by value; 0 is none. */
const XDP_ATTACHED: Record<number, XdpAttachedMode> = { 1: 'native', 2: 'generic', 3: 'offload', 4: 'multi' };

/** One RTM_NEWLINK message (its payload: struct ifinfomsg, then attributes). */
export function parseLinkMessage(msg: Buffer): NetLink {
  const ifindex = msg.readInt32LE(4);
  const attrs = attributes(msg, 16, msg.length);
  const info = attrs.get(IFLA_LINKINFO);
  const kind = info ? cString(attributes(info, 0, info.length).get(IFLA_INFO_KIND)) : '';
  const link: NetLink = { name: cString(attrs.get(IFLA_IFNAME)), ifindex, kind, peerInOtherNetns: attrs.has(IFLA_LINK_NETNSID) };
  const xdp = attrs.get(IFLA_XDP);
  if (xdp) {
    const x = attributes(xdp, 0, xdp.length);
    const mode = XDP_ATTACHED[x.get(IFLA_XDP_ATTACHED)?.readUInt8(0) ?? 0];
    const id = x.get(IFLA_XDP_PROG_ID);
    if (mode) link.xdp = { mode, progId: id && id.length >= 4 ? id.readUInt32LE(0) : 0 };
  }
  return link;
}

/** Every link of this network namespace. */
export function listLinks(): NetLink[] {
  // struct ifinfomsg, all zero: every family, every link.
  return nlRequest(NETLINK_ROUTE, 'RTM_GETLINK', RTM_GETLINK, NLM_F_DUMP, Buffer.alloc(16), RTM_NEWLINK).map(parseLinkMessage);
}
