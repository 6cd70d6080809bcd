/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Service translation at tc, for traffic that no local socket made:
 * NodePort, LoadBalancer and externalIPs reached from outside the node.
 *
 * Ingress of an external device:
 *  - a packet of a known flow (CT_DIR_FWD) gets the flow's translation
 *    (see lb4_flow_stale() for when a flow starts afresh);
 *  - a reply to a SNATed flow (CT_DIR_REPLY_IN: backend -> node:port) is
 *    turned back into frontend -> client;
 *  - a new packet to a frontend picks a backend (with session affinity
 *    the one the client address had, see lb4_affinity_select()): DNAT to
 *    it, plus SNAT to the node when the backend is on another node and the
 *    policy is Cluster (what KUBE-MARK-MASQ does), so the reply comes back
 *    here;
 *  - anything else passes untouched.
 * Translated packets leave through fib4_redirect().
 *
 * Egress of the same devices: a reply from a local backend to a DNAT-only
 * client (CT_DIR_REPLY_OUT) gets the frontend back as its source.
 *
 * ICMP errors about tracked flows are translated back at both hooks
 * (icmp.h), so PMTU discovery works through a NodePort.
 *
 * IP fragments: the first is translated with its flow, and the datagram's
 * later fragments get the same addresses (frag.h), at both hooks.
 *
 * Every lookup of a flow's entry also records what the packet says about
 * the flow's state (ct_lookup()): replies seen, FINs, RSTs. The agent's
 * conntrack GC reads that to remove finished and idle flows.
 *
 * Every packet is counted once, at its hook, under the reason that says
 * what became of it (enum dp_reason): each drop has a reason of its own.
 */
#ifndef SVCMAP_LIB_TC_LB_H
#define SVCMAP_LIB_TC_LB_H

#include "lb.h"
#include "ct.h"
#include "nat.h"
#include "fib.h"
#include "icmp.h"
#include "frag.h"
#include "snat_addr.h"

/* loadBalancerSourceRanges: does the frontend accept this client? */
static __always_inline int lb4_source_allowed(const struct svc_value *svc, __be32 saddr)
{
	struct src_range_key k = {
		.prefixlen = 64, /* all of rev_nat_id, then all of the address */
		.rev_nat_id = svc->rev_nat_id,
		.addr = saddr,
	};

	if (!(svc->flags & SVC_F_SRC_RANGES))
		return 1;
	return bpf_map_lookup_elem(&SVCMAP_MAP_SRC_RANGE, &k) != NULL;
}

/*
 * A known flow keeps its backend for as long as it lasts, also after the
 * backend left the service (kube-proxy lets established connections to a
 * terminating endpoint finish too), with these exceptions that start the
 * flow afresh:
 *  - a TCP SYN without ACK on a flow that saw a FIN or an RST: the old
 *    connection is over and the client reuses its port for a new one (what
 *    netfilter does when a SYN meets a closed conntrack entry), which then
 *    picks its backend and SNAT port anew;
 *  - a TCP SYN without ACK on a flow whose reply entry is gone or is
 *    another flow's (ct_reply_of()): the backend's answers would reach the
 *    node's stack untranslated and be reset, so every retransmitted SYN
 *    would fail the same way until the client gave up. The agent's GC can
 *    remove a reply entry that a new flow took over an instant before (it
 *    reads the map, then deletes what was idle; BPF has no conditional
 *    delete), and the LRU can evict one; the SYN's retransmit restores it;
 *  - when the flow's backend is no longer in the backends map as it was
 *    chosen (its id removed or reused):
 *     - a TCP SYN without ACK: a new connection on a reused port must not
 *       go to a backend that is gone (a retransmit of the first SYN still
 *       finds its backend and stays);
 *     - any UDP datagram: UDP has no connection to finish, so a client that
 *       keeps its port (DNS resolvers, statsd) moves on, as kube-proxy's
 *       clearing of UDP conntrack entries for removed endpoints does.
 */
/* The part of the rules below that needs no lookup, either family: for TCP,
 * LB_KEEP for anything but a SYN without ACK, LB_STALE for one on a flow that
 * saw a FIN or RST; else LB_CHECK (look at the reply entry and the backend). */
#define LB_KEEP  0
#define LB_STALE 1
#define LB_CHECK 2

static __always_inline int lb_flow_stale_tcp(__u8 proto, __u8 tcp_flags, __u8 ct_flags)
{
	if (proto != IPPROTO_TCP)
		return LB_CHECK;
	if ((tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) != TCP_FLAG_SYN)
		return LB_KEEP;
	if (ct_flags & (CT_F_CLOSING | CT_F_FIN_FWD | CT_F_FIN_REPLY))
		return LB_STALE;
	return LB_CHECK;
}

