/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Socket-level load balancing: translate the destination a socket asks for
 * (a service frontend) into a backend once, at connect() or sendmsg(), and
 * show the frontend again wherever the application looks at the peer.
 * With session affinity the client is the socket's network namespace and
 * keeps its backend across connections and datagrams (lb4_affinity_select()).
 */
#ifndef SVCMAP_LIB_SOCK_LB_H
#define SVCMAP_LIB_SOCK_LB_H

#include "lb.h"
#include "lb6.h"
#include "maps_sock.h"

/*
 * Remembers which frontend the socket asked for, keyed by the backend it
 * was sent to. A connected socket asks once; an unconnected UDP socket asks
 * on every datagram, usually for the same frontend and backend again, so an
 * entry that already says the same is left alone (a read instead of a write
 * of a shared LRU entry). 0, or the negative errno of a failed write.
 */
static __always_inline int sock4_remember(struct bpf_sock_addr *ctx,
					  const struct backend_value *be,
					  const struct svc_key *frontend, __u32 rev_nat_id)
{
	struct sk_rev_nat_key key = {
		.cookie = bpf_get_socket_cookie(ctx),
		.addr = be->addr,
		.port = be->port,
	};
	struct sk_rev_nat_value val = {
		.addr = frontend->addr,
		.port = frontend->port,
		.rev_nat_id = rev_nat_id,
	};
	struct sk_rev_nat_value *old;

	old = bpf_map_lookup_elem(&SVCMAP_MAP_SK_REVNAT, &key);
	if (old && old->addr == val.addr && old->port == val.port && old->rev_nat_id == val.rev_nat_id)
		return 0;
	return bpf_map_update_elem(&SVCMAP_MAP_SK_REVNAT, &key, &val, BPF_ANY);
}

/* The counted backend id of a socket's storage (its backend_id field), taken
 * with an exchange so that it is given back once; 0 when none. */
static __always_inline __u32 sock_count_take(__u32 *backend_id)
{
	if (!*backend_id)
		return 0;
	return __sync_lock_test_and_set(backend_id, 0);
}

/* The storage's endpoint is written: the socket counts for id from now on. */
static __always_inline void sock_count_give(void *conns_map, __u32 *backend_id, __u32 id)
{
	conns_add_in(conns_map, id, CONNS_FIELD_SOCK, 1);
	/* Last: a release that sees the id sees the rest of the entry too. */
	__sync_lock_test_and_set(backend_id, id);
}

/*
 * The backend a connected socket was counted for (struct sk_backend) stops
 * counting it: the socket is released, or connects again (a connected UDP
 * socket may, any number of times, also to an address that is no frontend).
 * The id is taken with an exchange, so it is given back once. The
 * decrement is skipped when the id no longer names the endpoint it was
 * taken for: the backend is gone (its entry is the recount's to delete) or
 * the id was reused for another endpoint, whose count is not this socket's.
 */
static __always_inline void sock4_uncount(struct bpf_sock *sk)
{
	struct backend_value *be;
	struct sk_backend *st;
	__u32 id;

	st = bpf_sk_storage_get(&SVCMAP_MAP_SK_BACKEND, sk, 0, 0);
	id = st ? sock_count_take(&st->backend_id) : 0;
	if (!id)
		return;
	be = bpf_map_lookup_elem(&SVCMAP_MAP_BACKENDS, &id);
	if (be && be->addr == st->addr && be->port == st->port)
		conns_add(id, CONNS_FIELD_SOCK, -1);
}

