/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Socket-level load balancing: translate the destination a socket asks for
 * (a service frontend) into a backend once, at connect() or sendmsg(), and
 * show the frontend again wherever the application looks at the peer.
 * With session affinity the client is the socket's network namespace and
 * keeps its backend across connections and datagrams (lb_affinity_select()).
 *
 * Both families, one core called with a constant family: IPv6 sockets use
 * the IPv6 maps (connection counts in svcmap_conns6 and socket storage
 * svcmap_sk_be6, Maglev tables in svcmap_maglev6, session affinity under
 * AFFINITY_ORIGIN_SOCK6). A frontend's slots and master entry are read in
 * the order the agent writes them.
 * An IPv4-mapped destination (::ffff:a.b.c.d, a dual-stack application's
 * AF_INET6 socket to an IPv4 VIP) goes through the IPv4 maps instead, with
 * the IPv4 rules, counts and per-socket reverse NAT.
 * 127.0.0.1:NodePort and [::1]:NodePort find the wildcard NodePort entry
 * (0.0.0.0, [::]) for the node's own sockets only, where the agent turned
 * localhost NodePorts on (struct sock_config); the bind hooks refuse a
 * node's socket a port that a NodePort holds (sock_bind()). A Pod's
 * hostPort is a frontend like a NodePort's (SVC_F_HOSTPORT): its wildcard
 * and loopback entries serve the node's own sockets only.
 */
#ifndef SVCMAP_LIB_SOCK_LB_H
#define SVCMAP_LIB_SOCK_LB_H

#include "lb.h"
#include "maps_sock.h"

/* Either family's per-socket reverse NAT key and value, socket storage. */
#define sk_rnat_key_f(family, k, f) fam_field(family, struct sk_rev_nat_key, struct sk_rev_nat6_key, k, f)
#define sk_rnat_val_f(family, v, f) fam_field(family, struct sk_rev_nat_value, struct sk_rev_nat6_value, v, f)
#define sk_rnat_key_addr(family, k) fam_addr(family, struct sk_rev_nat_key, struct sk_rev_nat6_key, k, addr)
#define sk_rnat_val_addr(family, v) fam_addr(family, struct sk_rev_nat_value, struct sk_rev_nat6_value, v, addr)
#define sk_be_f(family, st, f)      fam_field(family, struct sk_backend, struct sk_backend6, st, f)
#define sk_be_addr(family, st)      fam_addr(family, struct sk_backend, struct sk_backend6, st, addr)
#define rnat_f(family, r, f)        fam_field(family, struct rev_nat_value, struct rev_nat6_value, r, f)
#define rnat_addr(family, r)        fam_addr(family, struct rev_nat_value, struct rev_nat6_value, r, addr)
#define svc_key_addr(family, k)     fam_addr(family, struct svc_key, struct svc6_key, k, addr)
#define sock_be_f(family, be, f)    fam_field(family, struct backend_value, struct backend6_value, be, f)
#define sock_be_addr(family, be)    fam_addr(family, struct backend_value, struct backend6_value, be, addr)

union sk_rnat_key_any {
	struct sk_rev_nat_key v4;
	struct sk_rev_nat6_key v6;
};

static __always_inline void *sock_rnat_map(const int family)
{
	return family == AF_INET6 ? (void *)&SVCMAP_MAP_SK_REVNAT6 : (void *)&SVCMAP_MAP_SK_REVNAT;
}

static __always_inline void *sock_conns_map(const int family)
{
	return family == AF_INET6 ? (void *)&SVCMAP_MAP_BE_CONNS6 : (void *)&SVCMAP_MAP_BE_CONNS;
}

/* The socket's storage of the family (struct sk_backend, sk_backend6). */
static __always_inline void *sock_storage(const int family, struct bpf_sock *sk, __u64 flags)
{
	if (family == AF_INET6)
		return bpf_sk_storage_get(&SVCMAP_MAP_SK_BACKEND6, sk, 0, flags);
	return bpf_sk_storage_get(&SVCMAP_MAP_SK_BACKEND, sk, 0, flags);
}

