/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Address and port translation: applying a conntrack entry's rewrite to a
 * packet, and choosing a SNAT source port that no other flow to the same
 * backend holds.
 */
#ifndef SVCMAP_LIB_NAT_H
#define SVCMAP_LIB_NAT_H

#include "csum.h"
#include "ct.h"

/* The agent always writes the SNAT port range (SNAT_PORT_MIN/MAX in
 * src/agent/tc-datapath.ts, which is where it is chosen). These only stand
 * in for a config without a usable range (0 or inverted), and are the same
 * ports: above Linux's default ephemeral range (32768-60999). */
#ifndef EEXIST
#define EEXIST 17
#endif

#define SNAT_PORT_MIN_FALLBACK 61000
#define SNAT_PORT_MAX_FALLBACK 65535

/* Candidate ports probed for a new SNAT flow before it is dropped
 * (DP_R_SNAT_EXHAUSTED), as Cilium's SNAT_COLLISION_RETRIES. */
#define SNAT_PORT_TRIES 32

/*
 * The datapath's TIME_WAIT: how long a closed TCP flow (CT_F_CLOSING: an
 * RST, or a FIN from each side) keeps its SNAT port after its last packet
 * before a new flow to the same backend may take the port over
 * (nat4_snat_take_over()). While it runs, late packets of the old flow (the
 * last ACK, data in flight behind an RST, a FIN retransmitted because the
 * last ACK was lost) still find the old flow's entry and are translated for
 * the old client, never for a new one; every packet of a closed flow
 * restarts it (ct4_lookup()).
 *
 * Two holds, in the spirit of netfilter's NAT (nf_nat_used_tuple_harder():
 * in its last few attempts, for a new TCP connection, it evicts a SNATed
 * conntrack entry in TIME_WAIT or CLOSE that holds the tuple, when the new
 * connection's sequence numbers are past the old one's; we keep no
 * sequence numbers, so a short hold stands in for that check):
 *  - SNAT_CLOSED_HOLD_NS (1 s), in the first tries: covers the last ACK,
 *    packets in flight, and the first two retransmissions of a lost FIN at
 *    Linux's minimum RTO (200 ms, then 400 ms more). Ports are given back
 *    this way at up to (ports in range) per second per backend: 4536/s with
 *    the default 61000-65535.
 *  - SNAT_CLOSED_HOLD_MIN_NS (10 ms), in the last SNAT_PORT_TRIES_LAST tries
 *    and only for a TCP SYN: when the range is busy, a port whose flow
 *    closed and has been quiet for 10 ms is used rather than dropping the
 *    SYN. What can go wrong then is what a drop costs too: a retransmitted
 *    FIN of the old flow reaches the new client (which ignores or resets
 *    it), or the backend, still waiting for the old flow's last ACK,
 *    answers the new SYN with an ACK that the client resets, and the
 *    client's SYN retransmit (1 s) goes through.
 * The endpoints keep their own TIME_WAIT (the client's, for its own port).
 */
#define SNAT_CLOSED_HOLD_NS 1000000000ULL
#define SNAT_CLOSED_HOLD_MIN_NS 10000000ULL
#define SNAT_PORT_TRIES_LAST 8

/*
 * A closed flow's reply entry with no forward entry (the agent's conntrack
 * GC removes a flow's forward entry first, then its reply entry), quiet for
 * this long, is left to the GC and not taken over. The GC reads the map,
 * then deletes what was idle for the closing lifetime (10 s;
 * SNAT_TAKE_OVER_MAX_MS in src/agent/ct-gc.ts mirrors this limit and the
 * lifetime must be longer, ct-gc.test.ts checks both); a reply entry taken
 * over between that read and its delete would be deleted under the new
 * flow, whose backend's next packet then reaches the node's stack
 * untranslated and is reset (seen as clients timing out under load). A
 * take-over of a flow whose forward entry is still there removes that entry,
 * and the GC, finding it gone at its delete, leaves the reply entry alone
 * (repliesToDelete()); once the GC has removed the forward entry, this limit
 * keeps the datapath off the reply entry (the GC judged it idle for longer,
 * at a time read before the map). A lone reply entry (its forward entry
 * evicted) quiet for longer waits for the GC's next pass.
 */

/*
 * Rewrites the fields that v sets (non-zero and different from the
 * packet's), with checksums, and updates p to the new tuple. 0 or a
 * negative errno; on error the packet may be half rewritten and must be
 * dropped.
 */
