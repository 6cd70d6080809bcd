/*
 * svcmap bench client: opens TCP connections to IP:PORT one after another for
 * a fixed time and reports connections per second and connect() latency.
 *
 *   client IP[,IP...] PORT DURATION_MS [WARMUP_MS]
 *
 * With several addresses (the "direct to the pods" floor) it takes them in
 * turn, so the servers see the same spread as behind a VIP.
 *
 * Each connection: socket(), SO_LINGER {1, 0} (close sends RST, so neither
 * side keeps TIME_WAIT and the port space never runs out), connect() timed
 * on CLOCK_MONOTONIC, close(). One JSON object on stdout:
 *   {"ok":N,"failed":N,"errors":{"ECONNREFUSED":N},"seconds":S,"connPerSec":R,
 *    "connectUs":{"mean":..,"p50":..,"p90":..,"p99":..,"p999":..,"max":..}}
 * The connection rate counts the whole loop (socket + connect + close); the
 * latency only the connect() call, where both the socket-level hook (at
 * connect) and netfilter's nat OUTPUT hook (on the SYN) do their work.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array, in microseconds. */
static double pct(const uint32_t *v, size_t n, double p) {
  if (n == 0) return 0;
  size_t i = (size_t)(p * (double)n);
  if (i >= n) i = n - 1;
  return v[i] / 1000.0;
}

#define MAX_ERRNO 256
#define MAX_DST 16

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s IP PORT DURATION_MS [WARMUP_MS]\n", argv[0]);
    return 2;
  }
  /* IPv4 or IPv6 addresses (one family per run: the family of the first). */
  struct sockaddr_storage dsts[MAX_DST];
  socklen_t dstlen = 0;
  int family = strchr(argv[1], ':') ? AF_INET6 : AF_INET;
  size_t ndst = 0;
  char *list = strdup(argv[1]), *save = NULL;
  for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (ndst == MAX_DST) {
      fprintf(stderr, "at most %d addresses\n", MAX_DST);
      return 2;
    }
    struct sockaddr_storage *d = &dsts[ndst++];
    memset(d, 0, sizeof *d);
    int ok;
    if (family == AF_INET6) {
      struct sockaddr_in6 *d6 = (struct sockaddr_in6 *)d;
      d6->sin6_family = AF_INET6;
      d6->sin6_port = htons((uint16_t)atoi(argv[2]));
      ok = inet_pton(AF_INET6, tok, &d6->sin6_addr) == 1;
      dstlen = sizeof *d6;
    } else {
      struct sockaddr_in *d4 = (struct sockaddr_in *)d;
      d4->sin_family = AF_INET;
      d4->sin_port = htons((uint16_t)atoi(argv[2]));
      ok = inet_pton(AF_INET, tok, &d4->sin_addr) == 1;
      dstlen = sizeof *d4;
    }
    if (!ok) {
      fprintf(stderr, "bad address %s\n", tok);
      return 2;
    }
  }
  if (ndst == 0) return 2;
  size_t next = 0;
  uint64_t duration = strtoull(argv[3], NULL, 10) * 1000000ull;
  uint64_t warmup = argc > 4 ? strtoull(argv[4], NULL, 10) * 1000000ull : 0;

  size_t cap = 1 << 20, n = 0;
  uint32_t *lat = malloc(cap * sizeof *lat);
  if (!lat) return 1;
  uint64_t errors[MAX_ERRNO] = {0};
  uint64_t failed = 0;
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  int syncnt = 2;

  uint64_t start = now_ns(), measure_from = start + warmup, end = measure_from + duration;
  uint64_t t = start;
  int measuring = warmup == 0;
  while (t < end) {
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      perror("socket");
      return 1;
    }
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &syncnt, sizeof syncnt);
    uint64_t t0 = now_ns();
    const struct sockaddr_storage *dst = &dsts[next];
    next = next + 1 == ndst ? 0 : next + 1;
    int rc = connect(fd, (const struct sockaddr *)dst, dstlen);
    int err = rc < 0 ? errno : 0;
    uint64_t t1 = now_ns();
    close(fd);
    t = now_ns();
    if (!measuring) {
      if (t >= measure_from) {
        measuring = 1;
        measure_from = t;
        end = t + duration;
      }
      continue;
    }
    if (err) {
      failed++;
      errors[err < MAX_ERRNO ? err : 0]++;
      if (failed > 1000 && n == 0) break; /* nothing works: do not spin for the whole duration */
      continue;
    }
    if (n == cap) {
      cap *= 2;
      uint32_t *grown = realloc(lat, cap * sizeof *lat);
      if (!grown) return 1;
      lat = grown;
    }
    uint64_t d = t1 - t0;
    lat[n++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
  }
  double secs = (double)(t - measure_from) / 1e9;
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += lat[i];
  qsort(lat, n, sizeof *lat, cmp_u32);

  printf("{\"ok\":%zu,\"failed\":%llu,\"errors\":{", n, (unsigned long long)failed);
  int first = 1;
  for (int e = 0; e < MAX_ERRNO; e++) {
    if (!errors[e]) continue;
    const char *name = strerrorname_np(e);
    printf("%s\"%s\":%llu", first ? "" : ",", name ? name : "EOTHER", (unsigned long long)errors[e]);
    first = 0;
  }
  printf("},\"seconds\":%.6f,\"connPerSec\":%.1f,\"connectUs\":{\"mean\":%.2f,\"p50\":%.2f,\"p90\":%.2f,\"p99\":%.2f,\"p999\":%.2f,\"max\":%.2f}}\n",
         secs, secs > 0 ? (double)n / secs : 0, n ? sum / (double)n / 1000.0 : 0, pct(lat, n, 0.5), pct(lat, n, 0.9),
         pct(lat, n, 0.99), pct(lat, n, 0.999), n ? lat[n - 1] / 1000.0 : 0);
  free(lat);
  free(list);
  return 0;
}
