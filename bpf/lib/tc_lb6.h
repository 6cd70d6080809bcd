/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Service translation at tc for IPv6: tc_lb.h's NodePort, LoadBalancer and
 * externalIPs from outside the node, over the IPv6 service maps (maps6.h)
 * and svcmap_ct6, with the same rules: a known flow keeps its translation
 * (lb6_flow_stale()), a reply to a SNATed flow is turned back into frontend
 * -> client, a new packet to a frontend picks a backend (session affinity
 * under AFFINITY_ORIGIN_TC6), DNAT plus SNAT to the egress device's IPv6
 * address for a remote backend under policy Cluster; ETP Local and
 * loadBalancerSourceRanges (svcmap_srcrng6) as for IPv4. At egress a local
 * backend's reply gets the frontend back as its source.
 *
 * ICMPv6 errors about tracked flows are translated back at both hooks
 * (icmp.h). Passed untouched: the rest of ICMPv6 (neighbour discovery,
 * router advertisements, echo: counted as DP_R_OTHER_PROTO), and packets
 * with extension headers (DP_R_IPV6_EXT_HDR, packet6.h).
 */
#ifndef SVCMAP_LIB_TC_LB6_H
#define SVCMAP_LIB_TC_LB6_H

#include "tc_lb.h"
#include "lb6.h"
#include "ct.h"
#include "nat.h"
#include "icmp.h"

/*
 * A new IPv6 flow's two entries and their keys, 192 bytes: more than the
 * 512-byte BPF stack holds beside the rest of tc6_ingress(), so they are
 * built in this per-CPU scratch entry (a tc program runs to its end on one
 * CPU without another run of it there in between). Not pinned: each
 * object's own working space.
 */
struct tc6_scratch {
	struct ct6_value fwd;
	struct ct6_value rev;
	struct ct6_key fkey;
	struct ct6_key rkey;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct tc6_scratch);
	__uint(max_entries, 1);
} svcmap_tc6_tmp SEC(".maps");

/* loadBalancerSourceRanges for an IPv6 frontend. */
static __always_inline int lb6_source_allowed(const struct svc_value *svc, const __be32 saddr[4])
{
	struct src_range6_key k = {
		.prefixlen = 32 + 128,
		.rev_nat_id = svc->rev_nat_id,
	};

	if (!(svc->flags & SVC_F_SRC_RANGES))
		return 1;
	__builtin_memcpy(k.addr, saddr, sizeof(k.addr));
	return bpf_map_lookup_elem(&SVCMAP_MAP_SRC_RANGE6, &k) != NULL;
}

/* lb4_flow_stale() for IPv6: when a known flow starts afresh. */
static __always_inline int lb6_flow_stale(const struct pkt6 *p, const struct ct6_value *v)
{
	struct ct6_key rep;
	int r = lb_flow_stale_tcp(p->proto, p->tcp_flags, v->flags);

	if (r != LB_CHECK)
		return r;
	if (p->proto == IPPROTO_TCP && !ct_reply_of(AF_INET6, p, v, &rep))
		return 1;
	return !ct_backend_current(AF_INET6, v);
}

/* lb4_tc_client_hash() for IPv6: the source address folded to 32 bits. */
static __always_inline __u32 lb6_tc_client_hash(const struct pkt6 *p, const struct svc_value *svc)
{
	return lb_tc_client_hash(addr6_fold(p->saddr), p->sport, p->proto, svc);
}

/* The backend a new flow of p to frontend key gets (its id in *backend_id), NULL for none. */
static __always_inline struct backend6_value *lb6_tc_select(const struct pkt6 *p, struct svc6_key *key,
							     const struct svc_value *svc, __u32 *backend_id)
{
	__u32 hash = lb6_tc_client_hash(p, svc);

	if (!(svc->flags & SVC_F_AFFINITY))
		return lb6_select_backend(key, svc, hash, backend_id);
	{
		/* The client: its /64 and its interface id folded (svcmap_maps.h). */
		struct affinity_key akey = {
			.client_addr = p->saddr[2] ^ p->saddr[3],
			.rev_nat_id = svc->rev_nat_id,
			.origin = AFFINITY_ORIGIN_TC6,
		};

		__builtin_memcpy(&akey.netns_cookie, p->saddr, sizeof(akey.netns_cookie));
		return lb6_affinity_select(key, svc, &akey, hash, backend_id);
	}
}

/*
 * lb4_tc_new_flow() for IPv6: DP_R_TRANSLATED with the translation in
 * sc->fwd, DP_R_PASSED, or the reason to drop.
 */
static __always_inline enum dp_reason lb6_tc_new_flow(struct __sk_buff *skb, const struct pkt6 *p,
						      struct tc6_scratch *sc)
{
	struct svc6_key key = {
		.port = p->dport,
		.proto = p->proto,
		.scope = SVC_SCOPE_EXT,
	};
	struct ct6_value *fwd = &sc->fwd, *rev = &sc->rev;
	const struct svcmap_config *cfg;
	struct backend6_value *be;
	struct ct6_value *winner;
	struct svc_value *svc;
	enum dp_reason why;
	__u32 backend_id = 0;
	__u64 now;
	int snat, insert_failed = 0;

