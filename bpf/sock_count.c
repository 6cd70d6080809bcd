// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Entry file for the socket recount: an iterator over the socket storage
 * map svcmap_sk_be (struct sk_backend per socket the socket LB counted;
 * svcmap_sk_be6 for IPv6 backends, by its own program and counts),
 * which the agent runs now and then to recount the sock field of
 * svcmap_be_conns (src/agent/conn-counts.ts). The storage iterator walks
 * every socket of the map, whatever its network namespace. Each socket
 * still counted (backend_id not 0) adds 1 to its {backend_id, addr, port}
 * in svcmap_sk_count, which the agent empties before a run and reads after.
 */
#include "lib/common.h"
#include "lib/maps_sock.h"

struct seq_file;
struct bpf_map;
struct sock;

struct bpf_iter_meta {
	struct seq_file *seq;
	__u64 session_id;
	__u64 seq_num;
} __attribute__((preserve_access_index));

struct bpf_iter__bpf_sk_storage_map {
	struct bpf_iter_meta *meta;
	struct bpf_map *map;
	struct sock *sk;
	void *value;
} __attribute__((preserve_access_index));

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct sk_backend);
	__type(value, __u64);
	__uint(max_entries, SVCMAP_SK_COUNT_MAX);
} SVCMAP_MAP_SK_COUNT SEC(".maps");

/* The same for svcmap_sk_be6 (struct sk_backend6): sockets counted for IPv6 backends. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct sk_backend6);
	__type(value, __u64);
	__uint(max_entries, SVCMAP_SK_COUNT_MAX);
} SVCMAP_MAP_SK_COUNT6 SEC(".maps");

/* One more socket for key (a whole storage value, pad 0) in counts. */
static __always_inline void sk_recount_add(void *counts, const void *key)
{
	__u64 one = 1, *n;

	n = bpf_map_lookup_elem(counts, key);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(counts, key, &one, BPF_NOEXIST);
}

/* Each socket still counted (backend_id not 0: not released, nor
 * reconnected to no frontend) counts once. */
SEC("iter/bpf_sk_storage_map")
int svcmap_sk_recount(struct bpf_iter__bpf_sk_storage_map *ctx)
{
	struct sk_backend *v = ctx->value;
	struct sk_backend key = {};

	if (!ctx->sk || !v || !v->backend_id)
		return 0;
	key.backend_id = v->backend_id;
	key.addr = v->addr;
	key.port = v->port;
	sk_recount_add(&SVCMAP_MAP_SK_COUNT, &key);
	return 0;
}

/* svcmap_sk_recount over svcmap_sk_be6. */
SEC("iter/bpf_sk_storage_map")
int svcmap_sk_recount6(struct bpf_iter__bpf_sk_storage_map *ctx)
{
	struct sk_backend6 *v = ctx->value;
	struct sk_backend6 key = {};

	if (!ctx->sk || !v || !v->backend_id)
		return 0;
	key.backend_id = v->backend_id;
	__builtin_memcpy(key.addr, v->addr, sizeof(key.addr));
	key.port = v->port;
	sk_recount_add(&SVCMAP_MAP_SK_COUNT6, &key);
	return 0;
}

char _license[] SEC("license") = "Dual BSD/GPL";
