// SPDX-License-Identifier: Apache-2.0
/*
 * A flat C ABI over the libbpf calls whose option structs change between
 * libbpf versions (open opts, tc hooks, test runs, batch opts, info structs).
 * Built against the installed libbpf headers, so the TypeScript side passes
 * only ints, pointers to buffers and plain out-parameters, and never needs a
 * libbpf struct offset.
 *
 * Every function returns 0 or a positive value on success and -errno on
 * failure, like libbpf 1.x itself.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/bpf.h>
#include <linux/btf.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

/* Newer than the UAPI headers of Debian 12; the values are kernel ABI. */
#ifndef BPF_TCX_INGRESS
#define SVCMAP_TCX_INGRESS 46
#define SVCMAP_TCX_EGRESS  47
#else
#define SVCMAP_TCX_INGRESS BPF_TCX_INGRESS
#define SVCMAP_TCX_EGRESS  BPF_TCX_EGRESS
#endif

#define SHIM_API __attribute__((visibility("default")))

SHIM_API int svcmap_shim_abi_version(void)
{
	return 5;
}

/* ---- libbpf's own messages, captured so errors can carry them ---------- */

static char log_ring[64 * 1024];
static size_t log_len;
static int log_echo_level = -1; /* echo to stderr at or below this level */

static int capture_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	char line[2048];
	va_list copy;
	int n;

	va_copy(copy, args);
	n = vsnprintf(line, sizeof(line), fmt, copy);
	va_end(copy);
	if (n < 0)
		return 0;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	if ((int)level <= log_echo_level)
		fputs(line, stderr);
	if (level == LIBBPF_DEBUG)
		return n;
	/* Keep the newest text: drop the oldest half when full. */
	if (log_len + (size_t)n >= sizeof(log_ring)) {
		size_t keep = sizeof(log_ring) / 2;
		if (log_len > keep) {
			memmove(log_ring, log_ring + log_len - keep, keep);
			log_len = keep;
		}
		if (log_len + (size_t)n >= sizeof(log_ring))
			log_len = 0;
	}
	memcpy(log_ring + log_len, line, (size_t)n);
	log_len += (size_t)n;
	log_ring[log_len] = 0;
	return n;
}

SHIM_API void svcmap_log_capture(int echo_level)
{
	log_echo_level = echo_level;
	libbpf_set_print(capture_print);
}

/* Copies the captured text into buf (NUL-terminated) and clears it. */
SHIM_API int svcmap_log_take(char *buf, size_t size)
{
	size_t n = log_len < size - 1 ? log_len : size - 1;

	memcpy(buf, log_ring, n);
	buf[n] = 0;
	log_len = 0;
	return (int)n;
}

/* ---- objects ------------------------------------------------------------ */

/*
 * Opens an ELF object; the verifier log of a failed load lands in log_buf.
 * Maps declared with __uint(pinning, LIBBPF_PIN_BY_NAME) are pinned (or
 * reused) under pin_root at load. Without a pin_root nothing is pinned:
 * libbpf would otherwise pin them under /sys/fs/bpf, so a private copy of
 * an object (a test, a tool) would share the node's maps.
 */
SHIM_API struct bpf_object *svcmap_open(const char *path, const char *pin_root, char *log_buf, size_t log_size,
					__u32 log_level)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = pin_root, .kernel_log_buf = log_buf,
		    .kernel_log_size = log_size, .kernel_log_level = log_level);
	struct bpf_object *obj = bpf_object__open_file(path, &opts);
	struct bpf_map *map;
	int err;

	if (!obj) {
		if (!errno)
			errno = EINVAL;
		return NULL;
	}
	if (!pin_root) {
		bpf_object__for_each_map(map, obj) {
			err = bpf_map__set_pin_path(map, NULL);
			if (err) {
				bpf_object__close(obj);
				errno = -err;
				return NULL;
			}
		}
	}
	return obj;
}

/* ---- info about maps, programs and links -------------------------------- */

SHIM_API int svcmap_map_info(int fd, __u32 *type, __u32 *id, __u32 *key_size, __u32 *value_size, __u32 *max_entries,
			     __u32 *map_flags, char *name, size_t name_size)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);
	int err;

	memset(&info, 0, sizeof(info));
	err = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (err)
		return err;
	*type = info.type;
	*id = info.id;
	*key_size = info.key_size;
	*value_size = info.value_size;
	*max_entries = info.max_entries;
	*map_flags = info.map_flags;
	snprintf(name, name_size, "%s", info.name);
	return 0;
}

