/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The socket hooks' own maps: which frontend a socket asked for, so that
 * recvmsg and getpeername can show it again, the sockets' counted backends,
 * and the hooks' node settings. Only bpf/sock.c includes this, so the tc
 * object does not carry (or allocate) them. Pinned like every map (see
 * maps.h), so their entries outlive an agent restart.
 */
#ifndef SVCMAP_LIB_MAPS_SOCK_H
#define SVCMAP_LIB_MAPS_SOCK_H

#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct sk_rev_nat_key);
	__type(value, struct sk_rev_nat_value);
	__uint(max_entries, SVCMAP_SK_REVNAT_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_SK_REVNAT SEC(".maps");

/* Per-socket reverse NAT of IPv6 sockets, as maps_sock.h's for IPv4. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct sk_rev_nat6_key);
	__type(value, struct sk_rev_nat6_value);
	__uint(max_entries, SVCMAP_SK_REVNAT_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_SK_REVNAT6 SEC(".maps");

/* Socket storage: the backend a connected socket was counted for (struct
 * sk_backend). Freed with the socket by the kernel; pinned, so that the
 * programs of a restarted agent see what the old ones stored. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__type(key, int);
	__type(value, struct sk_backend);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_SK_BACKEND SEC(".maps");

/* The same for sockets counted for an IPv6 backend (struct sk_backend6). */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__type(key, int);
	__type(value, struct sk_backend6);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_SK_BACKEND6 SEC(".maps");

/* The node's settings for the socket hooks (struct sock_config), written
 * by the agent before it attaches them. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct sock_config);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_SOCK_CFG SEC(".maps");

/* Pods whose sockets the socket LB leaves alone (struct sock_bypass). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u64);
	__type(value, struct sock_bypass);
	__uint(max_entries, SVCMAP_SOCK_BYP_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_SOCK_BYP SEC(".maps");

#endif /* SVCMAP_LIB_MAPS_SOCK_H */
