/*
 * svcmap bench: the run time of the socket LB's connect4 and sock_release
 * programs attached to one cgroup, as the kernel's BPF statistics count it.
 *
 *   bpfstats CGROUP_DIR
 *
 * Finds the programs attached to CGROUP_DIR for BPF_CGROUP_INET4_CONNECT
 * and BPF_CGROUP_INET_SOCK_RELEASE (BPF_PROG_QUERY), turns the statistics
 * on with BPF_ENABLE_STATS (they stay on only while this process holds the
 * fd: no sysctl is changed), prints {"ready":true}, and then for every line
 * on stdin one JSON line {"connect4":{"ns":N,"cnt":N},"sockRelease":{...}}
 * (totals since the programs were loaded, counted while statistics are on).
 * Exits at the end of stdin.
 *
 *   bpfstats --ids ID[,ID...]
 *
 * The same for the programs of those ids (e.g. tc programs on a device):
 * one JSON line per line on stdin, {"ID":{"ns":N,"cnt":N},...}.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static long bpf(int cmd, union bpf_attr *attr) {
  return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/* The one program attached for attach_type, as an fd; -1 (and a message) otherwise. */
static int attached(int cg, enum bpf_attach_type type, const char *what) {
  __u32 ids[8];
  union bpf_attr a;
  memset(&a, 0, sizeof a);
  a.query.target_fd = cg;
  a.query.attach_type = type;
  a.query.prog_ids = (__u64)(unsigned long)ids;
  a.query.prog_cnt = 8;
  if (bpf(BPF_PROG_QUERY, &a) < 0 || a.query.prog_cnt != 1) {
    printf("{\"error\":\"%s: %s programs attached\"}\n", what, a.query.prog_cnt ? "several" : "no");
    return -1;
  }
  memset(&a, 0, sizeof a);
  a.prog_id = ids[0];
  return (int)bpf(BPF_PROG_GET_FD_BY_ID, &a);
}

static int info(int fd, struct bpf_prog_info *pi) {
  union bpf_attr a;
  memset(&a, 0, sizeof a);
  memset(pi, 0, sizeof *pi);
  a.info.bpf_fd = fd;
  a.info.info_len = sizeof *pi;
  a.info.info = (__u64)(unsigned long)pi;
  return (int)bpf(BPF_OBJ_GET_INFO_BY_FD, &a);
}

static int enable_stats(void) {
  union bpf_attr a;
  memset(&a, 0, sizeof a);
  a.enable_stats.type = BPF_STATS_RUN_TIME;
  int stats = (int)bpf(BPF_ENABLE_STATS, &a);
  if (stats < 0) printf("{\"error\":\"BPF_ENABLE_STATS: %s\"}\n", strerror(errno));
  return stats;
}

#define MAX_IDS 16

static int by_ids(char *list) {
  int fds[MAX_IDS];
  unsigned ids[MAX_IDS];
  int n = 0;
  for (char *tok = strtok(list, ","); tok && n < MAX_IDS; tok = strtok(NULL, ",")) {
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_id = ids[n] = (unsigned)strtoul(tok, NULL, 10);
    fds[n] = (int)bpf(BPF_PROG_GET_FD_BY_ID, &a);
    if (fds[n] < 0) {
      printf("{\"error\":\"program %u: %s\"}\n", ids[n], strerror(errno));
      return 1;
    }
    n++;
  }
  int stats = enable_stats();
  if (stats < 0) return 1;
  printf("{\"ready\":true}\n");
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    printf("{");
    for (int i = 0; i < n; i++) {
      struct bpf_prog_info pi;
      if (info(fds[i], &pi) < 0) {
        printf("}\n{\"error\":\"BPF_OBJ_GET_INFO_BY_FD: %s\"}\n", strerror(errno));
        return 1;
      }
      printf("%s\"%u\":{\"ns\":%llu,\"cnt\":%llu}", i ? "," : "", ids[i], (unsigned long long)pi.run_time_ns,
             (unsigned long long)pi.run_cnt);
    }
    printf("}\n");
    fflush(stdout);
  }
  close(stats);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--ids") == 0) return by_ids(argv[2]);
  if (argc != 2) {
    fprintf(stderr, "usage: %s CGROUP_DIR\n", argv[0]);
    return 2;
  }
  int cg = open(argv[1], O_RDONLY | O_DIRECTORY);
  if (cg < 0) {
    printf("{\"error\":\"open %s: %s\"}\n", argv[1], strerror(errno));
    return 1;
  }
  int connect4 = attached(cg, BPF_CGROUP_INET4_CONNECT, "connect4");
  int release = attached(cg, BPF_CGROUP_INET_SOCK_RELEASE, "sock_release");
  if (connect4 < 0 || release < 0) return 1;
  int stats = enable_stats();
  if (stats < 0) return 1;
  printf("{\"ready\":true}\n");
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    struct bpf_prog_info c, r;
    if (info(connect4, &c) < 0 || info(release, &r) < 0) {
      printf("{\"error\":\"BPF_OBJ_GET_INFO_BY_FD: %s\"}\n", strerror(errno));
      return 1;
    }
    printf("{\"connect4\":{\"ns\":%llu,\"cnt\":%llu},\"sockRelease\":{\"ns\":%llu,\"cnt\":%llu}}\n",
           (unsigned long long)c.run_time_ns, (unsigned long long)c.run_cnt,
           (unsigned long long)r.run_time_ns, (unsigned long long)r.run_cnt);
    fflush(stdout);
  }
  close(stats);
  return 0;
}