/* The address a sock_addr hook sees, of the family (one word, or four), and a new one. */
static __always_inline void sock_get(const int family, const struct bpf_sock_addr *ctx, __be32 addr[4])
{
	if (family == AF_INET6) {
		addr[0] = ctx->user_ip6[0];
		addr[1] = ctx->user_ip6[1];
		addr[2] = ctx->user_ip6[2];
		addr[3] = ctx->user_ip6[3];
	} else {
		addr[0] = ctx->user_ip4;
	}
}

static __always_inline void sock_set(const int family, struct bpf_sock_addr *ctx, const __be32 *addr, __be16 port)
{
	if (family == AF_INET6) {
		ctx->user_ip6[0] = addr[0];
		ctx->user_ip6[1] = addr[1];
		ctx->user_ip6[2] = addr[2];
		ctx->user_ip6[3] = addr[3];
	} else {
		ctx->user_ip4 = addr[0];
	}
	ctx->user_port = port;
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
 * Remembers which frontend (fe_addr, fe_port) the socket asked for, keyed
 * by the backend be it was sent to. A connected socket asks once; an
 * unconnected UDP socket asks on every datagram, usually for the same
 * frontend and backend again, so an entry that already says the same is
 * left alone (a read instead of a write of a shared LRU entry). 0, or the
 * negative errno of a failed write.
 */
static __always_inline int sock_remember(const int family, struct bpf_sock_addr *ctx, const void *be,
					 const __be32 *fe_addr, __be16 fe_port, __u32 rev_nat_id)
{
	union sk_rnat_key_any key;
	union {
		struct sk_rev_nat_value v4;
		struct sk_rev_nat6_value v6;
	} val;
	void *old;

	__builtin_memset(&key, 0, sizeof(key));
	__builtin_memset(&val, 0, sizeof(val));
	sk_rnat_key_f(family, &key, cookie) = bpf_get_socket_cookie(ctx);
	addr_copy(family, sk_rnat_key_addr(family, &key), sock_be_addr(family, be));
	sk_rnat_key_f(family, &key, port) = sock_be_f(family, be, port);
	addr_copy(family, sk_rnat_val_addr(family, &val), fe_addr);
	sk_rnat_val_f(family, &val, port) = fe_port;
	sk_rnat_val_f(family, &val, rev_nat_id) = rev_nat_id;

	old = bpf_map_lookup_elem(sock_rnat_map(family), &key);
	if (old && addr_eq(family, sk_rnat_val_addr(family, old), fe_addr) &&
	    sk_rnat_val_f(family, old, port) == fe_port && sk_rnat_val_f(family, old, rev_nat_id) == rev_nat_id)
		return 0;
	return bpf_map_update_elem(sock_rnat_map(family), &key, &val, BPF_ANY);
}

/* The counted backend id of a socket's storage (its backend_id field), taken
 * with an exchange so that it is given back once; 0 when none. */
static __always_inline __u32 sock_count_take(__u32 *backend_id)
{
	if (!*backend_id)
		return 0;
	return __sync_lock_test_and_set(backend_id, 0);
}

/*
 * The backend a connected socket was counted for (struct sk_backend, or
 * sk_backend6 for an IPv6 backend) stops counting it: the socket is
 * released, or connects again (a connected UDP socket may, any number of
 * times, also to an address that is no frontend). The id is taken with an
 * exchange, so it is given back once. The decrement is skipped when the id
 * no longer names the endpoint it was taken for: the backend is gone (its
 * entry is the recount's to delete) or the id was reused for another
 * endpoint, whose count is not this socket's.
 */
static __always_inline void sock_uncount(const int family, struct bpf_sock *sk)
{
	void *be, *st;
	__u32 id;

	st = sock_storage(family, sk, 0);
	id = st ? sock_count_take(&sk_be_f(family, st, backend_id)) : 0;
	if (!id)
		return;
	be = bpf_map_lookup_elem(lb_be_map(family), &id);
	if (be && addr_eq(family, sock_be_addr(family, be), sk_be_addr(family, st)) &&
	    sock_be_f(family, be, port) == sk_be_f(family, st, port))
		conns_add_in(sock_conns_map(family), id, CONNS_FIELD_SOCK, -1);
}

/* A socket connect()ed to backend id counts for it until sock_uncount(). */
static __always_inline void sock_count(const int family, struct bpf_sock *sk, __u32 id, const void *be)
{
	void *st;

	st = sock_storage(family, sk, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return; /* out of memory: the socket goes uncounted */
	addr_copy(family, sk_be_addr(family, st), sock_be_addr(family, be));
	sk_be_f(family, st, port) = sock_be_f(family, be, port);
	conns_add_in(sock_conns_map(family), id, CONNS_FIELD_SOCK, 1);
	/* Last: a release that sees the id sees the rest of the entry too. */
	__sync_lock_test_and_set(&sk_be_f(family, st, backend_id), id);
}

/*
 * The backend a socket's connect() or datagram gets from the frontend whose
 * entry svc is (key: the family's struct svc_key or svc6_key), by session
 * affinity or the algorithm; NULL when there is none. The client is the
 * socket's network namespace: a pod (see struct affinity_key), for affinity
 * and for the hashes of sh and maglev, as the socket's source address is
 * not known yet at connect() (nor, for an unbound socket, at sendmsg()).
 * Affinity entries of IPv6 frontends have an origin of their own: their
 * rev_nat ids are a space of their own.
 */
static __always_inline void *sock_select(const int family, struct bpf_sock_addr *ctx, void *key,
					 const struct svc_value *svc, __u32 *backend_id)
{
	__u32 client_hash = 0;

	if (svc->algorithm == LB_ALG_SH || svc->algorithm == LB_ALG_MAGLEV)
		client_hash = lb_hash64(bpf_get_netns_cookie(ctx));
	if (svc->flags & SVC_F_AFFINITY) {
		struct affinity_key akey = {
			.netns_cookie = bpf_get_netns_cookie(ctx),
			.rev_nat_id = svc->rev_nat_id,
			.origin = family == AF_INET6 ? AFFINITY_ORIGIN_SOCK6 : AFFINITY_ORIGIN_SOCK,
		};

		return lb_affinity_select(family, key, svc, &akey, client_hash, backend_id);
	}
	return lb_select_backend(family, key, svc, client_hash, backend_id);
}

/* The loopback address of the family (127.0.0.0/8, ::1): a NodePort asked
 * for there is the wildcard NodePort entry (0.0.0.0, [::]). */
static __always_inline int sock_loopback(const int family, const __be32 *addr)
{
	return family == AF_INET6 ? addr6_loopback(addr) : is_loopback4(addr[0]);
}

/* The agent's settings (struct sock_config): all zero until it writes them. */
static __always_inline const struct sock_config *sock_cfg(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&SVCMAP_MAP_SOCK_CFG, &zero);
}

/*
 * The socket is the node's own: its network namespace is the one the agent
 * runs in (a host-network process), not a pod's. A pod's 127.0.0.1 is its
 * own loopback and its port space its own: neither localhost NodePorts nor
 * bind protection are about it.
 */
static __always_inline int sock_on_node(const struct sock_config *cfg, struct bpf_sock_addr *ctx)
{
	return cfg && cfg->host_netns && bpf_get_netns_cookie(ctx) == cfg->host_netns;
}

/*
 * The calling task runs in a bypassed pod's cgroup or below it: one of its
 * ancestors (levels 1..SOCK_BYP_MAX_LEVEL, root excluded) is in
 * svcmap_sock_byp. The task's, not the socket's: sock_addr programs may not
 * ask for the socket's ancestors, and the task connecting or sending is the
 * pod's process that made the socket (a pod cannot hand sockets to another
 * pod's processes).
 */
static __always_inline int sock_pod_bypassed(void)
{
	for (int level = 1; level <= SOCK_BYP_MAX_LEVEL; level++) {
		__u64 id = bpf_get_current_ancestor_cgroup_id(level);

		if (!id)
			return 0; /* deeper than the task's own cgroup */
		if (bpf_map_lookup_elem(&SVCMAP_MAP_SOCK_BYP, &id))
			return 1;
	}
	return 0;
}

/*
 * The socket LB leaves this socket alone: it is a pod's, and the node
 * translates pods' traffic per packet at their veths, for every pod
 * (SOCK_CFG_HOST_ONLY) or for the bypassed ones (SOCK_CFG_POD_BYPASS). The
 * node's own sockets (host-network processes) keep the socket LB.
 */
static __always_inline int sock_lb_bypassed(struct bpf_sock_addr *ctx)
{
	const struct sock_config *cfg = sock_cfg();

	if (!cfg || !(cfg->flags & (SOCK_CFG_HOST_ONLY | SOCK_CFG_POD_BYPASS)) || sock_on_node(cfg, ctx))
		return 0;
	return (cfg->flags & SOCK_CFG_HOST_ONLY) || sock_pod_bypassed();
}

/* The family's localhost NodePorts are on (SOCK_CFG_LOCALHOST4/6). */
static __always_inline int sock_localhost_on(const int family, const struct sock_config *cfg)
{
	return cfg && (cfg->flags & (family == AF_INET6 ? SOCK_CFG_LOCALHOST6 : SOCK_CFG_LOCALHOST4));
}

/* The wildcard NodePort entry (asked for by a loopback address, or by the
 * wildcard address itself) serves this socket: the node's own, localhost
 * NodePorts on. A hostPort's wildcard entry, or one on a loopback address
 * (hostIP 127.0.0.1), serves the node's own sockets whatever that switch
 * says, as portmap serves 127.0.0.1:hostPort on the node. */
static __always_inline int sock_wildcard_ok(const int family, const struct svc_value *svc, struct bpf_sock_addr *ctx)
{
	const struct sock_config *cfg = sock_cfg();

	return ((svc->flags & SVC_F_HOSTPORT) || sock_localhost_on(family, cfg)) && sock_on_node(cfg, ctx);
}

/*
 * The destination {*addr (the family's words), *port} of a TCP or UDP
 * socket, translated when it is a frontend: 1 when it was (*addr, *port
 * are the backend's now), 0 when it is not a frontend, and a negative errno
 * when the frontend exists but has nothing to connect to. Counts the call
 * under `hook`; a connect() (`connect`) counts the socket for its backend
 * where the frontend's algorithm reads the counts.
 */
static __always_inline int sock_xlate_addr(const int family, struct bpf_sock_addr *ctx, __be32 *addr, __be16 *port,
					   __u8 proto, enum dp_hook hook, int connect)
{
	union {
		struct svc_key v4;
		struct svc6_key v6;
	} key;
	struct svc_value *svc;
	__u32 backend_id = 0;
	void *be;

	__builtin_memset(&key, 0, sizeof(key));
	addr_copy(family, svc_key_addr(family, &key), addr);
	svc_key_f(family, &key, port) = *port;
	svc_key_f(family, &key, proto) = proto;
	svc_key_f(family, &key, scope) = SVC_SCOPE_EXT;

	svc = lb_lookup_service(family, &key);
	if (!svc && sock_loopback(family, addr)) {
		/* 127.0.0.1:NodePort, [::1]:NodePort: the wildcard NodePort entry. */
		__builtin_memset(svc_key_addr(family, &key), 0, family == AF_INET6 ? 16 : 4);
		svc = lb_lookup_service(family, &key);
		if (svc && !(svc->flags & SVC_F_WILDCARD))
			svc = NULL;
	}
	/* Only the node's own sockets, and only with localhost NodePorts on: a
	 * pod's loopback is its own, and the switch is off as kube-proxy's
	 * --iptables-localhost-nodeports=false is. Left untouched otherwise. */
	if (svc && (svc->flags & SVC_F_WILDCARD) && !sock_wildcard_ok(family, svc, ctx))
		svc = NULL;
	/* A hostPort on 127.0.0.1 or [::1] is the node's loopback, not a pod's. */
	if (svc && (svc->flags & SVC_F_HOSTPORT) && sock_loopback(family, addr) && !sock_wildcard_ok(family, svc, ctx))
		svc = NULL;
	if (!svc) {
		dp_count(hook, DP_R_PASSED);
		return 0;
	}
	svc = lb_internal_scope(family, &key, svc);
	if (svc->count == 0) {
		dp_count(hook, DP_R_NO_BACKEND);
		return -ECONNREFUSED;
	}
	be = sock_select(family, ctx, &key, svc, &backend_id);
	if (!be) {
		dp_count(hook, DP_R_NO_BACKEND);
		return -ECONNREFUSED;
	}

	/* Without the entry the socket still reaches the backend; only
	 * getpeername/recvmsg show the backend rather than the frontend. */
	if (sock_remember(family, ctx, be, addr, *port, svc->rev_nat_id) < 0)
		dp_count(hook, DP_R_SK_REVNAT_FAILED);
	else
		dp_count(hook, DP_R_TRANSLATED);
	if (connect && lb_alg_counts(svc->algorithm))
		sock_count(family, ctx->sk, backend_id, be);
	addr_copy(family, addr, sock_be_addr(family, be));
	*port = sock_be_f(family, be, port);
	return 1;
}

/*
 * connect4/sendmsg4 (family AF_INET) and connect6/sendmsg6 (AF_INET6):
 * 0, or the negative errno to refuse the call with. A socket counted by an
 * earlier connect() stops counting for that backend when it connects again,
 * wherever to: an IPv6 socket may have counted for an IPv6 backend or,
 * through an IPv4-mapped frontend, an IPv4 one. An IPv4-mapped destination
 * goes through the IPv4 maps.
 */
static __always_inline int sock_xlate_fwd(const int family, struct bpf_sock_addr *ctx, enum dp_hook hook)
{
	int connect = hook == (family == AF_INET6 ? DP_HOOK_CONNECT6 : DP_HOOK_CONNECT4);
	__be16 port = (__be16)ctx->user_port;
	__u32 proto = ctx->protocol;
	__be32 addr[4];
	int r;

	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP) {
		dp_count(hook, DP_R_PASSED);
		return 0;
	}
	if (connect) {
		sock_uncount(AF_INET, ctx->sk);
		if (family == AF_INET6)
			sock_uncount(AF_INET6, ctx->sk);
	}
	if (sock_lb_bypassed(ctx)) {
		dp_count(hook, DP_R_SOCK_BYPASSED);
		return 0;
	}
	sock_get(family, ctx, addr);
	if (family == AF_INET6 && addr6_v4mapped(addr)) {
		r = sock_xlate_addr(AF_INET, ctx, &addr[3], &port, proto, hook, connect);
		if (r > 0) {
			ctx->user_ip6[3] = addr[3];
			ctx->user_port = port;
		}
		return r < 0 ? r : 0;
	}
	r = sock_xlate_addr(family, ctx, addr, &port, proto, hook, connect);
	if (r > 0)
		sock_set(family, ctx, addr, port);
	return r < 0 ? r : 0;
}

