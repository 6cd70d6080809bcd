// The cookie of this process's network namespace: the value
// bpf_get_netns_cookie() gives a program for a socket of the same
// namespace (SO_NETNS_COOKIE, Linux 5.14+, on a socket made here for the
// question and closed). The socket hooks tell the node's own sockets from
// pods' by it.
import koffi from 'koffi';
import { errnoName } from './errors.ts';

const AF_UNIX = 1;
const SOCK_DGRAM = 2;
const SOL_SOCKET = 1;
const SO_NETNS_COOKIE = 71;

interface Libc {
  socket: (domain: number, type: number, protocol: number) => number;
  getsockopt: (fd: number, level: number, name: number, value: Buffer, len: number[]) => number;
  close: (fd: number) => number;
}
let libc: Libc | undefined;

function bind(): Libc {
  const lib = koffi.load('libc.so.6');
  return {
    socket: lib.func('int socket(int domain, int type, int protocol)') as Libc['socket'],
    getsockopt: lib.func('int getsockopt(int fd, int level, int name, _Out_ uint8_t *value, _Inout_ uint32_t *len)') as Libc['getsockopt'],
    close: lib.func('int close(int fd)') as Libc['close'],
  };
}

/** This process's network namespace cookie (never 0: the kernel numbers them from 1). */
export function netnsCookie(): bigint {
  libc ??= bind();
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