SHIM_API int svcmap_prog_info(int fd, __u32 *type, __u32 *id, char *tag_hex, char *name, size_t name_size)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	int err, i;

	memset(&info, 0, sizeof(info));
	err = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (err)
		return err;
	*type = info.type;
	*id = info.id;
	for (i = 0; i < BPF_TAG_SIZE; i++)
		snprintf(tag_hex + 2 * i, 3, "%02x", info.tag[i]);
	snprintf(name, name_size, "%s", info.name);
	return 0;
}

/* target: the cgroup id for cgroup links, the ifindex for tcx links. */
SHIM_API int svcmap_link_info(int fd, __u32 *type, __u32 *id, __u32 *prog_id, __u32 *attach_type, __u64 *target)
{
	struct bpf_link_info info;
	__u32 len = sizeof(info);
	int err;

	memset(&info, 0, sizeof(info));
	err = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (err)
		return err;
	*type = info.type;
	*id = info.id;
	*prog_id = info.prog_id;
	*attach_type = 0;
	*target = 0;
	if (info.type == BPF_LINK_TYPE_CGROUP) {
		*attach_type = info.cgroup.attach_type;
		*target = info.cgroup.cgroup_id;
	} else if (info.type == 11 /* BPF_LINK_TYPE_TCX */) {
		/* link_info.tcx {ifindex, attach_type} sits where netns's fields do. */
		*target = info.netns.netns_ino;
		*attach_type = info.netns.attach_type;
	}
	return 0;
}

/* ---- batch map operations (elem_flags lives in an opts struct) ---------- */

SHIM_API int svcmap_map_update_batch(int fd, const void *keys, const void *values, __u32 *count, __u64 elem_flags)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = elem_flags);

	return bpf_map_update_batch(fd, keys, values, count, &opts);
}

SHIM_API int svcmap_map_delete_batch(int fd, const void *keys, __u32 *count)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);

	return bpf_map_delete_batch(fd, keys, count, &opts);
}

/* in_batch NULL starts from the beginning; -ENOENT means this was the last chunk. */
SHIM_API int svcmap_map_lookup_batch(int fd, void *in_batch, void *out_batch, void *keys, void *values, __u32 *count)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);

	return bpf_map_lookup_batch(fd, in_batch, out_batch, keys, values, count, &opts);
}

/* ---- attach points ------------------------------------------------------- */

/* tcx (kernel 6.6+): a link, not a qdisc filter; raw syscall because libbpf 1.1
 * predates it. Returns the link fd. */
SHIM_API int svcmap_tcx_link_create(int prog_fd, int ifindex, int ingress)
{
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.link_create.prog_fd = prog_fd;
	attr.link_create.target_ifindex = ifindex;
	attr.link_create.attach_type = ingress ? SVCMAP_TCX_INGRESS : SVCMAP_TCX_EGRESS;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : fd;
}

SHIM_API int svcmap_tcx_attach_type(int ingress)
{
	return ingress ? SVCMAP_TCX_INGRESS : SVCMAP_TCX_EGRESS;
}

/* Classic clsact + cls_bpf in direct-action mode, for kernels without tcx. */
SHIM_API int svcmap_tc_attach(int ifindex, int ingress, int prog_fd, __u32 handle, __u32 priority, int replace)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = ingress ? BPF_TC_INGRESS : BPF_TC_EGRESS);
	LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = prog_fd, .handle = handle, .priority = priority,
		    .flags = replace ? BPF_TC_F_REPLACE : 0);
	int err = bpf_tc_hook_create(&hook);

	if (err && err != -EEXIST)
		return err;
	return bpf_tc_attach(&hook, &opts);
}

SHIM_API int svcmap_tc_detach(int ifindex, int ingress, __u32 handle, __u32 priority)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = ingress ? BPF_TC_INGRESS : BPF_TC_EGRESS);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = handle, .priority = priority);

	return bpf_tc_detach(&hook, &opts);
}

/* Returns the attached program id in *prog_id, or -ENOENT. */
SHIM_API int svcmap_tc_query(int ifindex, int ingress, __u32 handle, __u32 priority, __u32 *prog_id)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = ingress ? BPF_TC_INGRESS : BPF_TC_EGRESS);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = handle, .priority = priority);
	int err = bpf_tc_query(&hook, &opts);

	if (!err)
		*prog_id = opts.prog_id;
	return err;
}

/* ---- BPF_PROG_TEST_RUN ---------------------------------------------------- */

SHIM_API int svcmap_prog_test_run(int prog_fd, const void *data_in, __u32 size_in, void *data_out, __u32 *size_out,
				  const void *ctx_in, __u32 ctx_size_in, void *ctx_out, __u32 *ctx_size_out,
				  __u32 repeat, __u32 *retval, __u32 *duration)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = data_in, .data_size_in = size_in, .data_out = data_out,
		    .data_size_out = *size_out, .ctx_in = ctx_in, .ctx_size_in = ctx_size_in, .ctx_out = ctx_out,
		    .ctx_size_out = ctx_size_out ? *ctx_size_out : 0, .repeat = repeat);
	int err = bpf_prog_test_run_opts(prog_fd, &opts);

	if (err)
		return err;
	*size_out = opts.data_size_out;
	if (ctx_size_out)
		*ctx_size_out = opts.ctx_size_out;
	*retval = opts.retval;
	*duration = opts.duration;
	return 0;
}