	__builtin_memcpy(key.addr, p->daddr, sizeof(key.addr));
	svc = bpf_map_lookup_elem(&SVCMAP_MAP_SERVICES6, &key);
	if (!svc)
		return DP_R_PASSED;
	if (!lb6_source_allowed(svc, p->saddr))
		return DP_R_SOURCE_DENIED;
	if (svc->count == 0)
		return (svc->flags & SVC_F_ETP_LOCAL) ? DP_R_NO_LOCAL_ENDPOINT : DP_R_NO_BACKEND;
	be = lb6_tc_select(p, &key, svc, &backend_id);
	if (!be)
		return DP_R_NO_BACKEND;

	now = bpf_ktime_get_ns();
	snat = !(be->flags & BACKEND_F_LOCAL) && !(svc->flags & SVC_F_ETP_LOCAL);
	__builtin_memset(sc, 0, sizeof(*sc));

	__builtin_memcpy(fwd->new_daddr, be->addr, sizeof(fwd->new_daddr));
	fwd->new_dport = be->port;
	fwd->backend_id = backend_id;
	fwd->rev_nat_id = svc->rev_nat_id;
	fwd->flags = (be->flags & BACKEND_F_LOCAL) ? CT_F_LOCAL : 0;
	fwd->flags = ct_state_merge(fwd->flags, ct_state_of(p->proto, p->tcp_flags, CT_DIR_FWD));
	fwd->last_seen = now;

	/* Replies look like frontend -> client again. */
	__builtin_memcpy(rev->new_saddr, p->daddr, sizeof(rev->new_saddr));
	rev->new_sport = p->dport;
	rev->backend_id = backend_id;
	rev->rev_nat_id = svc->rev_nat_id;
	rev->flags = fwd->flags;
	rev->last_seen = now;

	__builtin_memcpy(sc->rkey.saddr, be->addr, sizeof(sc->rkey.saddr));
	sc->rkey.sport = be->port;
	sc->rkey.proto = p->proto;

	if (snat) {
		cfg = tc_config();
		if (!cfg)
			return DP_R_NO_SNAT_ADDR;
		why = snat6_source(skb, p, fwd->new_daddr, fwd->new_dport, sc->rkey.daddr);
		if (why)
			return why;
		sc->rkey.dir = CT_DIR_REPLY_IN;
		__builtin_memcpy(rev->new_daddr, p->saddr, sizeof(rev->new_daddr));
		rev->new_dport = p->sport;
		rev->flags |= CT_F_SNAT;
		fwd->new_sport = nat_snat_reserve(AF_INET6, cfg, &sc->rkey, rev, p, &insert_failed);
		if (!fwd->new_sport)
			return insert_failed ? DP_R_CT_INSERT_FAILED : DP_R_SNAT_EXHAUSTED;
		__builtin_memcpy(fwd->new_saddr, sc->rkey.daddr, sizeof(fwd->new_saddr));
		fwd->flags |= CT_F_SNAT;
	} else {
		__builtin_memcpy(sc->rkey.daddr, p->saddr, sizeof(sc->rkey.daddr));
		sc->rkey.dport = p->sport;
		sc->rkey.dir = CT_DIR_REPLY_OUT;
		if (ct_insert(AF_INET6, &sc->rkey, rev, BPF_ANY) < 0)
			return DP_R_CT_INSERT_FAILED;
	}

	ct_key_of(AF_INET6, &sc->fkey, p, CT_DIR_FWD);
	fwd->flags = ct_count_new(fwd->flags, svc->algorithm);
	if (ct_insert(AF_INET6, &sc->fkey, fwd, BPF_NOEXIST) == 0) {
		/* The one CPU whose entry is the flow's counts it (see ct_uncount()). */
		if (fwd->flags & CT_F_COUNTED)
			conns_add_in(&SVCMAP_MAP_BE_CONNS6, backend_id, CONNS_FIELD_TC, 1);
		return DP_R_TRANSLATED;
	}
	/* Another CPU created the flow first: follow it (see lb4_tc_new_flow()). */
	winner = bpf_map_lookup_elem(&SVCMAP_MAP_CT6, &sc->fkey);
	if (snat || !winner || !addr6_eq(winner->new_daddr, fwd->new_daddr) ||
	    winner->new_dport != fwd->new_dport)
		ct_delete(AF_INET6, &sc->rkey);
	if (!winner)
		return DP_R_CT_INSERT_FAILED;
	*fwd = *winner;
	return DP_R_TRANSLATED;
}

/* What tc6_ingress()/tc6_egress() return for an ICMPv6 packet, which the
 * entry points then hand to tc6_icmp(): called from there, not from inside
 * them, its stack frame and theirs are never on the call chain together (the
 * verifier allows 512 bytes for the whole chain). No TC_ACT_* has this value. */
