/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Direct server return (SVC_F_DSR): the ingress node DNATs a new flow to a
 * remote backend without SNAT, so the client's address reaches the backend,
 * and carries the frontend along in the packet; the backend's node records
 * it and sends the backend's answers straight to the client with the
 * frontend as their source.
 *
 * The frontend travels in the packet itself, after the fixed IP header
 * (docs/architecture-datapath.md says why not IPIP: 8 bytes instead of 20,
 * 24 instead of 40, and only on the first packets):
 *  IPv4: an option of 8 bytes (struct dsr_opt4): type DSR_OPT4_TYPE, length
 *        8, the frontend's port and address. Not "copied": a fragmented
 *        datagram carries it in its first fragment only, the one with ports.
 *  IPv6: a Destination Options header of 24 bytes (struct dsr_opt6) with
 *        one option of type DSR_OPT6_TYPE (its top bits 00: a node that
 *        does not know it skips it) holding the address and the port, and a
 *        PadN of 2 to the header's 8-byte multiple.
 * Which packets: a TCP flow's SYN (also retransmitted; the rest of the flow
 * has its entry at the backend's node by then), every UDP datagram (UDP
 * has no first packet the backend's node is sure to see: hybrid mode keeps
 * UDP on SNAT for that reason). Neither the IPv4 pseudo-header nor the
 * IPv6 one covers the added bytes: the L4 checksum stays as it is.
 *
 * The backend's node (dsr_in()): a packet whose first option claims to be
 * svcmap's is checked (its length, TCP or UDP, a frontend this node knows
 * with SVC_F_DSR: its own entry, or for another node's NodePort address the
 * wildcard NodePort entry; otherwise it is dropped, counted, so a client
 * cannot make the node answer from an address of its choice), the option
 * is removed (the pod sees the packet the client sent, DNATed), and a lone
 * CT_DIR_REPLY_OUT entry {backend -> client} with CT_F_DSR is written, which
 * tc_egress() applies to the backend's answers as to any DNAT-only flow's.
 *
 * Inserting and removing bytes is tc's (ctx_adjust_l3_room()): XDP passes
 * such packets to tc (DP_R_TO_TC, xdp_lb.h).
 */
#ifndef SVCMAP_LIB_DSR_H
#define SVCMAP_LIB_DSR_H

#include "ct.h"
#include "lb.h"
#include "csum_math.h"

#ifndef IPPROTO_DSTOPTS
#define IPPROTO_DSTOPTS 60
#endif

#define DSR_OPT4_TYPE 0x1a /* not copied, class 0 (control), number 26 (unassigned) */
#define DSR_OPT4_LEN  8
#define DSR_OPT6_TYPE 0x1b /* skip if unknown, not changed en route */
#define DSR_OPT6_LEN  24   /* the whole Destination Options header */
#define DSR_OPT6_DATA 18   /* the option's data: address and port */
#define IPV6_TLV_PADN 1

struct dsr_opt4 {
	__u8 type;
	__u8 len;
	__be16 port;
	__be32 addr;
};

struct dsr_opt6 {
	__u8 nexthdr;
	__u8 hdrlen; /* in 8-byte units, not counting the first 8 */
	__u8 type;
	__u8 len;
	__be32 addr[4];
	__be16 port;
	__u8 pad_type; /* PadN, */
	__u8 pad_len;  /* of 2 bytes in all */
};

/* What tc4_ingress()/tc6_ingress() return for a packet whose first option
 * claims to be svcmap's DSR option: the entry point hands it to
 * tc4_dsr_in()/tc6_dsr_in() (each a frame of its own). No verdict has it. */
#define TC_DSR 0x7ffe
/* ... and for a DSR flow's packet that carries the frontend, which the entry
 * point hands to tc4_dsr_fwd()/tc6_dsr_fwd(). */
#define TC_DSR_ADD 0x7ffd