/* ---- BTF: struct layouts, for checking the TypeScript codecs ------------- */

static const struct btf_type *find_struct(const struct btf *btf, const char *name, __s32 *id_out)
{
	__s32 id = btf__find_by_name_kind(btf, name, BTF_KIND_STRUCT);

	if (id < 0)
		return NULL;
	if (id_out)
		*id_out = id;
	return btf__type_by_id(btf, id);
}

/* Size and member count of struct `name`, or -ENOENT. */
SHIM_API int svcmap_btf_struct(const struct btf *btf, const char *name, __u32 *size, __u32 *members)
{
	const struct btf_type *t = find_struct(btf, name, NULL);

	if (!t)
		return -ENOENT;
	*size = t->size;
	*members = btf_vlen(t);
	return 0;
}

/* Member idx of struct `name`: its name, bit offset, bitfield size (0 if
 * none) and byte size. */
SHIM_API int svcmap_btf_member(const struct btf *btf, const char *name, __u32 idx, char *member_name, size_t name_size,
			       __u32 *bit_offset, __u32 *bitfield_size, __u32 *byte_size)
{
	const struct btf_type *t = find_struct(btf, name, NULL);
	const struct btf_member *m;
	__s64 sz;

	if (!t)
		return -ENOENT;
	if (idx >= btf_vlen(t))
		return -ERANGE;
	m = btf_members(t) + idx;
	snprintf(member_name, name_size, "%s", btf__name_by_offset(btf, m->name_off));
	*bit_offset = btf_member_bit_offset(t, idx);
	*bitfield_size = btf_member_bitfield_size(t, idx);
	sz = btf__resolve_size(btf, m->type);
	if (sz < 0)
		return (int)sz;
	*byte_size = (__u32)sz;
	return 0;
}

/* ---- BPF iterators, run in another network namespace ------------------- */

#include <pthread.h>

#ifndef CLONE_NEWNET
#define CLONE_NEWNET 0x40000000
#endif

struct iter_job {
	int link_fd;
	int netns_fd;
	long long result;
};

/*
 * A socket iterator walks the sockets of the network namespace of the task
 * that creates it (bpf_iter_create). This thread enters netns_fd first, so
 * the caller's threads never change namespace, and exits when done.
 */
static void *iter_thread(void *arg)
{
	struct iter_job *job = arg;
	char buf[4096];
	long long total = 0;
	ssize_t n;
	int fd;

	if (job->netns_fd >= 0 && syscall(__NR_setns, job->netns_fd, CLONE_NEWNET) != 0) {
		job->result = -errno;
		return NULL;
	}
	fd = bpf_iter_create(job->link_fd);
	if (fd < 0) {
		job->result = fd;
		return NULL;
	}
	for (;;) {
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		total += n;
	}
	job->result = n < 0 ? -errno : total;
	close(fd);
	return NULL;
}

/*
 * An iterator link over the entries of one map (a map element or socket
 * storage iterator: the map goes in the link's iter_info), or -errno.
 */
SHIM_API int svcmap_iter_map_link_create(int prog_fd, int map_fd)
{
	union bpf_iter_link_info info;
	LIBBPF_OPTS(bpf_link_create_opts, opts);

	memset(&info, 0, sizeof(info));
	info.map.map_fd = map_fd;
	opts.iter_info = &info;
	opts.iter_info_len = sizeof(info);
	return bpf_link_create(prog_fd, 0, BPF_TRACE_ITER, &opts);
}

/*
 * Runs the iterator of link_fd once in the network namespace netns_fd (-1:
 * the caller's) and returns how many bytes it wrote, or -errno.
 */
SHIM_API long long svcmap_iter_run_in_netns(int link_fd, int netns_fd)
{
	struct iter_job job = { .link_fd = link_fd, .netns_fd = netns_fd, .result = 0 };
	pthread_t thread;
	int err;

	err = pthread_create(&thread, NULL, iter_thread, &job);
	if (err)
		return -err;
	err = pthread_join(thread, NULL);
	if (err)
		return -err;
	return job.result;
}

/* ---- rtnetlink change notifications ------------------------------------ */

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <linux/netlink.h>

struct nl_watch {
	int nl_fd;
	int wr_fd;
};

/*
 * Waits for messages of the subscribed rtnetlink groups and writes one byte
 * to the pipe for each batch (the reader re-reads what it needs: a message
 * lost to a full socket buffer, ENOBUFS, is one more reason to). Ends when
 * the reader closes its end of the pipe (POLLERR on ours).
 */