/* A socket connect()ed to backend id counts for it until sock4_uncount(). */
static __always_inline void sock4_count(struct bpf_sock *sk, __u32 id, const struct backend_value *be)
{
	struct sk_backend *st;

	st = bpf_sk_storage_get(&SVCMAP_MAP_SK_BACKEND, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return; /* out of memory: the socket goes uncounted */
	st->addr = be->addr;
	st->port = be->port;
	sock_count_give(&SVCMAP_MAP_BE_CONNS, &st->backend_id, id);
}

/*
 * The backend a socket's connect() or datagram gets from the frontend whose
 * entry svc is (key: its struct svc_key, family 4, or struct svc6_key,
 * family 6; a constant, so each caller keeps only its own family's code),
 * by session affinity or the algorithm; NULL when there is none. The
 * client is the socket's network namespace: a pod (see struct
 * affinity_key), for affinity and for the hashes of sh and maglev, as the
 * socket's source address is not known yet at connect() (nor, for an
 * unbound socket, at sendmsg()). Affinity entries of IPv6 frontends have
 * an origin of their own: their rev_nat ids are a space of their own.
 */
static __always_inline void *sock_select(struct bpf_sock_addr *ctx, int family, void *key,
					 const struct svc_value *svc, __u32 *backend_id)
{
	__u32 client_hash = 0;

	if (svc->algorithm == LB_ALG_SH || svc->algorithm == LB_ALG_MAGLEV)
		client_hash = lb_hash64(bpf_get_netns_cookie(ctx));
	if (svc->flags & SVC_F_AFFINITY) {
		struct affinity_key akey = {
			.netns_cookie = bpf_get_netns_cookie(ctx),
			.rev_nat_id = svc->rev_nat_id,
			.origin = family == 6 ? AFFINITY_ORIGIN_SOCK6 : AFFINITY_ORIGIN_SOCK,
		};

		return family == 6 ? (void *)lb6_affinity_select(key, svc, &akey, client_hash, backend_id)
				   : (void *)lb4_affinity_select(key, svc, &akey, client_hash, backend_id);
	}
	return family == 6 ? (void *)lb6_select_backend(key, svc, client_hash, backend_id)
			   : (void *)lb4_select_backend(key, svc, client_hash, backend_id);
}

/*
 * Returns 0 when the destination is not a frontend or was translated, and a
 * negative errno when the frontend exists but has nothing to connect to.
 * Counts the call under `hook` (DP_HOOK_CONNECT4 or DP_HOOK_SENDMSG4).
 */
static __always_inline int sock4_xlate_addr(struct bpf_sock_addr *ctx, __be32 *addr, __be16 *port,
					    __u32 proto, enum dp_hook hook, int connect)
{
	struct svc_key key = {
		.addr = *addr,
		.port = *port,
		.scope = SVC_SCOPE_EXT,
	};
	struct svc_key frontend;
	struct backend_value *be;
	struct svc_value *svc;
	__u32 backend_id = 0;

	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP) {
		dp_count(hook, DP_R_PASSED);
		return 0;
	}
	key.proto = (__u8)proto;
	frontend = key;
	/* A connected socket that connects again no longer counts for the
	 * backend of its last connect(). */
	if (connect)
		sock4_uncount(ctx->sk);

	svc = lb4_lookup_service(&key);
	if (!svc && is_loopback4(key.addr)) {
		/* 127.0.0.1:NodePort: the wildcard NodePort entry. */
		key.addr = 0;
		svc = lb4_lookup_service(&key);
		if (svc && !(svc->flags & SVC_F_WILDCARD))
			svc = NULL;
	}
	if (!svc) {
		dp_count(hook, DP_R_PASSED);
		return 0;
	}
	svc = lb4_internal_scope(&key, svc);
	if (svc->count == 0) {
		dp_count(hook, DP_R_NO_BACKEND);
		return -ECONNREFUSED;
	}
	be = sock_select(ctx, 4, &key, svc, &backend_id);
	if (!be) {
		dp_count(hook, DP_R_NO_BACKEND);
		return -ECONNREFUSED;
	}

	/* Without the entry the socket still reaches the backend; only
	 * getpeername/recvmsg show the backend rather than the frontend. */
	if (sock4_remember(ctx, be, &frontend, svc->rev_nat_id) < 0)
		dp_count(hook, DP_R_SK_REVNAT_FAILED);
	else
		dp_count(hook, DP_R_TRANSLATED);
	if (connect && lb_alg_counts(svc->algorithm))
		sock4_count(ctx->sk, backend_id, be);
	*addr = be->addr;
	*port = be->port;
	return 0;
}

static __always_inline int sock4_xlate_fwd(struct bpf_sock_addr *ctx, enum dp_hook hook)
{
	__be32 addr = ctx->user_ip4;
	__be16 port = (__be16)ctx->user_port;
	int err = sock4_xlate_addr(ctx, &addr, &port, ctx->protocol, hook, hook == DP_HOOK_CONNECT4);

	if (err)
		return err;
	ctx->user_ip4 = addr;
	ctx->user_port = port;
	return 0;
}

/*
 * recvmsg and getpeername: a backend's address (*addr, *port) becomes the
 * frontend's again. Shared by the IPv4 hooks and IPv4-mapped IPv6 sockets.
 */
static __always_inline void sock4_xlate_rev_addr(struct bpf_sock_addr *ctx, __be32 *addr, __be16 *port,
						 enum dp_hook hook)
{
	struct sk_rev_nat_key key = {
		.cookie = bpf_get_socket_cookie(ctx),
		.addr = *addr,
		.port = *port,
	};
	struct sk_rev_nat_value *val;
	struct rev_nat_value *rnat;
	__u32 id;

	val = bpf_map_lookup_elem(&SVCMAP_MAP_SK_REVNAT, &key);
	if (!val) {
		dp_count(hook, DP_R_PASSED);
		return;
	}
	/* The service may have been removed or replaced since: then the
	 * application sees the real peer rather than a stale frontend. */
	id = val->rev_nat_id;
	rnat = bpf_map_lookup_elem(&SVCMAP_MAP_REVNAT, &id);
	/* A wildcard NodePort's reverse NAT entry has address 0: the socket
	 * asked for 127.0.0.1 or another local address, kept in val. */
	if (!rnat || rnat->port != val->port || (rnat->addr && rnat->addr != val->addr)) {
		bpf_map_delete_elem(&SVCMAP_MAP_SK_REVNAT, &key);
		dp_count(hook, DP_R_REVNAT_STALE);
		return;
	}
	*addr = val->addr;
	*port = val->port;
	dp_count(hook, DP_R_REPLY_TRANSLATED);
}

static __always_inline void sock4_xlate_rev(struct bpf_sock_addr *ctx, enum dp_hook hook)
{
	__be32 addr = ctx->user_ip4;
	__be16 port = (__be16)ctx->user_port;

	sock4_xlate_rev_addr(ctx, &addr, &port, hook);
	ctx->user_ip4 = addr;
	ctx->user_port = port;
}

#endif /* SVCMAP_LIB_SOCK_LB_H */
