// The few libc calls the agent makes itself (sockets for an rtnetlink dump
// and for the namespace cookie), through koffi: libc loaded and each
// function bound once, on first use, for every module that needs it.
import koffi from 'koffi';

export interface Libc {
  socket: (domain: number, type: number, protocol: number) => number;
  send: (fd: number, buf: Buffer, len: number, flags: number) => number;
  recv: (fd: number, buf: Buffer, len: number, flags: number) => number;
  getsockopt: (fd: number, level: number, name: number, value: Buffer, len: number[]) => number;
  close: (fd: number) => number;
}

let bound: Libc | undefined;

export function libc(): Libc {
  if (bound) return bound;
  const lib = koffi.load('libc.so.6');
  bound = {
    socket: lib.func('int socket(int domain, int type, int protocol)') as Libc['socket'],
    send: lib.func('long send(int fd, const uint8_t *buf, size_t len, int flags)') as Libc['send'],
    recv: lib.func('long recv(int fd, _Out_ uint8_t *buf, size_t len, int flags)') as Libc['recv'],
    getsockopt: lib.func('int getsockopt(int fd, int level, int name, _Out_ uint8_t *value, _Inout_ uint32_t *len)') as Libc['getsockopt'],
    close: lib.func('int close(int fd)') as Libc['close'],
  };
  return bound;
}