/*
 * recvmsg and getpeername: a backend's address (*addr, the family's words;
 * *port) becomes the frontend's again: 1 when it did. IPv4-mapped IPv6
 * sockets use the IPv4 entries.
 */
static __always_inline int sock_xlate_rev_addr(const int family, struct bpf_sock_addr *ctx, __be32 *addr, __be16 *port,
					       enum dp_hook hook)
{
	union sk_rnat_key_any key;
	void *val, *rnat;
	__u32 id;

	__builtin_memset(&key, 0, sizeof(key));
	sk_rnat_key_f(family, &key, cookie) = bpf_get_socket_cookie(ctx);
	addr_copy(family, sk_rnat_key_addr(family, &key), addr);
	sk_rnat_key_f(family, &key, port) = *port;
	val = bpf_map_lookup_elem(sock_rnat_map(family), &key);
	if (!val) {
		dp_count(hook, DP_R_PASSED);
		return 0;
	}
	/* The service may have been removed or replaced since: then the
	 * application sees the real peer rather than a stale frontend. */
	id = sk_rnat_val_f(family, val, rev_nat_id);
	rnat = bpf_map_lookup_elem(family == AF_INET6 ? (void *)&SVCMAP_MAP_REVNAT6 : (void *)&SVCMAP_MAP_REVNAT, &id);
	/* A wildcard NodePort's reverse NAT entry has address 0: the socket
	 * asked for 127.0.0.1 (::1) or another local address, kept in val. */
	if (!rnat || rnat_f(family, rnat, port) != sk_rnat_val_f(family, val, port) ||
	    (!addr_zero(family, rnat_addr(family, rnat)) &&
	     !addr_eq(family, rnat_addr(family, rnat), sk_rnat_val_addr(family, val)))) {
		bpf_map_delete_elem(sock_rnat_map(family), &key);
		dp_count(hook, DP_R_REVNAT_STALE);
		return 0;
	}
	addr_copy(family, addr, sk_rnat_val_addr(family, val));
	*port = sk_rnat_val_f(family, val, port);
	dp_count(hook, DP_R_REPLY_TRANSLATED);
	return 1;
}