/* Whether a packet of DSR flow p carries the option: a TCP SYN without ACK, any UDP datagram. */
static __always_inline int dsr_carries_opt(const int family, const void *p)
{
	if (pkt_f(family, p, proto) == IPPROTO_UDP)
		return 1;
	return (pkt_f(family, p, tcp_flags) & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN;
}

/* The ingress node never sees a DSR flow's answers: the client's ACK
 * (without SYN) says the backend answered, so the GC gives the flow the
 * established lifetime, not the SYN one. */
static __always_inline void dsr_seen_reply(const int family, const void *p, void *ct)
{
	if (!(ct_val_f(family, ct, flags) & CT_F_DSR) || (ct_val_f(family, ct, flags) & CT_F_SEEN_REPLY) ||
	    pkt_f(family, p, proto) != IPPROTO_TCP ||
	    (pkt_f(family, p, tcp_flags) & (TCP_FLAG_SYN | TCP_FLAG_ACK)) != TCP_FLAG_ACK)
		return;
	ct_val_f(family, ct, flags) |= CT_F_SEEN_REPLY;
}

/* Whether an IPv4 packet (parsed: it is one) has svcmap's option first
 * among its options. Read from the packet, not from pkt4's offsets: a
 * branch on those would split every later path of the program in two for
 * the verifier. IPv6's Destination Options header makes pkt6_parse() fail:
 * dsr6_opt_here() looks there. */
static __always_inline int dsr4_opt_here(struct ctx_buff *ctx)
{
	__u8 vihl = 0, type = 0;

	ctx_load_bytes(ctx, IP4_OFF, &vihl, sizeof(vihl));
	ctx_load_bytes(ctx, IP4_OFF + sizeof(struct iphdr), &type, sizeof(type));
	return (vihl & 0xf) > 5 && type == DSR_OPT4_TYPE;
}

static __always_inline int dsr6_opt_here(struct ctx_buff *ctx)
{
	__u8 b[3] = {};

	/* nexthdr of the fixed header; the first option's type. */
	ctx_load_bytes(ctx, IP6_OFF + offsetof(struct ipv6hdr, nexthdr), &b[0], 1);
	ctx_load_bytes(ctx, IP6_OFF + sizeof(struct ipv6hdr) + 2, &b[1], 1);
	return b[0] == IPPROTO_DSTOPTS && b[1] == DSR_OPT6_TYPE;
}

/*
 * Adds the option naming p's frontend (its destination: called before the
 * DNAT) after the fixed IP header; p's offsets follow the L4 header. 0, or
 * a negative errno (-E2BIG: an IPv4 header with no room left for 8 bytes).
 */
static __always_inline int dsr_add(const int family, struct ctx_buff *ctx, void *p)
{
	if (family == AF_INET6) {
		struct pkt6 *p6 = p;
		struct ipv6hdr ip;
		struct dsr_opt6 opt = {
			.hdrlen = DSR_OPT6_LEN / 8 - 1,
			.type = DSR_OPT6_TYPE,
			.len = DSR_OPT6_DATA,
			.pad_type = IPV6_TLV_PADN,
		};

		if (ctx_load_bytes(ctx, IP6_OFF, &ip, sizeof(ip)) < 0)
			return -EINVAL;
		opt.nexthdr = ip.nexthdr;
		__builtin_memcpy(opt.addr, p6->daddr, sizeof(opt.addr));
		opt.port = p6->dport;
		ip.nexthdr = IPPROTO_DSTOPTS;
		ip.payload_len = bpf_htons(bpf_ntohs(ip.payload_len) + DSR_OPT6_LEN);
		if (ctx_adjust_l3_room(ctx, DSR_OPT6_LEN) < 0 || ctx_store_hdr(ctx, IP6_OFF, &ip, sizeof(ip)) < 0 ||
		    ctx_store_hdr(ctx, IP6_OFF + sizeof(ip), &opt, sizeof(opt)) < 0)
			return -EINVAL;
		p6->l4_off += DSR_OPT6_LEN;
		p6->csum_off += DSR_OPT6_LEN;
	} else {
		struct pkt4 *p4 = p;
		struct iphdr ip;
		struct {
			__be32 word0; /* version, ihl, tos, tot_len */
			struct dsr_opt4 opt;
		} added = {};
		__be32 word0;
		__s64 diff;

		if (ctx_load_bytes(ctx, IP4_OFF, &ip, sizeof(ip)) < 0)
			return -EINVAL;
		if (ip.ihl > 15 - DSR_OPT4_LEN / 4)
			return -E2BIG;
		__builtin_memcpy(&word0, &ip, sizeof(word0));
		ip.ihl += DSR_OPT4_LEN / 4;
		ip.tot_len = bpf_htons(bpf_ntohs(ip.tot_len) + DSR_OPT4_LEN);
		__builtin_memcpy(&added.word0, &ip, sizeof(added.word0));
		added.opt.type = DSR_OPT4_TYPE;
		added.opt.len = DSR_OPT4_LEN;
		added.opt.port = p4->dport;
		added.opt.addr = p4->daddr;
		/* The header checksum: the first word changed, 8 bytes came. */
		diff = bpf_csum_diff(&word0, sizeof(word0), (__be32 *)&added, sizeof(added), 0);
		if (diff < 0)
			return (int)diff;
		ip.check = csum16_add_diff(ip.check, (__u32)diff);
		if (ctx_adjust_l3_room(ctx, DSR_OPT4_LEN) < 0 || ctx_store_hdr(ctx, IP4_OFF, &ip, sizeof(ip)) < 0 ||
		    ctx_store_hdr(ctx, IP4_OFF + sizeof(ip), &added.opt, sizeof(added.opt)) < 0)
			return -EINVAL;
		p4->l4_off += DSR_OPT4_LEN;
		p4->csum_off += DSR_OPT4_LEN;
	}
	return 0;
}

/* The master entry of the DSR frontend an option names (addr: the family's
 * words), for L4 protocol proto: its own entry, else (another node's
 * NodePort address) the wildcard NodePort entry; NULL when neither exists
 * with SVC_F_DSR. */
static __always_inline struct svc_value *dsr_frontend(const int family, const __be32 *addr, __be16 port, __u8 proto)
{
	union {
		struct svc_key v4;
		struct svc6_key v6;
	} k;
	struct svc_value *svc;

	__builtin_memset(&k, 0, sizeof(k));
	addr_copy(family, fam_addr(family, struct svc_key, struct svc6_key, &k, addr), addr);
	svc_key_f(family, &k, port) = port;
	svc_key_f(family, &k, proto) = proto;
	svc_key_f(family, &k, scope) = SVC_SCOPE_EXT;
	svc = bpf_map_lookup_elem(lb_svc_map(family), &k);
	if (!svc) {
		__builtin_memset(fam_addr(family, struct svc_key, struct svc6_key, &k, addr), 0,
				 family == AF_INET6 ? 16 : 4);
		svc = bpf_map_lookup_elem(lb_svc_map(family), &k);
		if (svc && !(svc->flags & SVC_F_WILDCARD))
			svc = NULL;
	}
	if (!svc || !(svc->flags & SVC_F_DSR))
		return NULL;
	return svc;
}

/*
 * The backend's node: records p's flow (p: the packet with the option
 * removed, client -> backend) as a DSR flow of frontend {addr, port}: the
 * lone CT_DIR_REPLY_OUT entry {backend -> client} that turns the answers'
 * source into the frontend. An entry the flow has already (UDP: every
 * datagram carries the option) only gets the packet's state and a refresh.
 * 0, or a negative errno.
 */
static __always_inline int dsr_record(const int family, const void *p, const __be32 *addr, __be16 port,
				      const struct svc_value *svc)
{
	union ct_key_any k;
	union {
		struct ct_value v4;
		struct ct6_value v6;
	} v;
	__u8 state = ct_state_of(pkt_f(family, p, proto), pkt_f(family, p, tcp_flags), CT_DIR_FWD);
	void *old;

	if (family == AF_INET6)
		__builtin_memset(&k, 0, sizeof(struct ct6_key));
	else
		__builtin_memset(&k, 0, sizeof(struct ct_key));
	addr_copy(family, ct_key_addr(family, &k, saddr), pkt_addr(family, p, daddr));
	addr_copy(family, ct_key_addr(family, &k, daddr), pkt_addr(family, p, saddr));
	ct_key_f(family, &k, sport) = pkt_f(family, p, dport);
	ct_key_f(family, &k, dport) = pkt_f(family, p, sport);
	ct_key_f(family, &k, proto) = pkt_f(family, p, proto);
	ct_key_f(family, &k, dir) = CT_DIR_REPLY_OUT;

	old = bpf_map_lookup_elem(ct_map(family), &k);
	if (old && (ct_val_f(family, old, flags) & CT_F_DSR) && ct_val_f(family, old, new_sport) == port &&
	    addr_eq(family, ct_val_addr(family, old, new_saddr), addr) &&
	    !((pkt_f(family, p, tcp_flags) & TCP_FLAG_SYN) && (ct_val_f(family, old, flags) & CT_F_STATE))) {
		ct_val_f(family, old, flags) = ct_state_merge(ct_val_f(family, old, flags), state);
		ct_refresh(&ct_val_f(family, old, last_seen), ct_val_f(family, old, flags), bpf_ktime_get_ns());
		return 0;
	}
	__builtin_memset(&v, 0, sizeof(v));
	addr_copy(family, ct_val_addr(family, &v, new_saddr), addr);
	ct_val_f(family, &v, new_sport) = port;
	ct_val_f(family, &v, rev_nat_id) = svc->rev_nat_id;
	ct_val_f(family, &v, flags) = ct_state_merge(CT_F_DSR | CT_F_LOCAL, state);
	ct_val_f(family, &v, last_seen) = bpf_ktime_get_ns();
	return ct_insert(family, &k, &v, BPF_ANY);
}

/*
 * The backend's node, a TCP FIN or RST from a client that passed (no
 * frontend, no forward entry): if it belongs to a DSR flow, its reply entry
 * gets the client's side of the state, so the GC can end the flow.
 */
static __always_inline void dsr_note_close(const int family, const void *p)
{
	union ct_key_any k;
	void *v;

	if (pkt_f(family, p, proto) != IPPROTO_TCP || !(pkt_f(family, p, tcp_flags) & (TCP_FLAG_FIN | TCP_FLAG_RST)))
		return;
	if (family == AF_INET6)
		__builtin_memset(&k, 0, sizeof(struct ct6_key));
	else
		__builtin_memset(&k, 0, sizeof(struct ct_key));
	addr_copy(family, ct_key_addr(family, &k, saddr), pkt_addr(family, p, daddr));
	addr_copy(family, ct_key_addr(family, &k, daddr), pkt_addr(family, p, saddr));
	ct_key_f(family, &k, sport) = pkt_f(family, p, dport);
	ct_key_f(family, &k, dport) = pkt_f(family, p, sport);
	ct_key_f(family, &k, proto) = IPPROTO_TCP;
	ct_key_f(family, &k, dir) = CT_DIR_REPLY_OUT;
	v = bpf_map_lookup_elem(ct_map(family), &k);
	if (!v || !(ct_val_f(family, v, flags) & CT_F_DSR))
		return;
	ct_val_f(family, v, flags) = ct_state_merge(ct_val_f(family, v, flags),
						    ct_state_of(IPPROTO_TCP, pkt_f(family, p, tcp_flags), CT_DIR_FWD));
	ct_val_f(family, v, last_seen) = bpf_ktime_get_ns();
}

/* Whether the TCP or UDP header at l4_off (from the frame's start) is in
 * the packet and inside the IP datagram's ip_len bytes (from the IP header's
 * start): what pkt_parse() will demand once the option is gone, checked
 * before, so that nothing is removed from a packet that is then dropped. */
static __always_inline int dsr_l4_whole(struct ctx_buff *ctx, __u8 proto, __u32 l4_off, __u32 ip_len)
{
	__u32 min = proto == IPPROTO_TCP ? sizeof(struct tcphdr) : sizeof(struct udphdr);

	return ctx_len(ctx) >= l4_off + min && ip_len >= l4_off - ETH_HLEN + min;
}

/*
 * Removes the option (the first after the fixed header, dsr*_opt_here())
 * from the packet once it names a DSR frontend (dsr_frontend(), into *svc),
 * the frontend into addr and *port: 0, or the reason to drop the packet
 * under (the packet is then unchanged, or DP_R_REWRITE_FAILED).
 */
static __always_inline enum dp_reason dsr_strip(const int family, struct ctx_buff *ctx, __be32 *addr, __be16 *port,
						struct svc_value **svc)
{
	__u8 proto;

	if (family == AF_INET6) {
		struct ipv6hdr ip;
		struct dsr_opt6 opt;

		if (ctx_load_bytes(ctx, IP6_OFF, &ip, sizeof(ip)) < 0 ||
		    ctx_load_bytes(ctx, IP6_OFF + sizeof(ip), &opt, sizeof(opt)) < 0)
			return DP_R_DSR_MALFORMED;
		if (opt.hdrlen != DSR_OPT6_LEN / 8 - 1 || opt.len != DSR_OPT6_DATA ||
		    bpf_ntohs(ip.payload_len) < DSR_OPT6_LEN)
			return DP_R_DSR_MALFORMED;
		__builtin_memcpy(addr, opt.addr, sizeof(opt.addr));
		*port = opt.port;
		proto = opt.nexthdr;
		ip.nexthdr = opt.nexthdr;
		ip.payload_len = bpf_htons(bpf_ntohs(ip.payload_len) - DSR_OPT6_LEN); /* the header as it will be */
		if ((proto != IPPROTO_TCP && proto != IPPROTO_UDP) ||
		    !dsr_l4_whole(ctx, proto, IP6_OFF + sizeof(ip) + DSR_OPT6_LEN,
				  sizeof(ip) + DSR_OPT6_LEN + bpf_ntohs(ip.payload_len)))
			return DP_R_DSR_MALFORMED;
		*svc = dsr_frontend(family, addr, *port, proto);
		if (!*svc)
			return DP_R_DSR_BAD_FRONTEND;
		if (ctx_adjust_l3_room(ctx, -DSR_OPT6_LEN) < 0 || ctx_store_hdr(ctx, IP6_OFF, &ip, sizeof(ip)) < 0)
			return DP_R_REWRITE_FAILED;
	} else {
		struct iphdr ip;
		struct {
			__be32 word0;
			struct dsr_opt4 opt;
		} gone;
		__be32 word0;
		__s64 diff;

		if (ctx_load_bytes(ctx, IP4_OFF, &ip, sizeof(ip)) < 0 ||
		    ctx_load_bytes(ctx, IP4_OFF + sizeof(ip), &gone.opt, sizeof(gone.opt)) < 0)
			return DP_R_DSR_MALFORMED;
		if (gone.opt.len != DSR_OPT4_LEN || ip.ihl < 5 + DSR_OPT4_LEN / 4 || bpf_ntohs(ip.tot_len) < ip.ihl * 4)
			return DP_R_DSR_MALFORMED;
		*addr = gone.opt.addr;
		*port = gone.opt.port;
		proto = ip.protocol;
		/* Not a later fragment (ours is not copied there: no ports to record). */
		if ((proto != IPPROTO_TCP && proto != IPPROTO_UDP) || (ip.frag_off & bpf_htons(IP4_OFFSET)) ||
		    !dsr_l4_whole(ctx, proto, IP4_OFF + ip.ihl * 4, bpf_ntohs(ip.tot_len)))
			return DP_R_DSR_MALFORMED;
		*svc = dsr_frontend(family, addr, *port, proto);
		if (!*svc)
			return DP_R_DSR_BAD_FRONTEND;
		__builtin_memcpy(&gone.word0, &ip, sizeof(gone.word0));
		ip.ihl -= DSR_OPT4_LEN / 4;
		ip.tot_len = bpf_htons(bpf_ntohs(ip.tot_len) - DSR_OPT4_LEN);
		__builtin_memcpy(&word0, &ip, sizeof(word0));
		diff = bpf_csum_diff((__be32 *)&gone, sizeof(gone), &word0, sizeof(word0), 0);
		if (diff < 0)
			return DP_R_REWRITE_FAILED;
		ip.check = csum16_add_diff(ip.check, (__u32)diff);
		if (ctx_adjust_l3_room(ctx, -DSR_OPT4_LEN) < 0 || ctx_store_hdr(ctx, IP4_OFF, &ip, sizeof(ip)) < 0)
			return DP_R_REWRITE_FAILED;
	}
	return 0;
}

#endif /* SVCMAP_LIB_DSR_H */