static __always_inline int nat4_rewrite(struct __sk_buff *skb, struct pkt4 *p,
					const struct ct_value *v)
{
	int err;

	if (v->new_saddr && v->new_saddr != p->saddr) {
		err = csum4_store_addr(skb, p, IP4_SADDR_OFF, p->saddr, v->new_saddr);
		if (err < 0)
			return err;
		p->saddr = v->new_saddr;
	}
	if (v->new_daddr && v->new_daddr != p->daddr) {
		err = csum4_store_addr(skb, p, IP4_DADDR_OFF, p->daddr, v->new_daddr);
		if (err < 0)
			return err;
		p->daddr = v->new_daddr;
	}
	if (v->new_sport && v->new_sport != p->sport) {
		err = csum4_store_port(skb, p, p->l4_off + L4_SPORT_OFF, p->sport, v->new_sport);
		if (err < 0)
			return err;
		p->sport = v->new_sport;
	}
	if (v->new_dport && v->new_dport != p->dport) {
		err = csum4_store_port(skb, p, p->l4_off + L4_DPORT_OFF, p->dport, v->new_dport);
		if (err < 0)
			return err;
		p->dport = v->new_dport;
	}
	return 0;
}

/* The SNAT source port range of cfg, host order, inclusive: the one place
 * that reads it, so choosing a port and recognising a reply agree. */
static __always_inline void nat4_snat_range(const struct svcmap_config *cfg,
					    __u32 *min, __u32 *max)
{
	*min = cfg->snat_port_min;
	*max = cfg->snat_port_max;
	if (*min == 0 || *max < *min) {
		*min = SNAT_PORT_MIN_FALLBACK;
		*max = SNAT_PORT_MAX_FALLBACK;
	}
}

/* A packet to this port (network order) at a SNAT address may be a reply
 * to a SNATed flow: it is in the configured SNAT range. The node's own
 * traffic (ssh, kubelet, ...) uses other ports and skips the reply lookup. */
static __always_inline int nat_snat_port(__be16 port)
{
	const struct svcmap_config *cfg = tc_config();
	__u32 min, max, p = bpf_ntohs(port);

	if (!cfg)
		return 0;
	nat4_snat_range(cfg, &min, &max);
	return p >= min && p <= max;
}

/* A hash of the flow a SNAT port is chosen for: client address and port,
 * backend address and port, protocol (murmur3's finalizer steps). */