static __always_inline void sock_xlate_rev(const int family, struct bpf_sock_addr *ctx, enum dp_hook hook)
{
	__be16 port = (__be16)ctx->user_port;
	__be32 addr[4];

	sock_get(family, ctx, addr);
	if (family == AF_INET6 && addr6_v4mapped(addr)) {
		if (sock_xlate_rev_addr(AF_INET, ctx, &addr[3], &port, hook)) {
			ctx->user_ip6[3] = addr[3];
			ctx->user_port = port;
		}
		return;
	}
	if (sock_xlate_rev_addr(family, ctx, addr, &port, hook))
		sock_set(family, ctx, addr, port);
}

/*
 * A port {*addr, port} of protocol proto that a NodePort holds: the
 * wildcard address's (any NodePort of the family), an address that serves
 * NodePorts (one with a NodePort entry of its own; a ClusterIP or
 * LoadBalancer IP at that port is not a NodePort), or loopback's where the
 * family's localhost NodePorts are on (the wildcard entry serves it).
 */
static __always_inline int sock_nodeport_port(const int family, const struct sock_config *cfg, const __be32 *addr,
					      __be16 port, __u8 proto)
{
	union {
		struct svc_key v4;
		struct svc6_key v6;
	} key;
	struct svc_value *svc;

	if (sock_loopback(family, addr) && !sock_localhost_on(family, cfg))
		return 0;
	__builtin_memset(&key, 0, sizeof(key));
	if (!sock_loopback(family, addr))
		addr_copy(family, svc_key_addr(family, &key), addr);
	svc_key_f(family, &key, port) = port;
	svc_key_f(family, &key, proto) = proto;
	svc_key_f(family, &key, scope) = SVC_SCOPE_EXT;
	svc = lb_lookup_service(family, &key);
	return svc && (svc->flags & SVC_F_NODEPORT);
}

