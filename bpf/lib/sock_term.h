/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Socket termination: find the connected sockets that the socket LB sent to
 * a backend which has since left the frontend, and destroy them
 * (bpf_sock_destroy, kernel 6.5+), so the application gets ECONNABORTED and
 * connects again, to a live backend. Run by the agent as BPF socket
 * iterators (iter/udp, iter/tcp): each run walks the sockets of the network
 * namespace the iterator was created in.
 *
 * A socket matches only when all of these hold:
 *  - it is connected: its destination is an address and a port;
 *  - the socket LB translated it: the per-socket reverse NAT map of its
 *    family has an entry for {its cookie, its destination} (written at
 *    connect()), so a socket that connected to the pod IP itself is never
 *    touched;
 *  - {destination, protocol, the frontend of that entry} is in the set the
 *    agent wrote (struct sock_term_key, struct sock_term6_key): a socket
 *    sent to the same backend through a frontend the backend still belongs
 *    to stays.
 * An IPv6 socket connected to an IPv4-mapped address went through the IPv4
 * maps (sock_xlate_fwd()) and is matched as an IPv4 one.
 */
#ifndef SVCMAP_LIB_SOCK_TERM_H
#define SVCMAP_LIB_SOCK_TERM_H

#include "common.h"
#include "maps_sock.h"

#include <linux/in6.h>

/* TCP states (include/net/tcp_states.h) a socket is not destroyed in: it is
 * no connection (listening, closed) or not a full socket (the iterator also
 * shows time-wait and request sockets, which have no struct sock). */
#define SVCMAP_TCP_TIME_WAIT    6
#define SVCMAP_TCP_CLOSE        7
#define SVCMAP_TCP_LISTEN       10
#define SVCMAP_TCP_NEW_SYN_RECV 12

/*
 * The kernel types the iterators hand over, reduced to the fields used here.
 * preserve_access_index: libbpf relocates every field access against the
 * running kernel's BTF (CO-RE), so only the names have to match.
 */
struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
	__u64 session_id;
	__u64 seq_num;
} __attribute__((preserve_access_index));

struct sock_common {
	__be32 skc_daddr;
	__be16 skc_dport;
	unsigned short skc_family;
	volatile unsigned char skc_state;
	struct in6_addr skc_v6_daddr;
} __attribute__((preserve_access_index));

struct udp_sock;

struct bpf_iter__udp {
	struct bpf_iter_meta *meta;
	struct udp_sock *udp_sk;
} __attribute__((preserve_access_index));

struct bpf_iter__tcp {
	struct bpf_iter_meta *meta;
	struct sock_common *sk_common;
} __attribute__((preserve_access_index));

extern int bpf_sock_destroy(struct sock_common *sk) __ksym;

/* What the agent wants destroyed in this run. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct sock_term_key);
	__type(value, __u8);
	__uint(max_entries, SVCMAP_SK_TERM_MAX);
} SVCMAP_MAP_SK_TERM SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct sock_term6_key);
	__type(value, __u8);
	__uint(max_entries, SVCMAP_SK_TERM_MAX);
} SVCMAP_MAP_SK_TERM6 SEC(".maps");

/* An IPv6 socket (not IPv4-mapped) matches by the IPv6 maps. */
static __always_inline int sock_term_match6(struct sock_common *sk, __u8 proto, const __be32 daddr[4])
{
	struct sk_rev_nat6_key rkey = {};
	struct sk_rev_nat6_value *rnat;
	struct sock_term6_key tkey = {};

	__builtin_memcpy(rkey.addr, daddr, sizeof(rkey.addr));
	rkey.port = sk->skc_dport;
	if (!(daddr[0] | daddr[1] | daddr[2] | daddr[3]) || !rkey.port)
		return 0; /* not connected */
	rkey.cookie = bpf_get_socket_cookie(sk);
	rnat = bpf_map_lookup_elem(&SVCMAP_MAP_SK_REVNAT6, &rkey);
	if (!rnat)
		return 0;
	__builtin_memcpy(tkey.addr, daddr, sizeof(tkey.addr));
	tkey.port = rkey.port;
	tkey.proto = proto;
	tkey.rev_nat_id = rnat->rev_nat_id;
	return bpf_map_lookup_elem(&SVCMAP_MAP_SK_TERM6, &tkey) != NULL;
}

static __always_inline int sock_term_match(struct sock_common *sk, __u8 proto)
{
	struct sk_rev_nat_key rkey = {};
	struct sk_rev_nat_value *rnat;
	struct sock_term_key tkey = {};

	if (sk->skc_family == AF_INET6) {
		__be32 d[4];

		d[0] = sk->skc_v6_daddr.in6_u.u6_addr32[0];
		d[1] = sk->skc_v6_daddr.in6_u.u6_addr32[1];
		d[2] = sk->skc_v6_daddr.in6_u.u6_addr32[2];
		d[3] = sk->skc_v6_daddr.in6_u.u6_addr32[3];
		if (d[0] || d[1] || d[2] != bpf_htonl(0xffff))
			return sock_term_match6(sk, proto, d);
		/* ::ffff:a.b.c.d: the IPv4 maps, by the IPv4 address. */
		rkey.addr = d[3];
	} else if (sk->skc_family == AF_INET) {
		rkey.addr = sk->skc_daddr;
	} else {
		return 0;
	}
	rkey.port = sk->skc_dport;
	if (!rkey.addr || !rkey.port)
		return 0; /* not connected */
	rkey.cookie = bpf_get_socket_cookie(sk);
	rnat = bpf_map_lookup_elem(&SVCMAP_MAP_SK_REVNAT, &rkey);
	if (!rnat)
		return 0; /* the socket LB did not send it there */
	tkey.addr = rkey.addr;
	tkey.port = rkey.port;
	tkey.proto = proto;
	tkey.rev_nat_id = rnat->rev_nat_id;
	return bpf_map_lookup_elem(&SVCMAP_MAP_SK_TERM, &tkey) != NULL;
}

/*
 * Destroys sk if it matches; each destroyed socket writes its cookie to the
 * iterator's output, so the agent counts what one run destroyed.
 */
static __always_inline void sock_term(struct bpf_iter_meta *meta, struct sock_common *sk, __u8 proto)
{
	__u64 cookie;

	if (!sock_term_match(sk, proto))
		return;
	if (bpf_sock_destroy(sk))
		return;
	cookie = bpf_get_socket_cookie(sk);
	bpf_seq_write(meta->seq, &cookie, sizeof(cookie));
}

#endif /* SVCMAP_LIB_SOCK_TERM_H */
