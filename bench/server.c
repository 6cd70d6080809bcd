/*
 * svcmap bench server: accepts TCP connections on 0.0.0.0:PORT and closes
 * them at once (the bench measures connection setup, not data transfer).
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
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])), .sin_addr = {htonl(INADDR_ANY)}};
  if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 4096) < 0) {
    perror("bind/listen");
    return 1;
  }
  printf("{\"ready\":true,\"pid\":%d}\n", getpid());
  fflush(stdout);
  unsigned long long accepted = 0;
  struct pollfd p[2] = {{.fd = ls, .events = POLLIN}, {.fd = 0, .events = POLLIN}};
  char buf[256];
  for (;;) {
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      perror("poll");
      return 1;
    }
    if (p[0].revents) {
      for (;;) {
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
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
