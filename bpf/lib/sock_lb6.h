/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Socket-level load balancing of IPv6 sockets: the twin of sock_lb.h over
 * the IPv6 maps (maps6.h). A frontend's slots and master entry are read in
 * the order the agent writes them, as for IPv4; the slot is picked by the
 * algorithms as lb4_pick_slot() (lb6_pick_slot(): lc, sed and nq are
 * random for IPv6, which has no connection counts).
 * An IPv4-mapped destination (::ffff:a.b.c.d, a dual-stack application's
 * AF_INET6 socket to an IPv4 VIP) goes through the IPv4 maps instead, with
 * the IPv4 rules and per-socket reverse NAT.
 * [::1]:NodePort finds the wildcard NodePort entry ([::]), as 127.0.0.1 does.
 * Session affinity as for IPv4, in the shared affinity map under
 * AFFINITY_ORIGIN_SOCK6.
 */
#ifndef SVCMAP_LIB_SOCK_LB6_H
#define SVCMAP_LIB_SOCK_LB6_H

#include "lb6.h"
#include "sock_lb.h"

/* The socket's destination, read in the 4-byte words the context allows. */
static __always_inline void sock6_get(const struct bpf_sock_addr *ctx, __be32 addr[4])
{
	addr[0] = ctx->user_ip6[0];
	addr[1] = ctx->user_ip6[1];
	addr[2] = ctx->user_ip6[2];
	addr[3] = ctx->user_ip6[3];
}

static __always_inline void sock6_set(struct bpf_sock_addr *ctx, const __be32 addr[4], __be16 port)
{
	ctx->user_ip6[0] = addr[0];
	ctx->user_ip6[1] = addr[1];
	ctx->user_ip6[2] = addr[2];
	ctx->user_ip6[3] = addr[3];
	ctx->user_port = port;
}

/* The ETP=Local internal twin, as lb4_internal_scope(). */
static __always_inline struct svc_value *lb6_internal_scope(struct svc6_key *key, struct svc_value *svc)
{
	struct svc_value *twin;

	if (!(svc->flags & SVC_F_TWO_SCOPES))
		return svc;
	key->scope = SVC_SCOPE_INT;
	key->slot = 0;
	twin = bpf_map_lookup_elem(&SVCMAP_MAP_SERVICES6, key);
	if (twin)
		return twin;
	key->scope = SVC_SCOPE_EXT;
	return svc;
}

static __always_inline int addr6_loopback(const __be32 a[4])
{
	return a[0] == 0 && a[1] == 0 && a[2] == 0 && a[3] == bpf_htonl(1);
}

static __always_inline int addr6_v4mapped(const __be32 a[4])
{
	return a[0] == 0 && a[1] == 0 && a[2] == bpf_htonl(0xffff);
}

/*
 * ::ffff:a.b.c.d through the IPv4 maps: sock4_xlate_addr(), the IPv4
 * hooks' own code (scope, loopback NodePort, refused when empty, algorithm,
 * affinity, per-socket reverse NAT, connection counts at connect6), the
 * backend written back as ::ffff:backend. 0 or a negative errno, as
 * sock6_xlate_fwd().
 */
static __always_inline int sock6_xlate_fwd_v4mapped(struct bpf_sock_addr *ctx, __be32 addr, __u8 proto,
						    enum dp_hook hook)
{
	__be16 port = (__be16)ctx->user_port;
	int err = sock4_xlate_addr(ctx, &addr, &port, proto, hook, hook == DP_HOOK_CONNECT6);

	if (err)
		return err;
	ctx->user_ip6[3] = addr;
	ctx->user_port = port;
	return 0;
}

/* The reverse of sock6_xlate_fwd_v4mapped(): sock4_xlate_rev_addr(). */
static __always_inline void sock6_xlate_rev_v4mapped(struct bpf_sock_addr *ctx, __be32 addr, enum dp_hook hook)
{
	__be16 port = (__be16)ctx->user_port;

	sock4_xlate_rev_addr(ctx, &addr, &port, hook);
	ctx->user_ip6[3] = addr;
	ctx->user_port = port;
}

