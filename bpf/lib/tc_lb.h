/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Service translation at tc, for traffic that no local socket made:
 * NodePort, LoadBalancer and externalIPs reached from outside the node,
 * IPv4 and IPv6 alike (the IPv6 service maps, svcmap_ct6, session affinity
 * under AFFINITY_ORIGIN_TC6, SNAT to the egress device's IPv6 address).
 *
 * Ingress of an external device:
 *  - a packet of a known flow (CT_DIR_FWD) gets the flow's translation
 *    (see lb_flow_stale() for when a flow starts afresh);
 *  - a reply to a SNATed flow (CT_DIR_REPLY_IN: backend -> node:port) is
 *    turned back into frontend -> client;
 *  - a new packet to a frontend picks a backend (with session affinity
 *    the one the client address had, see lb_affinity_select()): DNAT to
 *    it, plus SNAT to the node when the backend is on another node and the
 *    policy is Cluster (what KUBE-MARK-MASQ does), so the reply comes back
 *    here;
 *  - anything else passes untouched.
 * Translated packets leave through fib_redirect().
 *
 * Egress of the same devices: a reply from a local backend to a DNAT-only
 * client (CT_DIR_REPLY_OUT) gets the frontend back as its source.
 *
 * ICMP (ICMPv6) errors about tracked flows are translated back at both
 * hooks (icmp.h), so PMTU discovery works through a NodePort. Passed
 * untouched: the rest of ICMPv6 (neighbour discovery, router
 * advertisements, echo: counted as DP_R_OTHER_PROTO), and IPv6 packets with
 * extension headers (DP_R_IPV6_EXT_HDR, packet6.h).
 *
 * IPv4 fragments: the first is translated with its flow, and the datagram's
 * later fragments get the same addresses (frag.h), at both hooks.
 *
 * Every lookup of a flow's entry also records what the packet says about
 * the flow's state (__ct_lookup()): replies seen, FINs, RSTs. The agent's
 * conntrack GC reads that to remove finished and idle flows.
 *
 * Every packet is counted once, at its hook, under the reason that says
 * what became of it (enum dp_reason): each drop has a reason of its own.
 *
 * One core for both families (docs/architecture-datapath.md): the
 * functions take the family as a constant; tc4_*()/tc6_*() at the bottom
 * are the per-family instances the entry file calls.
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
#include "dsr.h"

/*
 * A new flow's two entries and their keys. IPv4 builds them on the stack;
 * IPv6's, 192 bytes, are more than the 512-byte BPF stack holds beside the
 * rest of tc6_ingress(), so they are built in this per-CPU scratch entry (a
 * tc program runs to its end on one CPU without another run of it there in
 * between). Not pinned: each object's own working space.
 */
struct tc4_bufs {
	struct ct_value fwd;
	struct ct_value rev;
	struct ct_key fkey;
	struct ct_key rkey;
};

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

/* Member f of the family's buffers. */
#define tc_buf(family, b, f) fam_ptr(family, struct tc4_bufs, struct tc6_scratch, b, f)
/* A field of either family's backend. */
#define be_f(family, be, f) fam_field(family, struct backend_value, struct backend6_value, be, f)
#define be_addr(family, be) fam_addr(family, struct backend_value, struct backend6_value, be, addr)

/* The family's buffers: the caller's (IPv4, on its stack) or the per-CPU scratch (IPv6). */
static __always_inline void *tc_bufs(const int family, void *stack_bufs)
{
	__u32 zero = 0;

	if (family == AF_INET6)
		return bpf_map_lookup_elem(&svcmap_tc6_tmp, &zero);
	return stack_bufs;
}

/* loadBalancerSourceRanges: does the frontend accept the client of p? */
static __always_inline int lb_source_allowed(const int family, const struct svc_value *svc, const void *p)
{
	union {
		struct src_range_key v4;
		struct src_range6_key v6;
	} k;

	if (!(svc->flags & SVC_F_SRC_RANGES))
		return 1;
	if (family == AF_INET6) {
		k.v6.prefixlen = 32 + 128; /* all of rev_nat_id, then all of the address */
		k.v6.rev_nat_id = svc->rev_nat_id;
		__builtin_memcpy(k.v6.addr, ((const struct pkt6 *)p)->saddr, sizeof(k.v6.addr));
		return bpf_map_lookup_elem(&SVCMAP_MAP_SRC_RANGE6, &k) != NULL;
	}
	k.v4.prefixlen = 32 + 32;
	k.v4.rev_nat_id = svc->rev_nat_id;
	k.v4.addr = ((const struct pkt4 *)p)->saddr;
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

static __always_inline int lb_flow_stale(const int family, const void *p, const void *v)
{
	union ct_key_any rep;
	__u8 proto = pkt_f(family, p, proto);
	int r = lb_flow_stale_tcp(proto, pkt_f(family, p, tcp_flags), ct_val_f(family, v, flags));

	if (r != LB_CHECK)
		return r;
	/* A DSR flow has no reply entry here: its answers leave the backend's node. */
	if (proto == IPPROTO_TCP && !(ct_val_f(family, v, flags) & CT_F_DSR) && !ct_reply_of(family, p, v, &rep))
		return 1;
	return !ct_backend_current(family, v);
}

/* LB_ALG_SH at tc: the client is its source address (IPv6: folded to 32
 * bits), and its source port too when the frontend asks (SVC_F_SH_PORT).
 * LB_ALG_MAGLEV: the flow (the source address, port and protocol;
 * lb_maglev_slot() adds the frontend), as Cilium's Maglev hashes the
 * 5-tuple. 0 for other algorithms. */
static __always_inline __u32 lb_tc_client_hash(const int family, const void *p, const struct svc_value *svc)
{
	__u64 v = nat_pkt_saddr32(family, p);
	__be16 sport = pkt_f(family, p, sport);

	if (svc->algorithm == LB_ALG_MAGLEV)
		return lb_hash64(v | (__u64)sport << 32 | (__u64)pkt_f(family, p, proto) << 48);
	if (svc->algorithm != LB_ALG_SH)
		return 0;
	if (svc->flags & SVC_F_SH_PORT)
		v |= (__u64)sport << 32;
	return lb_hash64(v);
}

/* The master entry of the external frontend that p is sent to, its key in *key. */
static __always_inline struct svc_value *lb_tc_service(const int family, void *key, const void *p)
{
	if (family == AF_INET6) {
		struct svc6_key *k = key;

		__builtin_memset(k, 0, sizeof(*k));
		__builtin_memcpy(k->addr, ((const struct pkt6 *)p)->daddr, sizeof(k->addr));
		k->port = pkt_f(family, p, dport);
		k->proto = pkt_f(family, p, proto);
		k->scope = SVC_SCOPE_EXT;
		return bpf_map_lookup_elem(&SVCMAP_MAP_SERVICES6, k);
	} else {
		struct svc_key *k = key;

		__builtin_memset(k, 0, sizeof(*k));
		k->addr = ((const struct pkt4 *)p)->daddr;
		k->port = pkt_f(family, p, dport);
		k->proto = pkt_f(family, p, proto);
		k->scope = SVC_SCOPE_EXT;
		return lb_lookup_service(family, k);
	}
}

/* The backend a new flow of p to frontend key gets (its id in *backend_id),
 * NULL for none. With session affinity the client is, for IPv4, its
 * address; for IPv6 its /64 and its interface id folded (svcmap_maps.h).
 * Only here, for a flow that gets a new conntrack entry: packets of known
 * flows keep the backend their entry holds. */
static __always_inline void *lb_tc_select(const int family, const void *p, void *key, const struct svc_value *svc,
					  __u32 *backend_id)
{
	__u32 hash = lb_tc_client_hash(family, p, svc);
	struct affinity_key akey = {
		.rev_nat_id = svc->rev_nat_id,
		.origin = family == AF_INET6 ? AFFINITY_ORIGIN_TC6 : AFFINITY_ORIGIN_TC,
	};

	if (!(svc->flags & SVC_F_AFFINITY))
		return lb_select_backend(family, key, svc, hash, backend_id);
	if (family == AF_INET6) {
		const struct pkt6 *p6 = p;

		akey.client_addr = p6->saddr[2] ^ p6->saddr[3];
		__builtin_memcpy(&akey.netns_cookie, p6->saddr, sizeof(akey.netns_cookie));
	} else {
		akey.client_addr = ((const struct pkt4 *)p)->saddr;
	}
	return lb_affinity_select(family, key, svc, &akey, hash, backend_id);
}

/*
 * The first packet of a flow to a frontend: choose the backend, reserve
 * the reply entry (and with it the SNAT port), then store the forward
 * entry: the translation is then the buffers' fwd. Returns DP_R_TRANSLATED
 * (translate as fwd says), DP_R_PASSED (not for a frontend: hand to the
 * stack untouched), or the reason the packet is dropped: for a frontend
 * that must not or cannot take it.
 */
static __always_inline enum dp_reason lb_tc_new_flow(const int family, struct ctx_buff *ctx, const void *p, void *bufs,
						     const int from_pod)
{
	union {
		struct svc_key v4;
		struct svc6_key v6;
	} key;
	void *fwd = tc_buf(family, bufs, fwd), *rev = tc_buf(family, bufs, rev);
	void *fkey = tc_buf(family, bufs, fkey), *rkey = tc_buf(family, bufs, rkey);
	const struct svcmap_config *cfg;
	struct svc_value *svc;
	enum dp_reason why;
	void *be, *winner;
	__u32 backend_id = 0;
	__be16 snat_port;
	__u64 now;
	int snat, dsr, hairpin, insert_failed = 0;

	svc = lb_tc_service(family, &key, p);
	if (!svc)
		return DP_R_PASSED;
	cfg = tc_config();
	if (cfg && (cfg->flags & SVCMAP_CFG_MIGRATION_HOLD))
		return DP_R_MIGRATION_HOLD;
	if (from_pod) {
		/* A pod's traffic is in-node traffic, as a socket's is
		 * (lb_internal_scope()): an ETP=Local frontend's internal twin,
		 * and the socket LB's rules (no loadBalancerSourceRanges). */
		svc = lb_internal_scope(family, &key, svc);
		if (svc->count == 0)
			return DP_R_NO_BACKEND;
	} else {
		if (!lb_source_allowed(family, svc, p))
			return DP_R_SOURCE_DENIED;
		/* With externalTrafficPolicy Local the external entry holds only this
		 * node's endpoints: none here means drop, as kube-proxy does. */
		if (svc->count == 0)
			return (svc->flags & SVC_F_ETP_LOCAL) ? DP_R_NO_LOCAL_ENDPOINT : DP_R_NO_BACKEND;
	}
	be = lb_tc_select(family, p, &key, svc, &backend_id);
	if (!be)
		return DP_R_NO_BACKEND;
	/* A pod sent to itself (hairpin): DNAT alone would hand it a packet
	 * from its own address, which its stack drops as a martian. Its source
	 * becomes the frontend's address (its port kept): the pod answers the
	 * frontend, through its veth, where the reply entry (CT_DIR_REPLY_IN,
	 * keyed by that answer) turns it back into frontend -> pod. */
	hairpin = from_pod && addr_eq(family, be_addr(family, be), pkt_addr(family, p, saddr));

	now = bpf_ktime_get_ns();
	/* A pod's flow is DNAT only: the backend answers the pod's address,
	 * whose replies pass the pod's veth, where they are translated back. */
	snat = !from_pod && !(be_f(family, be, flags) & BACKEND_F_LOCAL) && !(svc->flags & SVC_F_ETP_LOCAL);
	/* Direct server return: no SNAT, and no reply entry here (dsr.h). */
	dsr = snat && (svc->flags & SVC_F_DSR);
	snat = snat && !dsr;
	if (family == AF_INET6)
		__builtin_memset(bufs, 0, sizeof(struct tc6_scratch));
	else
		__builtin_memset(bufs, 0, sizeof(struct tc4_bufs));

	addr_copy(family, ct_val_addr(family, fwd, new_daddr), be_addr(family, be));
	ct_val_f(family, fwd, new_dport) = be_f(family, be, port);
	ct_val_f(family, fwd, backend_id) = backend_id;
	ct_val_f(family, fwd, rev_nat_id) = svc->rev_nat_id;
	ct_val_f(family, fwd, flags) = (be_f(family, be, flags) & BACKEND_F_LOCAL) ? CT_F_LOCAL : dsr ? CT_F_DSR : 0;
	/* A first packet with a FIN or RST (of a connection whose entries are
	 * gone) puts that in the new flow's state, so the GC treats it so. */
	ct_val_f(family, fwd, flags) =
		ct_state_merge(ct_val_f(family, fwd, flags),
			       ct_state_of(pkt_f(family, p, proto), pkt_f(family, p, tcp_flags), CT_DIR_FWD));
	ct_val_f(family, fwd, last_seen) = now;

	/* Replies look like frontend -> client again. */
	addr_copy(family, ct_val_addr(family, rev, new_saddr), pkt_addr(family, p, daddr));
	ct_val_f(family, rev, new_sport) = pkt_f(family, p, dport);
	ct_val_f(family, rev, backend_id) = backend_id;
	ct_val_f(family, rev, rev_nat_id) = svc->rev_nat_id;
	ct_val_f(family, rev, flags) = ct_val_f(family, fwd, flags);
	ct_val_f(family, rev, last_seen) = now;

	addr_copy(family, ct_key_addr(family, rkey, saddr), be_addr(family, be));
	ct_key_f(family, rkey, sport) = be_f(family, be, port);
	ct_key_f(family, rkey, proto) = pkt_f(family, p, proto);

	if (snat) {
		cfg = tc_config();
		if (!cfg)
			return DP_R_NO_SNAT_ADDR; /* not configured */
		/* The address of the device the flow leaves through (snat_addr.h). */
		why = snat_source(family, ctx, p, ct_val_addr(family, fwd, new_daddr), ct_val_f(family, fwd, new_dport),
				  ct_key_addr(family, rkey, daddr));
		if (why)
			return why;
		ct_key_f(family, rkey, dir) = CT_DIR_REPLY_IN;
		addr_copy(family, ct_val_addr(family, rev, new_daddr), pkt_addr(family, p, saddr));
		ct_val_f(family, rev, new_dport) = pkt_f(family, p, sport);
		ct_val_f(family, rev, flags) |= CT_F_SNAT;
		snat_port = nat_snat_reserve(family, cfg, rkey, rev, p, &insert_failed);
		if (!snat_port)
			return insert_failed ? DP_R_CT_INSERT_FAILED : DP_R_SNAT_EXHAUSTED;
		ct_val_f(family, fwd, new_sport) = snat_port;
		addr_copy(family, ct_val_addr(family, fwd, new_saddr), ct_key_addr(family, rkey, daddr));
		ct_val_f(family, fwd, flags) |= CT_F_SNAT;
	} else if (hairpin) {
		addr_copy(family, ct_key_addr(family, rkey, daddr), pkt_addr(family, p, daddr));
		ct_key_f(family, rkey, dport) = pkt_f(family, p, sport);
		ct_key_f(family, rkey, dir) = CT_DIR_REPLY_IN;
		addr_copy(family, ct_val_addr(family, rev, new_daddr), pkt_addr(family, p, saddr));
		ct_val_f(family, rev, new_dport) = pkt_f(family, p, sport);
		ct_val_f(family, rev, flags) |= CT_F_SNAT;
		if (ct_insert(family, rkey, rev, BPF_ANY) < 0)
			return DP_R_CT_INSERT_FAILED;
		addr_copy(family, ct_val_addr(family, fwd, new_saddr), pkt_addr(family, p, daddr));
		ct_val_f(family, fwd, flags) |= CT_F_SNAT;
	} else if (!dsr) {
		addr_copy(family, ct_key_addr(family, rkey, daddr), pkt_addr(family, p, saddr));
		ct_key_f(family, rkey, dport) = pkt_f(family, p, sport);
		ct_key_f(family, rkey, dir) = CT_DIR_REPLY_OUT;
		if (ct_insert(family, rkey, rev, BPF_ANY) < 0)
			return DP_R_CT_INSERT_FAILED;
	}

	ct_key_of(family, fkey, p, CT_DIR_FWD);
	ct_val_f(family, fwd, flags) = ct_count_new(ct_val_f(family, fwd, flags), svc->algorithm);
	if (ct_insert(family, fkey, fwd, BPF_NOEXIST) == 0) {
		/* The one CPU whose entry is the flow's counts it (see ct_uncount()). */
		if (ct_val_f(family, fwd, flags) & CT_F_COUNTED)
			conns_add_in(ct_conns_map(family), backend_id, CONNS_FIELD_TC, 1);
		return DP_R_TRANSLATED;
	}

	/* Another CPU created the flow first (its first packets raced ours):
	 * follow its choice, and give back what this one reserved unless the
	 * winner shares it (same local backend, same reply entry). */
	winner = bpf_map_lookup_elem(ct_map(family), fkey);
	if (dsr) {
		/* nothing reserved */
	} else if (snat || !winner ||
		   !addr_eq(family, ct_val_addr(family, winner, new_daddr), ct_val_addr(family, fwd, new_daddr)) ||
		   ct_val_f(family, winner, new_dport) != ct_val_f(family, fwd, new_dport))
		ct_delete(family, rkey);
	if (!winner)
		return DP_R_CT_INSERT_FAILED;
	if (family == AF_INET6)
		*(struct ct6_value *)fwd = *(struct ct6_value *)winner;
	else
		*(struct ct_value *)fwd = *(struct ct_value *)winner;
	return DP_R_TRANSLATED;
}

/* Counts the packet under reason at hook and returns verdict. */
static __always_inline int tc_verdict(enum dp_hook hook, enum dp_reason reason, int verdict)
{
	dp_count(hook, reason);
	return verdict;
}

/* What tc6_ingress()/tc6_egress() return for an ICMPv6 packet, which the
 * entry points then hand to tc6_icmp(): called from there, not from inside
 * them, its stack frame and theirs are never on the call chain together (the
 * verifier allows 512 bytes for the whole chain). No verdict has this value.
 * IPv4's ICMP is handled inside tc4_ingress()/tc4_egress(). */
#define TC6_ICMP 0x7fff

/*
 * An ICMP (ICMPv6) packet at ingress (ingress 1) or egress: an error about
 * a flow svcmap translated (see icmp.h) is translated back (at ingress:
 * forwarded like the flow's packets; at egress it is an error the node
 * forwards to a client about a packet of a DNAT-only flow); the rest passes
 * untouched.
 */
static __always_inline int tc_icmp(const int family, struct ctx_buff *ctx, void *p, enum dp_hook hook)
{
	int ingress = hook == DP_HOOK_TC_INGRESS;
	enum dp_reason reason = DP_R_ICMP_TRANSLATED;
	struct icmp_quote q;
	void *ct;
	int verdict;

	if (icmp_parse_quote(family, ctx, p, &q) < 0)
		return tc_verdict(hook, DP_R_OTHER_PROTO, CTX_PASS);
	if (ingress) {
		ct = icmp_flow(family, &q, CT_DIR_FWD);
		if (!ct)
			ct = icmp_flow(family, &q, CT_DIR_REPLY_IN);
	} else {
		ct = icmp_flow(family, &q, CT_DIR_REPLY_OUT);
	}
	if (!ct)
		return tc_verdict(hook, DP_R_PASSED, CTX_PASS);
	if (icmp_rewrite(family, ctx, p, &q, ct) < 0)
		return tc_verdict(hook, DP_R_REWRITE_FAILED, CTX_DROP);
	if (!ingress)
		return tc_verdict(hook, reason, CTX_PASS);
	verdict = fib_redirect(family, ctx, p, &reason);
	return tc_verdict(hook, reason, verdict);
}

/* An ICMP packet of p's family: IPv4's handled here, IPv6's returned as
 * TC6_ICMP for the entry point (tc6_icmp()). */
static __always_inline int tc_icmp_or_defer(const int family, struct ctx_buff *ctx, void *p, enum dp_hook hook)
{
	if (family == AF_INET6)
		return TC6_ICMP;
	return tc_icmp(family, ctx, p, hook);
}

/* An IPv4 fragment after the first (frag.h): the addresses its datagram's
 * first fragment got; at an external device's ingress forwarded like the
 * flow's packets, elsewhere handed to the stack. */
static __always_inline int tc4_frag_later(struct ctx_buff *ctx, struct pkt4 *p, enum dp_hook hook)
{
	int fwd = hook == DP_HOOK_TC_INGRESS || hook == DP_HOOK_VETH_INGRESS;
	enum dp_reason reason = fwd ? DP_R_TRANSLATED : DP_R_REPLY_TRANSLATED;
	struct ct_value v;
	int verdict;

	if (frag4_later(p, &v) < 0)
		return tc_verdict(hook, DP_R_FRAGMENT, CTX_PASS);
	if (nat_rewrite(AF_INET, ctx, p, &v) < 0)
		return tc_verdict(hook, DP_R_REWRITE_FAILED, CTX_DROP);
	if (hook != DP_HOOK_TC_INGRESS)
		return tc_verdict(hook, reason, CTX_PASS);
	verdict = fib_redirect(AF_INET, ctx, p, &reason);
	return tc_verdict(hook, reason, verdict);
}

/*
 * The flow of p (TCP or UDP, not a later fragment) at an external device's
 * ingress, at tc or XDP (xdp_lb.h): the conntrack entry whose translation
 * it gets, with *reason DP_R_TRANSLATED or DP_R_REPLY_TRANSLATED; or NULL
 * with *reason DP_R_PASSED (not for a frontend: untouched) or the reason it
 * is dropped.
 */
static __always_inline void *lb_ingress_flow(const int family, struct ctx_buff *ctx, void *p, void *stack_bufs,
					     enum dp_reason *reason)
{
	void *ct, *bufs;

	*reason = DP_R_TRANSLATED;
	ct = ct_lookup(family, p, CT_DIR_FWD);
	if (ct && lb_flow_stale(family, p, ct)) {
		ct_forget_flow(family, p, ct);
		ct = NULL;
	} else if (!ct && nat_snat_port(pkt_f(family, p, dport))) {
		/* A reply to a SNATed flow comes to a SNAT address (any device's:
		 * a reply may arrive on another device than its flow left by; the
		 * entry's key names the address exactly) at a port of the SNAT
		 * range (nat_snat_port()). */
		ct = ct_lookup(family, p, CT_DIR_REPLY_IN);
		*reason = DP_R_REPLY_TRANSLATED;
	}
	if (ct) {
		dsr_seen_reply(family, p, ct);
		return ct;
	}
	bufs = tc_bufs(family, stack_bufs);
	if (!bufs) {
		*reason = DP_R_CT_INSERT_FAILED;
		return NULL;
	}
	*reason = lb_tc_new_flow(family, ctx, p, bufs, 0);
	if (*reason == DP_R_PASSED) {
		ct_forget_replaced(family, p);
		dsr_note_close(family, p);
	}
	if (*reason != DP_R_TRANSLATED)
		return NULL;
	return tc_buf(family, bufs, fwd);
}

static __always_inline int tc_ingress(const int family, struct ctx_buff *ctx, void *p, void *stack_bufs)
{
	enum dp_reason reason;
	void *ct;
	int verdict;

	reason = pkt_parse(family, ctx, p);
	if (family == AF_INET6 && reason == DP_R_IPV6_EXT_HDR && dsr6_opt_here(ctx))
		return TC_DSR;
	if (reason)
		return tc_verdict(DP_HOOK_TC_INGRESS, reason, CTX_PASS);
	if (pkt_f(family, p, proto) == (family == AF_INET6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP))
		return tc_icmp_or_defer(family, ctx, p, DP_HOOK_TC_INGRESS);
	if (family == AF_INET && ((struct pkt4 *)p)->frag == PKT4_FRAG_LATER)
		return tc4_frag_later(ctx, p, DP_HOOK_TC_INGRESS);

	ct = lb_ingress_flow(family, ctx, p, stack_bufs, &reason);
	/* Not for a frontend here: to a local backend with svcmap's DSR option
	 * (dsr.h), the backend's node's part. */
	if (!ct && reason == DP_R_PASSED && family == AF_INET && dsr4_opt_here(ctx))
		return TC_DSR;
	if (!ct && reason == DP_R_PASSED)
		return tc_verdict(DP_HOOK_TC_INGRESS, reason, CTX_PASS);
	if (!ct)
		return tc_verdict(DP_HOOK_TC_INGRESS, reason, CTX_DROP);

	/* Direct server return: the frontend goes along (dsr.h), in a frame of
	 * its own (TC_DSR_ADD: tc_dsr_fwd()). */
	if ((ct_val_f(family, ct, flags) & CT_F_DSR) && dsr_carries_opt(family, p))
		return TC_DSR_ADD;
	if (family == AF_INET)
		frag4_remember(p, ct);
	if (nat_rewrite(family, ctx, p, ct) < 0)
		return tc_verdict(DP_HOOK_TC_INGRESS, DP_R_REWRITE_FAILED, CTX_DROP);
	verdict = fib_redirect(family, ctx, p, &reason);
	return tc_verdict(DP_HOOK_TC_INGRESS, reason, verdict);
}

/*
 * The backend's node, ingress of an external device: a packet whose first
 * option claims to be svcmap's DSR option (TC_DSR). A valid one, naming a
 * DSR frontend, is removed and its flow recorded (dsr.h), and the packet,
 * client -> backend as the ingress node DNATed it, goes on to the stack and
 * the local backend; anything else is dropped, counted.
 */
static __always_inline int tc_dsr_in(const int family, struct ctx_buff *ctx, void *p)
{
	const enum dp_hook hook = DP_HOOK_TC_INGRESS;
	struct svc_value *svc = NULL;
	enum dp_reason reason;
	__be32 addr[4] = {};
	__be16 port = 0;

	reason = dsr_strip(family, ctx, addr, &port, &svc);
	if (reason)
		return tc_verdict(hook, reason, CTX_DROP);
	/* dsr_strip() checked what the parse needs: a failure here is the rewrite's. */
	if (pkt_parse(family, ctx, p) || !svc)
		return tc_verdict(hook, DP_R_REWRITE_FAILED, CTX_DROP);
	if (dsr_record(family, p, addr, port, svc) < 0)
		return tc_verdict(hook, DP_R_CT_INSERT_FAILED, CTX_DROP);
	return tc_verdict(hook, DP_R_DSR_ACCEPTED, CTX_PASS);
}

/*
 * The ingress node: a DSR flow's packet that carries the frontend
 * (TC_DSR_ADD from tc_ingress(), which found or made its entry). Parsed and
 * looked up again here, so that the option's insertion does not double the
 * paths the verifier walks through tc_ingress(): only these packets (a TCP
 * flow's SYN, UDP's datagrams) pay for it.
 */
static __always_inline int tc_dsr_fwd(const int family, struct ctx_buff *ctx, void *p)
{
	const enum dp_hook hook = DP_HOOK_TC_INGRESS;
	enum dp_reason reason = DP_R_TRANSLATED;
	void *ct;
	int verdict;

	if (pkt_parse(family, ctx, p))
		return tc_verdict(hook, DP_R_REWRITE_FAILED, CTX_DROP);
	ct = ct_lookup(family, p, CT_DIR_FWD);
	if (!ct)
		return tc_verdict(hook, DP_R_CT_INSERT_FAILED, CTX_DROP); /* evicted in between */
	if (dsr_add(family, ctx, p) < 0)
		return tc_verdict(hook, DP_R_DSR_OPT_FAILED, CTX_DROP);
	if (family == AF_INET)
		frag4_remember(p, ct);
	if (nat_rewrite(family, ctx, p, ct) < 0)
		return tc_verdict(hook, DP_R_REWRITE_FAILED, CTX_DROP);
	verdict = fib_redirect(family, ctx, p, &reason);
	return tc_verdict(hook, reason, verdict);
}

/* Egress of an external device (hook DP_HOOK_TC_EGRESS) or of a pod's veth
 * towards the pod (DP_HOOK_VETH_EGRESS): a reply to a DNAT-only client gets
 * the frontend back as its source. */
static __always_inline int tc_egress(const int family, struct ctx_buff *ctx, void *p, enum dp_hook hook)
{
	enum dp_reason reason;
	void *ct;

	reason = pkt_parse(family, ctx, p);
	if (reason)
		return tc_verdict(hook, reason, CTX_PASS);
	if (pkt_f(family, p, proto) == (family == AF_INET6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP))
		return tc_icmp_or_defer(family, ctx, p, hook);
	if (family == AF_INET && ((struct pkt4 *)p)->frag == PKT4_FRAG_LATER)
		return tc4_frag_later(ctx, p, hook);
	ct = ct_lookup(family, p, CT_DIR_REPLY_OUT);
	if (!ct)
		return tc_verdict(hook, DP_R_PASSED, CTX_PASS);
	if (family == AF_INET)
		frag4_remember(p, ct);
	if (nat_rewrite(family, ctx, p, ct) < 0)
		return tc_verdict(hook, DP_R_REWRITE_FAILED, CTX_DROP);
	return tc_verdict(hook, DP_R_REPLY_TRANSLATED, CTX_PASS);
}

/*
 * Ingress of a pod's veth (its host side): what the pod sends. A packet of
 * a known flow gets the flow's translation; a new one to a frontend picks a
 * backend with the same rules as the socket LB (in-node traffic: the
 * internal scope; session affinity and the hashes by the pod's address) and
 * is DNATed to it; anything else passes untouched (its cost: the conntrack
 * and frontend lookups). Translated packets go on to the stack, which
 * routes them (and the node's firewall sees the backend, as after
 * kube-proxy's DNAT). A pod whose flow lands on itself (hairpin) is
 * SNATed to the frontend's address, and its answers translated back here.
 * ICMP from a pod passes untouched.
 */
static __always_inline int veth_from_pod(const int family, struct ctx_buff *ctx, void *p, void *stack_bufs)
{
	const enum dp_hook hook = DP_HOOK_VETH_INGRESS;
	enum dp_reason reason;
	void *ct, *bufs;

	reason = pkt_parse(family, ctx, p);
	if (reason)
		return tc_verdict(hook, reason, CTX_PASS);
	if (pkt_f(family, p, proto) == (family == AF_INET6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP))
		return tc_verdict(hook, DP_R_OTHER_PROTO, CTX_PASS);
	if (family == AF_INET && ((struct pkt4 *)p)->frag == PKT4_FRAG_LATER)
		return tc4_frag_later(ctx, p, hook);

	reason = DP_R_TRANSLATED;
	ct = ct_lookup(family, p, CT_DIR_FWD);
	if (ct && lb_flow_stale(family, p, ct)) {
		ct_forget_flow(family, p, ct);
		ct = NULL;
	} else if (!ct) {
		/* A hairpin flow's answer: the pod to the frontend's address. */
		ct = ct_lookup(family, p, CT_DIR_REPLY_IN);
		reason = DP_R_REPLY_TRANSLATED;
	}
	if (!ct) {
		bufs = tc_bufs(family, stack_bufs);
		if (!bufs)
			return tc_verdict(hook, DP_R_CT_INSERT_FAILED, CTX_DROP);
		reason = lb_tc_new_flow(family, ctx, p, bufs, 1);
		if (reason == DP_R_PASSED) {
			ct_forget_replaced(family, p);
			return tc_verdict(hook, reason, CTX_PASS);
		}
		if (reason != DP_R_TRANSLATED)
			return tc_verdict(hook, reason, CTX_DROP);
		ct = tc_buf(family, bufs, fwd);
	}
	if (family == AF_INET)
		frag4_remember(p, ct);
	if (nat_rewrite(family, ctx, p, ct) < 0)
		return tc_verdict(hook, DP_R_REWRITE_FAILED, CTX_DROP);
	return tc_verdict(hook, reason, CTX_PASS);
}

/* The per-family instances the entry file (tc.c) dispatches to: each a
 * function of its own (not inlined), so that their stacks need not fit in
 * one frame. */
static __noinline int tc4_ingress(struct ctx_buff *ctx)
{
	struct tc4_bufs bufs;
	struct pkt4 p;

	return tc_ingress(AF_INET, ctx, &p, &bufs);
}

static __noinline int tc6_ingress(struct ctx_buff *ctx)
{
	struct pkt6 p;

	return tc_ingress(AF_INET6, ctx, &p, NULL);
}

static __noinline int tc4_egress(struct ctx_buff *ctx, enum dp_hook hook)
{
	struct pkt4 p;

	return tc_egress(AF_INET, ctx, &p, hook);
}

static __noinline int tc6_egress(struct ctx_buff *ctx, enum dp_hook hook)
{
	struct pkt6 p;

	return tc_egress(AF_INET6, ctx, &p, hook);
}

/* A packet tc4_ingress()/tc6_ingress() returned as TC_DSR. */
static __noinline int tc4_dsr_in(struct ctx_buff *ctx)
{
	struct pkt4 p;

	return tc_dsr_in(AF_INET, ctx, &p);
}

static __noinline int tc6_dsr_in(struct ctx_buff *ctx)
{
	struct pkt6 p;

	return tc_dsr_in(AF_INET6, ctx, &p);
}

/* A packet tc4_ingress()/tc6_ingress() returned as TC_DSR_ADD. */
static __noinline int tc4_dsr_fwd(struct ctx_buff *ctx)
{
	struct pkt4 p;

	return tc_dsr_fwd(AF_INET, ctx, &p);
}

static __noinline int tc6_dsr_fwd(struct ctx_buff *ctx)
{
	struct pkt6 p;

	return tc_dsr_fwd(AF_INET6, ctx, &p);
}

/* The pod veth's ingress instances (veth.c). */
static __noinline int veth4_from_pod(struct ctx_buff *ctx)
{
	struct tc4_bufs bufs;
	struct pkt4 p;

	return veth_from_pod(AF_INET, ctx, &p, &bufs);
}

static __noinline int veth6_from_pod(struct ctx_buff *ctx)
{
	struct pkt6 p;

	return veth_from_pod(AF_INET6, ctx, &p, NULL);
}

/* An ICMPv6 packet that tc6_ingress()/tc6_egress() deferred (TC6_ICMP). */
static __noinline int tc6_icmp(struct ctx_buff *ctx, enum dp_hook hook)
{
	enum dp_reason reason;
	struct pkt6 p;

	reason = pkt6_parse(ctx, &p);
	if (reason)
		return tc_verdict(hook, reason, CTX_PASS);
	return tc_icmp(AF_INET6, ctx, &p, hook);
}

#endif /* SVCMAP_LIB_TC_LB_H */
