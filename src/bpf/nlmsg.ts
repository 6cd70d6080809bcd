// Netlink messages as the kernel frames them (linux/netlink.h): a request
// sent on a fresh socket and its replies read up to the end of a dump or
// the acknowledgement, and the attributes (struct nlattr) of a payload.
// links.ts (rtnetlink) and xdp-features.ts (generic netlink) speak through
// it; netlink.ts only waits for notifications.
import koffi from 'koffi';
import { errnoName } from './errors.ts';
import { libc as bindLibc } from './libc.ts';

export const AF_NETLINK = 16;
export const NETLINK_ROUTE = 0;
export const NETLINK_GENERIC = 16;
const SOCK_RAW = 3;
const SOCK_CLOEXEC = 0o2000000;
const NLMSG_HDRLEN = 16;
const NLMSG_ERROR = 2;
const NLMSG_DONE = 3;
export const NLM_F_REQUEST = 0x1;
export const NLM_F_ACK = 0x4;
export const NLM_F_DUMP = 0x300;
const NLA_TYPE_MASK = 0x3fff;

export const align4 = (n: number) => (n + 3) & ~3;

/** A netlink error reply (or a failed socket call), with the kernel's errno. */
export class NetlinkError extends Error {
  readonly errno: number;
  constructor(what: string, errno: number) {
    super(`${what}: ${errnoName(errno)}`);
    this.errno = Math.abs(errno);
  }
}

/** The attributes (type -> value) in buf[start, end); the last of a repeated type wins. */
export function nlAttributes(buf: Buffer, start = 0, end = buf.length): Map<number, Buffer> {
  const out = new Map<number, Buffer>();
  for (const [type, value] of nlAttributeList(buf, start, end)) out.set(type, value);
  return out;
}

/** The attributes in buf[start, end), in order (a nested array's entries). */
export function nlAttributeList(buf: Buffer, start = 0, end = buf.length): Array<[number, Buffer]> {
  const out: Array<[number, Buffer]> = [];
  let off = start;
  while (off + 4 <= end) {
    const len = buf.readUInt16LE(off);
    if (len < 4 || off + len > end) break;
    out.push([buf.readUInt16LE(off + 2) & NLA_TYPE_MASK, buf.subarray(off + 4, off + len)]);
    off += align4(len);
  }
  return out;
}

/** One attribute, padded to 4 bytes. */
export function nlAttr(type: number, value: Buffer): Buffer {
  const b = Buffer.alloc(align4(4 + value.length));
  b.writeUInt16LE(4 + value.length, 0);
  b.writeUInt16LE(type, 2);
  value.copy(b, 4);
  return b;
}

/** A NUL-terminated string attribute's text. */
export const nlString = (b: Buffer | undefined) => (b ? b.toString('utf8', 0, b.indexOf(0) < 0 ? b.length : b.indexOf(0)) : '');

/**
 * Sends one request (type, flags, payload) on a new socket of the protocol
 * and returns the payloads of the replies of `replyType`: up to NLMSG_DONE
 * for a dump, up to the acknowledgement otherwise. An error reply throws a
 * NetlinkError naming `what`.
 */
export function nlRequest(protocol: number, what: string, type: number, flags: number, payload: Buffer, replyType: number): Buffer[] {
  const libc = bindLibc();
  const fd = libc.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
  if (fd < 0) throw new NetlinkError(`socket(AF_NETLINK, ${protocol})`, koffi.errno());
  try {
    const req = Buffer.alloc(NLMSG_HDRLEN + payload.length);
    req.writeUInt32LE(req.length, 0);
    req.writeUInt16LE(type, 4);
    req.writeUInt16LE(flags | NLM_F_REQUEST | (flags & NLM_F_DUMP ? 0 : NLM_F_ACK), 6);
    req.writeUInt32LE(1, 8);
    payload.copy(req, NLMSG_HDRLEN);
    if (libc.send(fd, req, req.length, 0) !== req.length) throw new NetlinkError(`send(${what})`, koffi.errno());
    const out: Buffer[] = [];
    const buf = Buffer.alloc(65536);
    for (;;) {
      const n = Number(libc.recv(fd, buf, buf.length, 0));
      if (n < 0) throw new NetlinkError(`recv(${what})`, koffi.errno());
      let off = 0;
      while (off + NLMSG_HDRLEN <= n) {
        const len = buf.readUInt32LE(off);
        const t = buf.readUInt16LE(off + 4);
        if (len < NLMSG_HDRLEN || off + len > n) break;
        if (t === NLMSG_DONE) return out;
        if (t === NLMSG_ERROR) {
          const err = -buf.readInt32LE(off + NLMSG_HDRLEN);
          if (err) throw new NetlinkError(what, err);
          return out; // the acknowledgement
        }
        if (t === replyType) out.push(Buffer.from(buf.subarray(off + NLMSG_HDRLEN, off + len)));
        off += align4(len);
      }
    }
  } finally {
    libc.close(fd);
  }
}