/* 0: not a frontend, or translated; a negative errno: a frontend with nothing to connect to. */
static __always_inline int sock6_xlate_fwd(struct bpf_sock_addr *ctx, enum dp_hook hook)
{
	struct svc6_key key = { .port = (__be16)ctx->user_port, .scope = SVC_SCOPE_EXT };
	struct sk_rev_nat6_key rkey = {};
	struct sk_rev_nat6_value rval = {};
	struct sk_rev_nat6_value *old;
	struct backend6_value *be;
	struct svc_value *svc;
	__u32 client_hash = 0;
	__u32 proto = ctx->protocol;

	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP) {
		dp_count(hook, DP_R_PASSED);
		return 0;
	}
	key.proto = (__u8)proto;
	sock6_get(ctx, key.addr);
	/* A socket counted by an earlier v4-mapped connect() stops counting
	 * for that backend when it connects again, wherever to. */
	if (hook == DP_HOOK_CONNECT6)
		sock4_uncount(ctx->sk);
	if (addr6_v4mapped(key.addr))
		return sock6_xlate_fwd_v4mapped(ctx, key.addr[3], key.proto, hook);
	__builtin_memcpy(rval.addr, key.addr, sizeof(rval.addr));
	rval.port = key.port;

	svc = bpf_map_lookup_elem(&SVCMAP_MAP_SERVICES6, &key);
	if (!svc && addr6_loopback(key.addr)) {
		/* [::1]:NodePort: the wildcard NodePort entry ([::]). */
		key.addr[3] = 0;
		svc = bpf_map_lookup_elem(&SVCMAP_MAP_SERVICES6, &key);
		if (svc && !(svc->flags & SVC_F_WILDCARD))
			svc = NULL;
	}
	if (!svc) {
		dp_count(hook, DP_R_PASSED);
		return 0;
	}
	svc = lb6_internal_scope(&key, svc);
	if (svc->count == 0) {
		dp_count(hook, DP_R_NO_BACKEND);
		return -ECONNREFUSED;
	}
	if (svc->algorithm == LB_ALG_SH)
		client_hash = lb_hash64(bpf_get_netns_cookie(ctx));
	if (svc->flags & SVC_F_AFFINITY) {
		/* The client is the socket's network namespace, as for IPv4; the
		 * origin keeps IPv6 rev_nat ids apart from IPv4 ones. */
		struct affinity_key akey = {
			.netns_cookie = bpf_get_netns_cookie(ctx),
			.rev_nat_id = svc->rev_nat_id,
			.origin = AFFINITY_ORIGIN_SOCK6,
		};

		be = lb6_affinity_select(&key, svc, &akey, client_hash);
	} else {
		__u32 id;

		be = lb6_select_backend(&key, svc, client_hash, &id);
	}
	if (!be) {
		dp_count(hook, DP_R_NO_BACKEND);
		return -ECONNREFUSED;
	}

	/* Remember the frontend, unless the entry already says so (see sock4_remember()). */
	rkey.cookie = bpf_get_socket_cookie(ctx);
	__builtin_memcpy(rkey.addr, be->addr, sizeof(rkey.addr));
	rkey.port = be->port;
	rval.rev_nat_id = svc->rev_nat_id;
	old = bpf_map_lookup_elem(&SVCMAP_MAP_SK_REVNAT6, &rkey);
	if (old && addr6_eq(old->addr, rval.addr) && old->port == rval.port && old->rev_nat_id == rval.rev_nat_id)
		dp_count(hook, DP_R_TRANSLATED);
	else if (bpf_map_update_elem(&SVCMAP_MAP_SK_REVNAT6, &rkey, &rval, BPF_ANY) < 0)
		dp_count(hook, DP_R_SK_REVNAT_FAILED);
	else
		dp_count(hook, DP_R_TRANSLATED);
	sock6_set(ctx, be->addr, be->port);
	return 0;
}

/* recvmsg6 and getpeername6: a backend's address becomes the frontend's again. */
static __always_inline void sock6_xlate_rev(struct bpf_sock_addr *ctx, enum dp_hook hook)
{
	struct sk_rev_nat6_key key = { .cookie = bpf_get_socket_cookie(ctx), .port = (__be16)ctx->user_port };
	struct sk_rev_nat6_value *val;
	struct rev_nat6_value *rnat;
	__u32 id;

	sock6_get(ctx, key.addr);
	if (addr6_v4mapped(key.addr)) {
		sock6_xlate_rev_v4mapped(ctx, key.addr[3], hook);
		return;
	}
	val = bpf_map_lookup_elem(&SVCMAP_MAP_SK_REVNAT6, &key);
	if (!val) {
		dp_count(hook, DP_R_PASSED);
		return;
	}
	id = val->rev_nat_id;
	rnat = bpf_map_lookup_elem(&SVCMAP_MAP_REVNAT6, &id);
	if (!rnat || rnat->port != val->port || (!addr6_zero(rnat->addr) && !addr6_eq(rnat->addr, val->addr))) {
		bpf_map_delete_elem(&SVCMAP_MAP_SK_REVNAT6, &key);
		dp_count(hook, DP_R_REVNAT_STALE);
		return;
	}
	sock6_set(ctx, val->addr, val->port);
	dp_count(hook, DP_R_REPLY_TRANSLATED);
}

#endif /* SVCMAP_LIB_SOCK_LB6_H */