static __always_inline int lb4_flow_stale(const struct pkt4 *p, const struct ct_value *v)
{
	struct ct_key rep;
	int r = lb_flow_stale_tcp(p->proto, p->tcp_flags, v->flags);

	if (r != LB_CHECK)
		return r;
	if (p->proto == IPPROTO_TCP && !ct_reply_of(AF_INET, p, v, &rep))
		return 1;
	return !ct_backend_current(AF_INET, v);
}

/* LB_ALG_SH at tc: the client is its source address, and its source port
 * too when the frontend asks (SVC_F_SH_PORT). LB_ALG_MAGLEV: the flow (the
 * source address, port and protocol; lb4_maglev_slot() adds the frontend),
 * as Cilium's Maglev hashes the 5-tuple. 0 for other algorithms. */
static __always_inline __u32 lb_tc_client_hash(__u32 saddr, __be16 sport, __u8 proto, const struct svc_value *svc)
{
	__u64 v = saddr;

	if (svc->algorithm == LB_ALG_MAGLEV)
		return lb_hash64(v | (__u64)sport << 32 | (__u64)proto << 48);
	if (svc->algorithm != LB_ALG_SH)
		return 0;
	if (svc->flags & SVC_F_SH_PORT)
		v |= (__u64)sport << 32;
	return lb_hash64(v);
}

static __always_inline __u32 lb4_tc_client_hash(const struct pkt4 *p, const struct svc_value *svc)
{
	return lb_tc_client_hash(p->saddr, p->sport, p->proto, svc);
}

/*
 * The first packet of a flow to a frontend: choose the backend, reserve
 * the reply entry (and with it the SNAT port), then store the forward
 * entry, and put the translation in *out. Returns DP_R_TRANSLATED (translate
 * as *out says), DP_R_PASSED (not for a frontend: hand to the stack
 * untouched), or the reason the packet is dropped: for a frontend that must
 * not or cannot take it.
 */
static __always_inline enum dp_reason lb4_tc_new_flow(struct __sk_buff *skb, const struct pkt4 *p,
						      struct ct_value *out)
{
	struct svc_key key = {
		.addr = p->daddr,
		.port = p->dport,
		.proto = p->proto,
		.scope = SVC_SCOPE_EXT,
	};
	const struct svcmap_config *cfg;
	struct ct_value fwd = {}, rev = {};
	struct ct_key fkey, rkey = {};
	struct backend_value *be;
	struct ct_value *winner;
	struct svc_value *svc;
	enum dp_reason why;
	__be32 snat_addr = 0;
	__u32 backend_id = 0;
	__u64 now;
	int snat, insert_failed = 0;

	svc = lb4_lookup_service(&key);
	if (!svc)
		return DP_R_PASSED;
	if (!lb4_source_allowed(svc, p->saddr))
		return DP_R_SOURCE_DENIED;
	/* With externalTrafficPolicy Local the external entry holds only this
	 * node's endpoints: none here means drop, as kube-proxy does. */
	if (svc->count == 0)
		return (svc->flags & SVC_F_ETP_LOCAL) ? DP_R_NO_LOCAL_ENDPOINT : DP_R_NO_BACKEND;
	if (svc->flags & SVC_F_AFFINITY) {
		/* Only here, for a flow that gets a new conntrack entry: packets
		 * of known flows keep the backend their entry holds. */
		struct affinity_key akey = {
			.client_addr = p->saddr,
			.rev_nat_id = svc->rev_nat_id,
			.origin = AFFINITY_ORIGIN_TC,
		};

		be = lb4_affinity_select(&key, svc, &akey, lb4_tc_client_hash(p, svc), &backend_id);
	} else {
		be = lb4_select_backend(&key, svc, lb4_tc_client_hash(p, svc), &backend_id);
	}
	if (!be)
		return DP_R_NO_BACKEND;

	now = bpf_ktime_get_ns();
	snat = !(be->flags & BACKEND_F_LOCAL) && !(svc->flags & SVC_F_ETP_LOCAL);

	fwd.new_daddr = be->addr;
	fwd.new_dport = be->port;
	fwd.backend_id = backend_id;
	fwd.rev_nat_id = svc->rev_nat_id;
	fwd.flags = (be->flags & BACKEND_F_LOCAL) ? CT_F_LOCAL : 0;
	/* A first packet with a FIN or RST (of a connection whose entries are
	 * gone) puts that in the new flow's state, so the GC treats it so. */
	fwd.flags = ct_state_merge(fwd.flags, ct_state_of(p->proto, p->tcp_flags, CT_DIR_FWD));
	fwd.last_seen = now;

	/* Replies look like frontend -> client again. */
	rev.new_saddr = p->daddr;
	rev.new_sport = p->dport;
	rev.backend_id = backend_id;
	rev.rev_nat_id = svc->rev_nat_id;
	rev.flags = fwd.flags;
	rev.last_seen = now;