/*
 * bind4 (family AF_INET) and bind6 (AF_INET6): 0, or -EADDRINUSE when bind
 * protection is on and the node's own TCP or UDP socket asks for a port a
 * NodePort of its protocol holds (sock_nodeport_port()): such a listener
 * would never see that traffic (the socket LB and tc send it to the
 * Service's backends), so it must not start as if it did, as with Cilium's
 * nodePort.bindProtection. An IPv4-mapped address is the IPv4 one; [::]
 * also takes the IPv4 port unless the socket is IPV6_V6ONLY, which this hook
 * cannot see, so the IPv4 wildcard is asked as well. Port 0 (the kernel's
 * choice, from the ephemeral range) is not looked at. Counted under hook.
 */
static __always_inline int sock_bind(const int family, struct bpf_sock_addr *ctx, enum dp_hook hook)
{
	const struct sock_config *cfg = sock_cfg();
	__be16 port = (__be16)ctx->user_port;
	__u32 proto = ctx->protocol;
	__be32 addr[4], any = 0;
	int taken;

	if (!cfg || !(cfg->flags & SOCK_CFG_BIND_PROTECT) || !port || (proto != IPPROTO_TCP && proto != IPPROTO_UDP) ||
	    !sock_on_node(cfg, ctx)) {
		dp_count(hook, DP_R_PASSED);
		return 0;
	}
	sock_get(family, ctx, addr);
	if (family == AF_INET6 && addr6_v4mapped(addr)) {
		taken = sock_nodeport_port(AF_INET, cfg, &addr[3], port, proto);
	} else {
		taken = sock_nodeport_port(family, cfg, addr, port, proto);
		if (!taken && family == AF_INET6 && addr6_zero(addr))
			taken = sock_nodeport_port(AF_INET, cfg, &any, port, proto);
	}
	if (taken) {
		dp_count(hook, DP_R_BIND_DENIED);
		return -EADDRINUSE;
	}
	dp_count(hook, DP_R_PASSED);
	return 0;
}

#endif /* SVCMAP_LIB_SOCK_LB_H */