static void *nl_watch_thread(void *arg)
{
	struct nl_watch *w = arg;
	char buf[16384];
	const char one = 1;
	ssize_t n;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = w->nl_fd, .events = POLLIN },
			{ .fd = w->wr_fd, .events = 0 },
		};

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents & (POLLERR | POLLHUP))
			break;
		if (!(p[0].revents & (POLLIN | POLLERR)))
			continue;
		for (;;) {
			n = recv(w->nl_fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n > 0 || (n < 0 && (errno == ENOBUFS || errno == EINTR)))
				continue;
			break;
		}
		if (write(w->wr_fd, &one, 1) < 0 && errno != EAGAIN)
			break;
	}
	close(w->nl_fd);
	close(w->wr_fd);
	free(w);
	return NULL;
}

/*
 * A netlink socket of `protocol` in the caller's network namespace, bound
 * to the multicast groups of the `groups` bitmask (rtnetlink's RTMGRP_*)
 * and joined to group `group` (0: none; a generic netlink family's groups
 * are numbered past the 32 bits of the mask), with a thread that writes a
 * byte to a pipe whenever messages arrive. Returns the pipe's read end, for
 * an event loop to watch; closing it stops the watch. -errno on failure.
 */
static int nl_watch_open(int protocol, uint32_t groups, uint32_t group)
{
	struct sockaddr_nl addr = { .nl_family = AF_NETLINK, .nl_groups = groups };
	struct nl_watch *w;
	pthread_attr_t attr;
	pthread_t thread;
	int fds[2], nl, err;

	nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
	if (nl < 0)
		return -errno;
	if (bind(nl, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    (group && setsockopt(nl, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group)) < 0)) {
		err = -errno;
		close(nl);
		return err;
	}
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
		err = -errno;
		close(nl);
		return err;
	}
	w = malloc(sizeof(*w));
	if (!w) {
		close(nl);
		close(fds[0]);
		close(fds[1]);
		return -ENOMEM;
	}
	w->nl_fd = nl;
	w->wr_fd = fds[1];
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&thread, &attr, nl_watch_thread, w);
	pthread_attr_destroy(&attr);
	if (err) {
		close(nl);
		close(fds[0]);
		close(fds[1]);
		free(w);
		return -err;
	}
	return fds[0];
}

/* The rtnetlink multicast groups of the RTMGRP_* bits. */
SHIM_API int svcmap_nl_watch(uint32_t groups)
{
	return nl_watch_open(NETLINK_ROUTE, groups, 0);
}

/* One generic netlink multicast group, by the id its family's
 * CTRL_CMD_GETFAMILY reply gives it. */
SHIM_API int svcmap_genl_watch(uint32_t group)
{
	return nl_watch_open(NETLINK_GENERIC, 0, group);
}

/* ---- mounts, in this or another mount namespace ------------------------ */

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#ifndef CLONE_NEWNS
#define CLONE_NEWNS 0x00020000
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

/* mkdir -p: every missing directory of path (absolute), mode 0755. */
static int mkdir_p(const char *path)
{
	char buf[4096];
	size_t len = strlen(path);
	size_t i;

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return -errno;
		buf[i] = i == len ? '\0' : '/';
	}
	return 0;
}

/*
 * Mounts fstype at target, in the mount (and cgroup) namespace of the given
 * namespace files (-1: the caller's), creating target first when make_dir.
 * setns(CLONE_NEWNS) refuses a process whose threads share its file system
 * state, as Node's do: a forked child enters the namespaces and mounts, and
 * its exit status carries the errno back. The child calls only system calls
 * (async-signal-safe) before _exit. Returns 0 or -errno; -EPROTO when the
 * child did not exit normally.
 */
SHIM_API int svcmap_mount(int mntns_fd, int cgroupns_fd, const char *source, const char *target, const char *fstype,
			  unsigned long flags, const char *data, int make_dir)
{
	int status, err;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* cgroup first: a cgroup2 mount shows the root of the caller's cgroup namespace. */
		if (cgroupns_fd >= 0 && syscall(__NR_setns, cgroupns_fd, CLONE_NEWCGROUP) != 0)
			_exit(errno & 0xff);
		if (mntns_fd >= 0 && syscall(__NR_setns, mntns_fd, CLONE_NEWNS) != 0)
			_exit(errno & 0xff);
		if (make_dir) {
			err = mkdir_p(target);
			if (err)
				_exit(-err & 0xff);
		}
		if (mount(source, target, fstype, flags, data) != 0)
			_exit(errno & 0xff);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	if (!WIFEXITED(status))
		return -EPROTO;
	return -WEXITSTATUS(status);
}
