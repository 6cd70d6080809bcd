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
 *  - it is IPv4 and connected: its destination is an address and a port;
 *  - the socket LB translated it: the per-socket reverse NAT map has an
 *    entry for {its cookie, its destination} (written at connect()), so a
 *    socket that connected to the pod IP itself is never touched;
 *  - {destination, protocol, the frontend of that entry} is in the set the
 *    agent wrote (struct sock_term_key): a socket sent to the same backend
 *    through a frontend the backend still belongs to stays.
 */
#ifndef SVCMAP_LIB_SOCK_TERM_H
#define SVCMAP_LIB_SOCK_TERM_H

#include "common.h"
#include "maps_sock.h"

#ifndef AF_INET
#define AF_INET 2
#endif

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

static __always_inline int sock_term_match(struct sock_common *sk, __u8 proto)
{
	struct sk_rev_nat_key rkey = {};
	struct sk_rev_nat_value *rnat;
	struct sock_term_key tkey = {};

	if (sk->skc_family != AF_INET)
		return 0;
	rkey.addr = sk->skc_daddr;
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
