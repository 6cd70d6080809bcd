// The network interfaces of this process's network namespace as rtnetlink
// lists them (RTM_GETLINK dump): name, index, kind (IFLA_INFO_KIND: "veth",
// "bridge", ...), whether the link's peer lives in another network
// namespace (IFLA_LINK_NETNSID) and which XDP program runs on it in which
// mode (IFLA_XDP: a link's info does not say the mode). sysfs cannot say the kind, and may show
// another namespace than this process's; the agent image has no `ip`.
import koffi from 'koffi';
import { errnoName } from './errors.ts';
import { libc as bindLibc } from './libc.ts';

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

const AF_NETLINK = 16;
const SOCK_RAW = 3;
const SOCK_CLOEXEC = 0o2000000;
const NETLINK_ROUTE = 0;
const RTM_NEWLINK = 16;
const RTM_GETLINK = 18;
const NLMSG_ERROR = 2;
const NLMSG_DONE = 3;
const NLM_F_REQUEST = 0x1;
const NLM_F_DUMP = 0x300;
const IFLA_IFNAME = 3;
const IFLA_LINKINFO = 18;
const IFLA_INFO_KIND = 1;
const IFLA_LINK_NETNSID = 37;
const IFLA_XDP = 43;
const IFLA_XDP_ATTACHED = 2;
const IFLA_XDP_PROG_ID = 4;
/** XDP_ATTACHED_* (linux/if_link.h), by value; 0 is none. */
const XDP_ATTACHED: Record<number, XdpAttachedMode> = { 1: 'native', 2: 'generic', 3: 'offload', 4: 'multi' };
const NLA_TYPE_MASK = 0x3fff;

const align4 = (n: number) => (n + 3) & ~3;

/** The attributes (type -> value) in buf[start, end). */
function attributes(buf: Buffer, start: number, end: number): Map<number, Buffer> {
  const out = new Map<number, Buffer>();
  let off = start;
  while (off + 4 <= end) {
    const len = buf.readUInt16LE(off);
    if (len < 4 || off + len > end) break;
    out.set(buf.readUInt16LE(off + 2) & NLA_TYPE_MASK, buf.subarray(off + 4, off + len));
    off += align4(len);
  }
  return out;
}

const cString = (b: Buffer | undefined) => (b ? b.toString('utf8', 0, b.indexOf(0) < 0 ? b.length : b.indexOf(0)) : '');

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
  const libc = bindLibc();
  const fd = libc.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) throw new Error(`socket(AF_NETLINK): ${errnoName(koffi.errno())}`);
  try {
    const req = Buffer.alloc(32);
    req.writeUInt32LE(32, 0);
    req.writeUInt16LE(RTM_GETLINK, 4);
    req.writeUInt16LE(NLM_F_REQUEST | NLM_F_DUMP, 6);
    req.writeUInt32LE(1, 8);
    if (libc.send(fd, req, req.length, 0) !== req.length) throw new Error(`send(RTM_GETLINK): ${errnoName(koffi.errno())}`);
    const out: NetLink[] = [];
    const buf = Buffer.alloc(65536);
    for (;;) {
      const n = Number(libc.recv(fd, buf, buf.length, 0));
      if (n < 0) throw new Error(`recv(RTM_GETLINK): ${errnoName(koffi.errno())}`);
      let off = 0;
      while (off + 16 <= n) {
        const len = buf.readUInt32LE(off);
        const type = buf.readUInt16LE(off + 4);
        if (len < 16 || off + len > n) break;
        if (type === NLMSG_DONE) return out;
        if (type === NLMSG_ERROR) {
          const err = -buf.readInt32LE(off + 16);
          if (err) throw new Error(`RTM_GETLINK: errno ${err}`);
        } else if (type === RTM_NEWLINK) {
          out.push(parseLinkMessage(Buffer.from(buf.subarray(off + 16, off + len))));
        }
        off += align4(len);
      }
    }
  } finally {
    libc.close(fd);
  }
}
