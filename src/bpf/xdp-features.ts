// What each device of this network namespace can do with XDP frames, as
// the kernel says it through generic netlink's "netdev" family (Linux 6.3+,
// linux/netdev.h): NETDEV_CMD_DEV_GET's NETDEV_A_DEV_XDP_FEATURES. The bit
// svcmap reads is NETDEV_XDP_ACT_NDO_XMIT, "takes redirected frames": a NIC
// driver sets it once; a veth sets it only while its peer runs an XDP program
// or has GRO on (drivers/net/veth.c), since only then does the peer drain
// the ring those frames go to. Changes come on the family's "mgmt" group
// (NETDEV_CMD_DEV_CHANGE_NTF, netlink.ts watchGenetlink()); rtnetlink says
// nothing in the device's namespace when a peer elsewhere toggles GRO.
import { NETLINK_GENERIC, NLM_F_DUMP, NetlinkError, nlAttr, nlAttributeList, nlAttributes, nlRequest, nlString } from './nlmsg.ts';

/** struct genlmsghdr: cmd, version, reserved. */
const GENL_HDRLEN = 4;
const GENL_ID_CTRL = 0x10;
const CTRL_CMD_GETFAMILY = 3;
const CTRL_ATTR_FAMILY_ID = 1;
const CTRL_ATTR_FAMILY_NAME = 2;
const CTRL_ATTR_MCAST_GROUPS = 7;
const CTRL_ATTR_MCAST_GRP_NAME = 1;
const CTRL_ATTR_MCAST_GRP_ID = 2;
const NETDEV_FAMILY = 'netdev';
const NETDEV_GROUP_MGMT = 'mgmt';
const NETDEV_CMD_DEV_GET = 1;
const NETDEV_A_DEV_IFINDEX = 1;
const NETDEV_A_DEV_XDP_FEATURES = 3;
/** enum netdev_xdp_act: the device takes frames redirected to it (ndo_xdp_xmit). */
export const NETDEV_XDP_ACT_NDO_XMIT = 4n;
const ENOENT = 2;

/** The netdev family's id and its mgmt multicast group, as this kernel numbered them. */
export interface NetdevFamily {
  id: number;
  mgmtGroup: number;
}

/** A device's NETDEV_CMD_DEV_GET reply. */
export interface DevXdpFeatures {
  ifindex: number;
  xdpFeatures: bigint;
}

const genlHeader = (cmd: number, version: number) => Buffer.from([cmd, version, 0, 0]);

/** A CTRL_CMD_GETFAMILY (NEWFAMILY) reply's payload: its id and mgmt group (-1: none). */
export function parseFamilyMessage(payload: Buffer): NetdevFamily {
  const attrs = nlAttributes(payload, GENL_HDRLEN);
  const id = attrs.get(CTRL_ATTR_FAMILY_ID);
  if (!id || id.length < 2) throw new Error('CTRL_CMD_GETFAMILY netdev: the reply has no CTRL_ATTR_FAMILY_ID');
  let mgmtGroup = -1;
  const groups = attrs.get(CTRL_ATTR_MCAST_GROUPS);
  for (const [, group] of groups ? nlAttributeList(groups) : []) {
    const g = nlAttributes(group);
    const gid = g.get(CTRL_ATTR_MCAST_GRP_ID);
    if (nlString(g.get(CTRL_ATTR_MCAST_GRP_NAME)) === NETDEV_GROUP_MGMT && gid && gid.length >= 4) mgmtGroup = gid.readUInt32LE(0);
  }
  return { id: id.readUInt16LE(0), mgmtGroup };
}

/** A NETDEV_CMD_DEV_GET reply's (or DEV_*_NTF notification's) payload. */
export function parseDevMessage(payload: Buffer): DevXdpFeatures {
  const attrs = nlAttributes(payload, GENL_HDRLEN);
  const ifindex = attrs.get(NETDEV_A_DEV_IFINDEX);
  const features = attrs.get(NETDEV_A_DEV_XDP_FEATURES);
  if (!ifindex || ifindex.length < 4) throw new Error('NETDEV_CMD_DEV_GET: a reply without NETDEV_A_DEV_IFINDEX');
  return { ifindex: ifindex.readUInt32LE(0), xdpFeatures: features && features.length >= 8 ? features.readBigUInt64LE(0) : 0n };
}

/**
 * The netdev family of this kernel, or undefined where it has none (before
 * Linux 6.3: nobody can say which devices take XDP frames).
 */
export function netdevFamily(): NetdevFamily | undefined {
  const req = Buffer.concat([genlHeader(CTRL_CMD_GETFAMILY, 1), nlAttr(CTRL_ATTR_FAMILY_NAME, Buffer.from(`${NETDEV_FAMILY}\0`))]);
  try {
    const [reply] = nlRequest(NETLINK_GENERIC, 'CTRL_CMD_GETFAMILY netdev', GENL_ID_CTRL, 0, req, GENL_ID_CTRL);
    return reply ? parseFamilyMessage(reply) : undefined;
  } catch (err) {
    if (err instanceof NetlinkError && err.errno === ENOENT) return undefined;
    throw err;
  }
}

/** Each device's XDP features (ifindex -> NETDEV_XDP_ACT_* bits). */
export function readXdpFeatures(family: NetdevFamily): Map<number, bigint> {
  const replies = nlRequest(NETLINK_GENERIC, 'NETDEV_CMD_DEV_GET', family.id, NLM_F_DUMP, genlHeader(NETDEV_CMD_DEV_GET, 1), family.id);
  return new Map(replies.map(parseDevMessage).map((d) => [d.ifindex, d.xdpFeatures]));
}

/** Whether frames XDP redirects to a device with these features leave by it. */
export const takesXdpFrames = (features: bigint): boolean => (features & NETDEV_XDP_ACT_NDO_XMIT) !== 0n;
