// The cookie of this process's network namespace: the value
// bpf_get_netns_cookie() gives a program for a socket of the same
// namespace (SO_NETNS_COOKIE, Linux 5.14+, on a socket made here for the
// question and closed). The socket hooks tell the node's own sockets from
// pods' by it.
import koffi from 'koffi';
import { errnoName } from './errors.ts';
import { libc as bindLibc } from './libc.ts';

const AF_UNIX = 1;
const SOCK_DGRAM = 2;
const SOL_SOCKET = 1;
const SO_NETNS_COOKIE = 71;

/** This process's network namespace cookie (never 0: the kernel numbers them from 1). */
export function netnsCookie(): bigint {
  const libc = bindLibc();
  const fd = libc.socket(AF_UNIX, SOCK_DGRAM, 0);
  if (fd < 0) throw new Error(`socket(AF_UNIX) for SO_NETNS_COOKIE: ${errnoName(koffi.errno())}`);
  try {
    const value = Buffer.alloc(8);
    const len = [8];
    if (libc.getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, value, len) !== 0)
      throw new Error(`getsockopt(SO_NETNS_COOKIE): ${errnoName(koffi.errno())} (needs Linux 5.14+)`);
    return value.readBigUInt64LE(0);
  } finally {
    libc.close(fd);
  }
}
