/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Service translation at XDP, on the ingress of the node's external
 * devices, before the stack makes an skb of the packet: NodePort,
 * LoadBalancer and externalIPs, IPv4 and IPv6. The flows are tc's:
 * lb_ingress_flow() (tc_lb.h) finds or makes the packet's conntrack entry
 * with the same SNAT ports, source ranges, externalTrafficPolicy Local,
 * session affinity and algorithms, in the same maps, so a flow may go
 * through XDP and tc packet by packet and stays one flow.
 *
 * A packet XDP translates leaves by a redirect (ctx_xdp.h), also when it
 * goes back out of the device it came in on. XDP_PASS hands a packet, untouched, to
 * the stack, where tc's ingress program (attached as without XDP) does
 * what it does today:
 *  - what is not for svcmap: counted as tc counts it (DP_R_PASSED,
 *    DP_R_OTHER_PROTO, DP_R_MALFORMED, DP_R_IPV6_EXT_HDR);
 *  - DP_R_TO_TC, what XDP leaves to tc: ICMP and ICMPv6 (tc translates the
 *    errors about tracked flows), IPv4 fragments (frag.h keeps a datagram's
 *    fragments together at tc), a packet whose L4 checksum may be partial
 *    (xdp_csum_partial()), and a translated packet XDP cannot forward: no
 *    forwardable route, an unresolved neighbour, an egress device that takes
 *    no XDP frames, larger than the egress MTU, a TTL that runs out. Its
 *    flow's entries are stored by then, and tc translates it by them.
 * Drops are XDP_DROP, under tc's reasons. Every packet is counted once,
 * under DP_HOOK_XDP. XDP has no egress: a local backend's reply to a
 * DNAT-only client is still translated by tc at egress.
 *
 * What is decided before anything is rewritten: a packet passed to tc must
 * be the one that arrived, so the route is looked up for the translated
 * tuple (xdp_fib_lookup()) before nat_rewrite() changes the packet.
 */
#ifndef SVCMAP_LIB_XDP_LB_H
#define SVCMAP_LIB_XDP_LB_H

#include "tc_lb.h"

static __always_inline int xdp_verdict(enum dp_reason reason, int verdict)
{
	dp_count(DP_HOOK_XDP, reason);
	return verdict;
}

/*
 * Whether p's L4 checksum may be partial. veth runs XDP on the skb its peer
 * sent (veth_xdp_rcv_skb()) without resolving a CHECKSUM_PARTIAL checksum:
 * from a local socket the field holds only the pseudo-header's sum, the
 * rest left to the device. The skb keeps that state through XDP_PASS, and tc
 * rewrites it right (bpf_l4_csum_replace knows it); a redirected frame
 * loses it, and would leave with the partial sum. XDP
 * cannot see the state, so it compares: a field equal to the pseudo-header
 * sum passes to tc. A complete checksum that equals it by chance (1 in
 * 65536) passes too, and tc translates it as well.
 */
static __always_inline int xdp_csum_partial(const int family, struct xdp_md *ctx, const void *p)
{
	__u64 s = bpf_htons(pkt_f(family, p, proto));
	__be16 len;
	__u16 c;

	if (family == AF_INET6) {
		const struct pkt6 *p6 = p;

		if (ctx_load_bytes(ctx, IP6_OFF + offsetof(struct ipv6hdr, payload_len), &len, sizeof(len)) < 0)
			return 1;
		s += (__u64)p6->saddr[0] + p6->saddr[1] + p6->saddr[2] + p6->saddr[3];
		s += (__u64)p6->daddr[0] + p6->daddr[1] + p6->daddr[2] + p6->daddr[3];
	} else {
		const struct pkt4 *p4 = p;

		if (ctx_load_bytes(ctx, IP4_OFF + offsetof(struct iphdr, tot_len), &len, sizeof(len)) < 0)
			return 1;
		len = bpf_htons(bpf_ntohs(len) - (p4->l4_off - IP4_OFF));
		s += (__u64)p4->saddr + p4->daddr;
	}
	s += len;
	if (ctx_load_bytes(ctx, pkt_f(family, p, csum_off), &c, sizeof(c)) < 0)
		return 1;
	s = (s & 0xffffffff) + (s >> 32);
	s = csum16_fold((__u32)s);
	/* 0 and 0xffff are the same one's-complement number. */
	return (c == 0xffff ? 0 : c) == (s == 0xffff ? 0 : s);
}