	rkey.saddr = be->addr;
	rkey.sport = be->port;
	rkey.proto = p->proto;

	if (snat) {
		cfg = tc_config();
		if (!cfg)
			return DP_R_NO_SNAT_ADDR; /* not configured */
		/* The address of the device the flow leaves through (snat_addr.h). */
		why = snat4_source(skb, p, be->addr, be->port, &snat_addr);
		if (why)
			return why;
		rkey.daddr = snat_addr;
		rkey.dir = CT_DIR_REPLY_IN;
		rev.new_daddr = p->saddr;
		rev.new_dport = p->sport;
		rev.flags |= CT_F_SNAT;
		fwd.new_sport = nat_snat_reserve(AF_INET, cfg, &rkey, &rev, p, &insert_failed);
		if (!fwd.new_sport)
			return insert_failed ? DP_R_CT_INSERT_FAILED : DP_R_SNAT_EXHAUSTED;
		fwd.new_saddr = snat_addr;
		fwd.flags |= CT_F_SNAT;
	} else {
		rkey.daddr = p->saddr;
		rkey.dport = p->sport;
		rkey.dir = CT_DIR_REPLY_OUT;
		if (ct_insert(AF_INET, &rkey, &rev, BPF_ANY) < 0)
			return DP_R_CT_INSERT_FAILED;
	}

	ct_key_of(AF_INET, &fkey, p, CT_DIR_FWD);
	fwd.flags = ct_count_new(fwd.flags, svc->algorithm);
	if (ct_insert(AF_INET, &fkey, &fwd, BPF_NOEXIST) == 0) {
		/* The one CPU whose entry is the flow's counts it (see ct_uncount()). */
		if (fwd.flags & CT_F_COUNTED)
			conns_add(backend_id, CONNS_FIELD_TC, 1);
		*out = fwd;
		return DP_R_TRANSLATED;
	}

	/* Another CPU created the flow first (its first packets raced ours):
	 * follow its choice, and give back what this one reserved unless the
	 * winner shares it (same local backend, same reply entry). */
	winner = bpf_map_lookup_elem(&SVCMAP_MAP_CT, &fkey);
	if (snat || !winner || winner->new_daddr != fwd.new_daddr ||
	    winner->new_dport != fwd.new_dport)
		ct_delete(AF_INET, &rkey);
	if (!winner)
		return DP_R_CT_INSERT_FAILED;
	*out = *winner;
	return DP_R_TRANSLATED;
}

/* Counts the packet under reason at hook and returns verdict. */
static __always_inline int tc_verdict(enum dp_hook hook, enum dp_reason reason, int verdict)
{
	dp_count(hook, reason);
	return verdict;
}

/*
 * An ICMP packet at ingress: an error about a flow that svcmap translated
 * (see icmp.h) is translated back and forwarded like the flow's packets;
 * anything else passes untouched.
 */
static __always_inline int tc4_icmp_ingress(struct __sk_buff *skb, struct pkt4 *p)
{
	enum dp_reason reason = DP_R_ICMP_TRANSLATED;
	struct icmp_quote q;
	struct ct_value *ct;
	struct ct_value v;
	int verdict;

	if (icmp_parse_quote(AF_INET, skb, p, &q) < 0)
		return tc_verdict(DP_HOOK_TC_INGRESS, DP_R_OTHER_PROTO, TC_ACT_OK);
	ct = icmp_flow(AF_INET, &q, CT_DIR_FWD);
	if (!ct)
		ct = icmp_flow(AF_INET, &q, CT_DIR_REPLY_IN);
	if (!ct)
		return tc_verdict(DP_HOOK_TC_INGRESS, DP_R_PASSED, TC_ACT_OK);
	v = *ct;
	if (icmp_rewrite(AF_INET, skb, p, &q, &v) < 0)
		return tc_verdict(DP_HOOK_TC_INGRESS, DP_R_REWRITE_FAILED, TC_ACT_SHOT);
	verdict = fib4_redirect(skb, p, &reason);
	return tc_verdict(DP_HOOK_TC_INGRESS, reason, verdict);
}