static __always_inline __u32 nat4_flow_hash(const struct ct_key *reply, __be32 client_addr,
					    __be16 client_port)
{
	__u32 h = 0x9e3779b9;

	h ^= (__u32)client_addr;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h ^= ((__u32)client_port << 16) | reply->sport;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	h ^= (__u32)reply->saddr;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h ^= reply->proto;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

/* The first SNAT port a flow tries: the client's own when it is in
 * [min, max] (ports stay stable where they can, as with netfilter's
 * masquerade), else one from the flow's hash. Host order. */
static __always_inline __u32 nat_first_port(__u32 min, __u32 max, __be16 client_port, __u32 hash)
{
	__u32 port = bpf_ntohs(client_port);

	if (port < min || port > max)
		port = min + hash % (max - min + 1);
	return port;
}

/*
 * The port in reply->dport is held by another flow's reply entry: take it
 * over if that flow is a TCP flow that closed (CT_F_CLOSING) and has been
 * quiet for `hold` (both of its entries: each direction's packets refresh
 * their own; a reply entry alone, for less than SNAT_TAKE_OVER_MAX_NS:
 * older ones are the GC's). Exactly one CPU wins an entry: the one whose
 * compare-and-swap of the reply entry's last_seen succeeds (a packet from
 * the backend refreshing it meanwhile makes it fail too, and keeps the port
 * with the old flow; a packet from the old client in the instant between the check
 * of its entry and the swap starts a flow of its own). The winner removes
 * the old flow's forward entry (when it still names this port, so that the
 * old client's next packet starts a flow of its own rather than landing on
 * the new one), then writes the new reply entry over the old. 1 when the
 * port is now the new flow's.
 */
/*
 * The timing rule of a take-over, either family: the old flow's reply entry
 * (its flags, last seen at `seen`) and its forward entry (fwd_seen, or none:
 * has_fwd 0) must both have been quiet for `hold`, and a reply entry alone
 * for less than SNAT_TAKE_OVER_MAX_NS (older ones are the GC's).
 */
static __always_inline int nat_take_over_allowed(__u8 flags, __u64 seen, int has_fwd, __u64 fwd_seen,
						 __u64 now, __u64 hold)
{
	if (!(flags & CT_F_CLOSING) || (__s64)(now - seen) < (__s64)hold)
		return 0;
	/* The old flow's packets from the client refresh its forward entry
	 * only: the flow is idle when both entries are. */
	if (has_fwd)
		return (__s64)(now - fwd_seen) >= (__s64)hold;
	return (__s64)(now - seen) < (__s64)SNAT_TAKE_OVER_MAX_NS;
}

/* The hold for try i of SNAT_PORT_TRIES (hold_last in the last tries). */
static __always_inline __u64 nat_hold_of_try(__u32 i, __u64 hold_last)
{
	return i < SNAT_PORT_TRIES - SNAT_PORT_TRIES_LAST ? SNAT_CLOSED_HOLD_NS : hold_last;
}

/* The hold of the last tries for a packet: the short one for a TCP SYN. */
static __always_inline __u64 nat_hold_last(__u8 proto, __u8 tcp_flags)
{
	if (proto == IPPROTO_TCP && (tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN)
		return SNAT_CLOSED_HOLD_MIN_NS;
	return SNAT_CLOSED_HOLD_NS;
}

static __always_inline int nat4_snat_take_over(const struct ct_key *reply,
					       const struct ct_value *reply_val, __u64 now,
					       __u64 hold)
{
	struct ct_value *old, *fwd;
	struct ct_key fk;
	__u64 seen;

	if (reply->proto != IPPROTO_TCP)
		return 0;
	old = bpf_map_lookup_elem(&SVCMAP_MAP_CT, reply);
	if (!old || !(old->flags & CT_F_CLOSING))
		return 0; /* a live flow's: no need to look further */
	seen = old->last_seen;
	ct4_peer_key(&fk, reply, old);
	fwd = bpf_map_lookup_elem(&SVCMAP_MAP_CT, &fk);
	if (fwd && (fwd->new_sport != reply->dport || fwd->new_saddr != reply->daddr ||
		    fwd->new_daddr != reply->saddr || fwd->new_dport != reply->sport))
		fwd = NULL; /* the client's port is another flow's by now */
	if (!nat_take_over_allowed(old->flags, seen, fwd != NULL, fwd ? fwd->last_seen : 0, now, hold))
		return 0;
	if (__sync_val_compare_and_swap(&old->last_seen, seen, now) != seen)
		return 0;
	if (fwd)
		ct4_delete(&fk);
	return ct4_insert(reply, reply_val, BPF_ANY) == 0;
}

/*
 * Reserves a SNAT source port by inserting the flow's reply entry:
 * `reply` is {backend, SNAT address, backend port, (port), proto,
 * CT_DIR_REPLY_IN}, and the port goes into reply->dport. The insert is
 * BPF_NOEXIST, so a port some other flow to the same backend address and
 * port holds is never taken over, also not by a concurrent CPU: two live
 * flows never share (SNAT address, port, backend address, backend port, proto).
 *
 * Candidates: the client's own port first when it is in range (it keeps
 * ports stable where it can, as netfilter's masquerade does), else one
 * from a hash of the flow; then random ports, SNAT_PORT_TRIES in all
 * (Cilium's approach). A candidate held by a flow that closed and has been
 * quiet for SNAT_CLOSED_HOLD_NS is taken over (nat4_snat_take_over()); in
 * the last SNAT_PORT_TRIES_LAST tries, for a TCP SYN, one quiet for
 * SNAT_CLOSED_HOLD_MIN_NS.
 * Returns the port (network order), or 0: every candidate was taken, or,
 * with *insert_failed set, an insert failed for another reason (the map
 * could not make room).
 *
 * A port comes back when its flow closes (RST, or FIN both ways: after
 * the hold, to the next flow that probes it), when the agent's
 * conntrack GC removes the flow (closed for 10 s, or idle for longer than
 * its state allows; see src/agent/ct-gc.ts), when a stale flow is
 * forgotten (ct4_forget_flow()), or when the LRU evicts it.
 */
static __always_inline __be16 nat4_snat_reserve(const struct svcmap_config *cfg,
						struct ct_key *reply,
						const struct ct_value *reply_val,
						const struct pkt4 *p, int *insert_failed)
{
	__u64 now = reply_val->last_seen, hold, hold_last;
	__u32 min, max, span, port, i;
	int err;

	nat4_snat_range(cfg, &min, &max);
	span = max - min + 1;
	port = nat_first_port(min, max, p->sport, nat4_flow_hash(reply, p->saddr, p->sport));
	hold_last = nat_hold_last(p->proto, p->tcp_flags);

	for (i = 0; i < SNAT_PORT_TRIES; i++) {
		reply->dport = bpf_htons((__u16)port);
		err = ct4_insert(reply, reply_val, BPF_NOEXIST);
		if (err == 0)
			return reply->dport;
		if (err != -EEXIST)
			*insert_failed = 1;
		else {
			hold = nat_hold_of_try(i, hold_last);
			if (nat4_snat_take_over(reply, reply_val, now, hold))
				return reply->dport;
		}
		port = min + bpf_get_prandom_u32() % span;
	}
	return 0;
}

#endif /* SVCMAP_LIB_NAT_H */
