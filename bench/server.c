/*
 * svcmap bench server: accepts TCP connections on 0.0.0.0:PORT and [::]:PORT
 * (IPv6 only where the namespace has IPv6) and closes them at once (the
 * bench measures connection setup, not data transfer).
 *
 *   server PORT
 *
 * Prints {"ready":true,"pid":N} once listening. A line on stdin ("stats")
 * is answered with {"accepted":N}; end of stdin (the bench went away) exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PORT\n", argv[0]);
    return 2;
  }
  int one = 1;
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])), .sin_addr = {htonl(INADDR_ANY)}};
  if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 4096) < 0) {
    perror("bind/listen");
    return 1;
  }
  /* A listener of its own for IPv6 (V6ONLY: IPv4 keeps its plain socket). */
  int ls6 = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (ls6 >= 0) {
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = a.sin_port, .sin6_addr = IN6ADDR_ANY_INIT};
    setsockopt(ls6, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(ls6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(ls6, (struct sockaddr *)&a6, sizeof a6) < 0 || listen(ls6, 4096) < 0) {
      close(ls6); /* no IPv6 here */
      ls6 = -1;
    }
  }
  printf("{\"ready\":true,\"pid\":%d}\n", getpid());
  fflush(stdout);
  unsigned long long accepted = 0;
  /* ls6 -1: poll ignores the entry. */
  struct pollfd p[3] = {{.fd = ls, .events = POLLIN}, {.fd = 0, .events = POLLIN}, {.fd = ls6, .events = POLLIN}};
  char buf[256];
  for (;;) {
    if (poll(p, 3, -1) < 0) {
      if (errno == EINTR) continue;
      perror("poll");
      return 1;
    }
    for (int i = 0; i < 3; i += 2) {
      if (!p[i].revents) continue;
      for (;;) {
        int c = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) break;
        close(c);
        accepted++;
      }
    }
    if (p[1].revents) {
      ssize_t r = read(0, buf, sizeof buf);
      if (r <= 0) return 0;
      printf("{\"accepted\":%llu}\n", accepted);
      fflush(stdout);
    }
  }
}
