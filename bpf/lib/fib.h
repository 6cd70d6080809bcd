/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Forwarding a packet translated at ingress without the stack (IPv4 and
 * IPv6 alike; for IPv6 the hop limit stands for the TTL).
 *
 * After translation the source may be one of the node's own addresses (the
 * SNAT address, or a NodePort frontend on a reply), which the input path
 * drops as a martian. So the packet is routed here: a FIB lookup on the new
 * addresses from the ingress device, then ctx_redirect() out of the
 * device the route names: at tc bpf_redirect_neigh(), which fills in the L2
 * header from the neighbour table (and resolves the neighbour when it is
 * not known yet: that is why BPF_FIB_LKUP_RET_NO_NEIGH is good enough
 * there); at XDP the lookup's own MAC addresses, so an unresolved
 * neighbour or a device XDP cannot send to is not forwardable (ctx.h). As a router does, the TTL goes
 * down by one on the way through.
 *
 * Every other outcome returns CTX_PASS with the packet already
 * translated, for the stack to handle as it would without svcmap:
 *  - the destination is local (a host-network backend on this node) or
 *    not a unicast route (NOT_FWDED), blackholed, unreachable, prohibited;
 *  - forwarding is disabled on the ingress device (FWD_DISABLED);
 *  - the packet is larger than the egress device's MTU, so the stack can
 *    fragment it or send ICMP "fragmentation needed". The size check is
 *    bpf_check_mtu() with BPF_MTU_CHK_SEGS after any lookup outcome we act
 *    on: it judges a GRO-merged skb by its segments, not its total length
 *    (fib.tot_len stays 0 for the same reason: set, the FIB lookup would
 *    compare the merged IP length with the MTU and refuse GRO packets),
 *    and it covers NO_NEIGH, where the lookup checks no MTU at all;
 *  - the TTL would reach zero, so the stack sends ICMP "time exceeded";
 *  - a route needing encapsulation (UNSUPP_LWT), or an error.
 * For a DNAT-only flow the stack then forwards or delivers it normally; a
 * packet whose new source is a local address is dropped by the stack as a
 * martian, which is the right end for packets it cannot route either.
 */
#ifndef SVCMAP_LIB_FIB_H
#define SVCMAP_LIB_FIB_H

#include "csum.h"

/*
 * After the FIB lookup (its result rc, the answer in *fib) for a translated
 * packet whose TTL (IPv4) or hop limit (IPv6) is ttl: 1 when the program
 * forwards it out of fib->ifindex itself, 0 when it goes to the stack, with
 * *reason (DP_R_TO_STACK_*) saying why. Either family.
 */
static __always_inline int fib_forwardable(struct ctx_buff *ctx, long rc, const struct bpf_fib_lookup *fib, __u8 ttl,
					   enum dp_reason *reason)
{
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && !(CTX_RESOLVES_NEIGH && rc == BPF_FIB_LKUP_RET_NO_NEIGH)) {
		/* For an skb that is not GSO, a route found is also checked
		 * against the egress MTU: too large is FRAG_NEEDED. */
		*reason = rc == BPF_FIB_LKUP_RET_FRAG_NEEDED ? DP_R_TO_STACK_MTU : DP_R_TO_STACK_NO_ROUTE;
		return 0;
	}
	if (!ctx_can_redirect(ctx, fib->ifindex)) {
		*reason = DP_R_TO_STACK_NO_ROUTE;
		return 0;
	}
	if (!ctx_mtu_ok(ctx, fib->ifindex)) {
		*reason = DP_R_TO_STACK_MTU;
		return 0;
	}
	if (ttl <= 1) {
		*reason = DP_R_TO_STACK_TTL;
		return 0;
	}
	return 1;
}

/* The lookup for a packet of p's tuple (struct pkt4 or pkt6) from the
 * ingress device to daddr (the family's words) and dport. At tc ingress,
 * ctx_ifindex(ctx) is the device the packet came in on. */
static __always_inline void fib_params(const int family, struct bpf_fib_lookup *fib, struct ctx_buff *ctx,
				       const void *p, const __be32 *daddr, __be16 dport)
{
	__builtin_memset(fib, 0, sizeof(*fib));
	fib->l4_protocol = pkt_f(family, p, proto);
	fib->sport = pkt_f(family, p, sport);
	fib->dport = dport;
	fib->ifindex = ctx_ifindex(ctx);
	if (family == AF_INET6) {
		const struct pkt6 *p6 = p;

		fib->family = AF_INET6;
		fib->flowinfo = p6->flowinfo;
		__builtin_memcpy(fib->ipv6_src, p6->saddr, sizeof(fib->ipv6_src));
		__builtin_memcpy(fib->ipv6_dst, daddr, sizeof(fib->ipv6_dst));
	} else {
		const struct pkt4 *p4 = p;

		fib->family = AF_INET;
		fib->tos = p4->tos;
		fib->ipv4_src = p4->saddr;
		fib->ipv4_dst = daddr[0];
	}
}

/*
 * Forwards p (struct pkt4 or pkt6), translated: TC_ACT_REDIRECT, CTX_PASS,
 * or CTX_DROP if the TTL (hop limit) could not be written. *reason (what
 * the packet counts as when it is redirected) becomes DP_R_TO_STACK_* when
 * the packet goes to the stack instead, and DP_R_REWRITE_FAILED with
 * CTX_DROP.
 */
static __always_inline int fib_redirect(const int family, struct ctx_buff *ctx, void *p, enum dp_reason *reason)
{
	struct bpf_fib_lookup fib;
	__u8 ttl;
	long rc;
	int err;

	fib_params(family, &fib, ctx, p, pkt_addr(family, p, daddr), pkt_f(family, p, dport));
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	ttl = family == AF_INET6 ? ((struct pkt6 *)p)->hop_limit : ((struct pkt4 *)p)->ttl;
	if (!fib_forwardable(ctx, rc, &fib, ttl, reason))
		return CTX_PASS;
	err = family == AF_INET6 ? csum6_dec_hop_limit(ctx, p) : csum4_dec_ttl(ctx, p);
	if (err < 0) {
		*reason = DP_R_REWRITE_FAILED;
		return CTX_DROP;
	}
	return ctx_redirect(ctx, &fib);
}

#endif /* SVCMAP_LIB_FIB_H */