static __noinline int tc4_ingress(struct __sk_buff *skb)
{
	enum dp_reason reason;
	struct ct_value xlate;
	struct ct_value *ct;
	struct pkt4 p;
	int verdict;

	reason = pkt4_parse(skb, &p);
	if (reason)
		return tc_verdict(DP_HOOK_TC_INGRESS, reason, TC_ACT_OK);
	if (p.proto == IPPROTO_ICMP)
		return tc4_icmp_ingress(skb, &p);
	if (p.frag == PKT4_FRAG_LATER) {
		if (frag4_later(&p, &xlate) < 0)
			return tc_verdict(DP_HOOK_TC_INGRESS, DP_R_FRAGMENT, TC_ACT_OK);
		if (nat_rewrite(AF_INET, skb, &p, &xlate) < 0)
			return tc_verdict(DP_HOOK_TC_INGRESS, DP_R_REWRITE_FAILED, TC_ACT_SHOT);
		reason = DP_R_TRANSLATED;
		verdict = fib4_redirect(skb, &p, &reason);
		return tc_verdict(DP_HOOK_TC_INGRESS, reason, verdict);
	}

	reason = DP_R_TRANSLATED;
	ct = ct_lookup(AF_INET, &p, CT_DIR_FWD);
	if (ct && lb4_flow_stale(&p, ct)) {
		ct_forget_flow(AF_INET, &p, ct);
		ct = NULL;
	} else if (!ct && nat_snat_port(p.dport)) {
		/* A reply to a SNATed flow comes to a SNAT address (any device's:
		 * a reply may arrive on another device than its flow left by; the
		 * entry's key names the address exactly) at a port of the SNAT
		 * range (nat_snat_port()). */
		ct = ct_lookup(AF_INET, &p, CT_DIR_REPLY_IN);
		reason = DP_R_REPLY_TRANSLATED;
	}
	if (ct) {
		xlate = *ct;
	} else {
		reason = lb4_tc_new_flow(skb, &p, &xlate);
		if (reason == DP_R_PASSED)
			return tc_verdict(DP_HOOK_TC_INGRESS, reason, TC_ACT_OK);
		if (reason != DP_R_TRANSLATED)
			return tc_verdict(DP_HOOK_TC_INGRESS, reason, TC_ACT_SHOT);
	}

	frag4_remember(&p, &xlate);
	if (nat_rewrite(AF_INET, skb, &p, &xlate) < 0)
		return tc_verdict(DP_HOOK_TC_INGRESS, DP_R_REWRITE_FAILED, TC_ACT_SHOT);
	verdict = fib4_redirect(skb, &p, &reason);
	return tc_verdict(DP_HOOK_TC_INGRESS, reason, verdict);
}

static __noinline int tc4_egress(struct __sk_buff *skb)
{
	enum dp_reason reason;
	struct ct_value *ct;
	struct pkt4 p;

	reason = pkt4_parse(skb, &p);
	if (reason)
		return tc_verdict(DP_HOOK_TC_EGRESS, reason, TC_ACT_OK);
	if (p.proto == IPPROTO_ICMP) {
		/* An error the node forwards to a client about a packet of a
		 * DNAT-only flow (client -> local backend): see icmp.h. */
		struct icmp_quote q;
		struct ct_value v;

		if (icmp_parse_quote(AF_INET, skb, &p, &q) < 0)
			return tc_verdict(DP_HOOK_TC_EGRESS, DP_R_OTHER_PROTO, TC_ACT_OK);
		ct = icmp_flow(AF_INET, &q, CT_DIR_REPLY_OUT);
		if (!ct)
			return tc_verdict(DP_HOOK_TC_EGRESS, DP_R_PASSED, TC_ACT_OK);
		v = *ct;
		if (icmp_rewrite(AF_INET, skb, &p, &q, &v) < 0)
			return tc_verdict(DP_HOOK_TC_EGRESS, DP_R_REWRITE_FAILED, TC_ACT_SHOT);
		return tc_verdict(DP_HOOK_TC_EGRESS, DP_R_ICMP_TRANSLATED, TC_ACT_OK);
	}
	if (p.frag == PKT4_FRAG_LATER) {
		struct ct_value v;

		if (frag4_later(&p, &v) < 0)
			return tc_verdict(DP_HOOK_TC_EGRESS, DP_R_FRAGMENT, TC_ACT_OK);
		if (nat_rewrite(AF_INET, skb, &p, &v) < 0)
			return tc_verdict(DP_HOOK_TC_EGRESS, DP_R_REWRITE_FAILED, TC_ACT_SHOT);
		return tc_verdict(DP_HOOK_TC_EGRESS, DP_R_REPLY_TRANSLATED, TC_ACT_OK);
	}
	ct = ct_lookup(AF_INET, &p, CT_DIR_REPLY_OUT);
	if (!ct)
		return tc_verdict(DP_HOOK_TC_EGRESS, DP_R_PASSED, TC_ACT_OK);
	frag4_remember(&p, ct);
	if (nat_rewrite(AF_INET, skb, &p, ct) < 0)
		return tc_verdict(DP_HOOK_TC_EGRESS, DP_R_REWRITE_FAILED, TC_ACT_SHOT);
	return tc_verdict(DP_HOOK_TC_EGRESS, DP_R_REPLY_TRANSLATED, TC_ACT_OK);
}

#endif /* SVCMAP_LIB_TC_LB_H */