/* The route of p as entry v (the family's conntrack entry) will have it:
 * the lookup on the translated tuple, before the packet is rewritten. */
static __always_inline long xdp_fib_lookup(const int family, struct xdp_md *ctx, const void *p, const void *v,
					   struct bpf_fib_lookup *fib)
{
	const __be32 *daddr = ct_val_addr(family, v, new_daddr);
	const __be32 *saddr = ct_val_addr(family, v, new_saddr);
	__be16 dport = ct_val_f(family, v, new_dport);
	__be16 sport = ct_val_f(family, v, new_sport);

	if (addr_zero(family, daddr))
		daddr = pkt_addr(family, p, daddr);
	fib_params(family, fib, ctx, p, daddr, dport ? dport : pkt_f(family, p, dport));
	if (sport)
		fib->sport = sport;
	if (!addr_zero(family, saddr)) {
		if (family == AF_INET6)
			__builtin_memcpy(fib->ipv6_src, saddr, sizeof(fib->ipv6_src));
		else
			fib->ipv4_src = saddr[0];
	}
	return bpf_fib_lookup(ctx, fib, sizeof(*fib), 0);
}

static __always_inline int xdp_ingress(const int family, struct xdp_md *ctx, void *p, void *stack_bufs)
{
	struct bpf_fib_lookup fib;
	enum dp_reason reason, why;
	void *ct;
	long rc;
	__u8 ttl;
	int err;

	reason = pkt_parse(family, ctx, p);
	if (reason)
		return xdp_verdict(reason, XDP_PASS);
	if (pkt_f(family, p, proto) == (family == AF_INET6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP))
		return xdp_verdict(DP_R_TO_TC, XDP_PASS);
	if (family == AF_INET && ((struct pkt4 *)p)->frag)
		return xdp_verdict(DP_R_TO_TC, XDP_PASS);

	ct = lb_ingress_flow(family, ctx, p, stack_bufs, &reason);
	if (!ct)
		return xdp_verdict(reason, reason == DP_R_PASSED ? XDP_PASS : XDP_DROP);
	/* A DSR flow's packet that carries the frontend (dsr.h): tc adds it, by
	 * the entry stored now. */
	if ((ct_val_f(family, ct, flags) & CT_F_DSR) && dsr_carries_opt(family, p))
		return xdp_verdict(DP_R_TO_TC, XDP_PASS);
	if (xdp_csum_partial(family, ctx, p))
		return xdp_verdict(DP_R_TO_TC, XDP_PASS);
	rc = xdp_fib_lookup(family, ctx, p, ct, &fib);
	ttl = family == AF_INET6 ? ((struct pkt6 *)p)->hop_limit : ((struct pkt4 *)p)->ttl;
	if (!fib_forwardable(ctx, rc, &fib, ttl, &why))
		return xdp_verdict(DP_R_TO_TC, XDP_PASS);
	err = nat_rewrite(family, ctx, p, ct);
	if (!err)
		err = family == AF_INET6 ? csum6_dec_hop_limit(ctx, p) : csum4_dec_ttl(ctx, p);
	if (err < 0)
		return xdp_verdict(DP_R_REWRITE_FAILED, XDP_DROP);
	return xdp_verdict(reason, ctx_redirect(ctx, &fib));
}

/* The per-family instances the entry file (xdp.c) dispatches to, each a
 * function of its own, as tc's (tc_lb.h). */
static __noinline int xdp4_ingress(struct xdp_md *ctx)
{
	struct tc4_bufs bufs;
	struct pkt4 p;

	return xdp_ingress(AF_INET, ctx, &p, &bufs);
}

static __noinline int xdp6_ingress(struct xdp_md *ctx)
{
	struct pkt6 p;

	return xdp_ingress(AF_INET6, ctx, &p, NULL);
}

#endif /* SVCMAP_LIB_XDP_LB_H */