#define TC6_ICMP 0x7fff

/*
 * An ICMPv6 packet at ingress (ingress 1) or egress: an error about a flow
 * svcmap translated is translated back (at ingress: forwarded like the
 * flow's packets); the rest passes untouched.
 */
static __noinline int tc6_icmp(struct __sk_buff *skb, int ingress)
{
	enum dp_hook hook = ingress ? DP_HOOK_TC_INGRESS : DP_HOOK_TC_EGRESS;
	enum dp_reason reason = DP_R_ICMP_TRANSLATED;
	struct icmp_quote q;
	struct ct6_value *ct;
	struct pkt6 pk, *p = &pk;
	int verdict;

	reason = pkt6_parse(skb, p);
	if (reason)
		return tc_verdict(hook, reason, TC_ACT_OK);
	reason = DP_R_ICMP_TRANSLATED;
	if (icmp_parse_quote(AF_INET6, skb, p, &q) < 0)
		return tc_verdict(hook, DP_R_OTHER_PROTO, TC_ACT_OK);
	if (ingress) {
		ct = icmp_flow(AF_INET6, &q, CT_DIR_FWD);
		if (!ct)
			ct = icmp_flow(AF_INET6, &q, CT_DIR_REPLY_IN);
	} else {
		ct = icmp_flow(AF_INET6, &q, CT_DIR_REPLY_OUT);
	}
	if (!ct)
		return tc_verdict(hook, DP_R_PASSED, TC_ACT_OK);
	if (icmp_rewrite(AF_INET6, skb, p, &q, ct) < 0)
		return tc_verdict(hook, DP_R_REWRITE_FAILED, TC_ACT_SHOT);
	if (!ingress)
		return tc_verdict(hook, reason, TC_ACT_OK);
	verdict = fib6_redirect(skb, p, &reason);
	return tc_verdict(hook, reason, verdict);
}

static __noinline int tc6_ingress(struct __sk_buff *skb)
{
	struct tc6_scratch *sc;
	enum dp_reason reason;
	struct ct6_value *ct;
	struct pkt6 p;
	__u32 zero = 0;
	int verdict;

	reason = pkt6_parse(skb, &p);
	if (reason)
		return tc_verdict(DP_HOOK_TC_INGRESS, reason, TC_ACT_OK);
	if (p.proto == IPPROTO_ICMPV6)
		return TC6_ICMP;

	reason = DP_R_TRANSLATED;
	ct = ct_lookup(AF_INET6, &p, CT_DIR_FWD);
	if (ct && lb6_flow_stale(&p, ct)) {
		ct_forget_flow(AF_INET6, &p, ct);
		ct = NULL;
	} else if (!ct && nat_snat_port(p.dport)) {
		ct = ct_lookup(AF_INET6, &p, CT_DIR_REPLY_IN);
		reason = DP_R_REPLY_TRANSLATED;
	}
	if (!ct) {
		sc = bpf_map_lookup_elem(&svcmap_tc6_tmp, &zero);
		if (!sc)
			return tc_verdict(DP_HOOK_TC_INGRESS, DP_R_CT_INSERT_FAILED, TC_ACT_SHOT);
		reason = lb6_tc_new_flow(skb, &p, sc);
		if (reason == DP_R_PASSED)
			return tc_verdict(DP_HOOK_TC_INGRESS, reason, TC_ACT_OK);
		if (reason != DP_R_TRANSLATED)
			return tc_verdict(DP_HOOK_TC_INGRESS, reason, TC_ACT_SHOT);
		ct = &sc->fwd;
	}
	if (nat_rewrite(AF_INET6, skb, &p, ct) < 0)
		return tc_verdict(DP_HOOK_TC_INGRESS, DP_R_REWRITE_FAILED, TC_ACT_SHOT);
	verdict = fib6_redirect(skb, &p, &reason);
	return tc_verdict(DP_HOOK_TC_INGRESS, reason, verdict);
}

static __noinline int tc6_egress(struct __sk_buff *skb)
{
	enum dp_reason reason;
	struct ct6_value *ct;
	struct pkt6 p;

	reason = pkt6_parse(skb, &p);
	if (reason)
		return tc_verdict(DP_HOOK_TC_EGRESS, reason, TC_ACT_OK);
	if (p.proto == IPPROTO_ICMPV6)
		return TC6_ICMP;
	ct = ct_lookup(AF_INET6, &p, CT_DIR_REPLY_OUT);
	if (!ct)
		return tc_verdict(DP_HOOK_TC_EGRESS, DP_R_PASSED, TC_ACT_OK);
	if (nat_rewrite(AF_INET6, skb, &p, ct) < 0)
		return tc_verdict(DP_HOOK_TC_EGRESS, DP_R_REWRITE_FAILED, TC_ACT_SHOT);
	return tc_verdict(DP_HOOK_TC_EGRESS, DP_R_REPLY_TRANSLATED, TC_ACT_OK);
}

#endif /* SVCMAP_LIB_TC_LB6_H */
