/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Address and port translation: applying a conntrack entry's rewrite to a
 * packet, and choosing a SNAT source port that no other flow to the same
 * backend holds. Both families, over their conntrack maps (ct.h): the same
 * port range, the client's port first, SNAT_PORT_TRIES candidates,
 * BPF_NOEXIST so that two live flows never share a port, a closed flow's
 * port taken over by a new flow after the same holds.
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
 * (nat_snat_take_over()). While it runs, late packets of the old flow (the
 * last ACK, data in flight behind an RST, a FIN retransmitted because the
 * last ACK was lost) still find the old flow's entry and are translated for
 * the old client, never for a new one; every packet of a closed flow
 * restarts it (__ct_lookup()).
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
#define SNAT_CLOSED_HOLD_NS     1000000000ULL
#define SNAT_CLOSED_HOLD_MIN_NS 10000000ULL
#define SNAT_PORT_TRIES_LAST    8

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

/* The packet's source (dst 0) or destination address becomes the one entry v
 * sets, if it sets one (non-zero) other than the packet's, with checksums. */
static __always_inline int nat_rewrite_addr(const int family, struct ctx_buff *ctx, void *pkt, const void *val,
					    const int dst)
{
	int err;

	if (family == AF_INET6) {
		struct pkt6 *p = pkt;
		const struct ct6_value *v = val;
		__be32 *addr = dst ? p->daddr : p->saddr;
		const __be32 *to = dst ? v->new_daddr : v->new_saddr;

		if (addr6_zero(to) || addr6_eq(to, addr))
			return 0;
		err = csum6_store_addr(ctx, p, dst ? IP6_DADDR_OFF : IP6_SADDR_OFF, addr, to);
		if (err < 0)
			return err;
		__builtin_memcpy(addr, to, 16);
	} else {
		struct pkt4 *p = pkt;
		const struct ct_value *v = val;
		__be32 *addr = dst ? &p->daddr : &p->saddr;
		__be32 to = dst ? v->new_daddr : v->new_saddr;

		if (!to || to == *addr)
			return 0;
		err = csum4_store_addr(ctx, p, dst ? IP4_DADDR_OFF : IP4_SADDR_OFF, *addr, to);
		if (err < 0)
			return err;
		*addr = to;
	}
	return 0;
}

/* The packet's port at l4_off + off (*port) becomes `to`, if non-zero and other. */
static __always_inline int nat_rewrite_port(const int family, struct ctx_buff *ctx, const void *p, __u32 off,
					    __be16 *port, __be16 to)
{
	int err;

	if (!to || to == *port)
		return 0;
	err = csum_store_port(ctx, pkt_f(family, p, csum_off), pkt_f(family, p, proto), pkt_f(family, p, l4_off) + off,
			      *port, to);
	if (err < 0)
		return err;
	*port = to;
	return 0;
}

/*
 * Rewrites the fields that v (the family's conntrack entry) sets (non-zero
 * and different from the packet's), with checksums, and updates p (struct
 * pkt4 or pkt6) to the new tuple. 0 or a negative errno; on error the
 * packet may be half rewritten and must be dropped.
 */
static __always_inline int nat_rewrite(const int family, struct ctx_buff *ctx, void *p, const void *v)
{
	int err;

	err = nat_rewrite_addr(family, ctx, p, v, 0);
	if (!err)
		err = nat_rewrite_addr(family, ctx, p, v, 1);
	if (!err)
		err = nat_rewrite_port(family, ctx, p, L4_SPORT_OFF, &pkt_f(family, p, sport),
				       ct_val_f(family, v, new_sport));
	if (!err)
		err = nat_rewrite_port(family, ctx, p, L4_DPORT_OFF, &pkt_f(family, p, dport),
				       ct_val_f(family, v, new_dport));
	return err;
}

/* The SNAT source port range of cfg, host order, inclusive: the one place
 * that reads it, so choosing a port and recognising a reply agree. */
static __always_inline void nat_snat_range(const struct svcmap_config *cfg, __u32 *min, __u32 *max)
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
	nat_snat_range(cfg, &min, &max);
	return p >= min && p <= max;
}

/* A hash of the flow a SNAT port is chosen for: client address and port,
 * backend address and port, protocol (murmur3's finalizer steps); IPv6
 * addresses folded to 32 bits (addr6_fold()). */
static __always_inline __u32 nat_flow_hash(__u32 backend_addr, __be16 backend_port, __u8 proto, __u32 client_addr,
					   __be16 client_port)
{
	__u32 h = 0x9e3779b9;

	h ^= (__u32)client_addr;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h ^= ((__u32)client_port << 16) | backend_port;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	h ^= backend_addr;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h ^= proto;
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
 * The port in reply->dport (the family's conntrack key) is held by another
 * flow's reply entry: take it
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
static __always_inline int nat_take_over_allowed(__u8 flags, __u64 seen, int has_fwd, __u64 fwd_seen, __u64 now,
						 __u64 hold)
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

/* Whether forward entry fwd still translates into the tuple that reply key
 * `reply` reverses (the client's port is not another flow's by now). */
static __always_inline int nat_fwd_names(const int family, const void *fwd, const void *reply)
{
	if (ct_val_f(family, fwd, new_sport) != ct_key_f(family, reply, dport) ||
	    ct_val_f(family, fwd, new_dport) != ct_key_f(family, reply, sport))
		return 0;
	if (family == AF_INET6) {
		const struct ct6_value *f = fwd;
		const struct ct6_key *r = reply;

		return addr6_eq(f->new_saddr, r->daddr) && addr6_eq(f->new_daddr, r->saddr);
	}
	return ((const struct ct_value *)fwd)->new_saddr == ((const struct ct_key *)reply)->daddr &&
	       ((const struct ct_value *)fwd)->new_daddr == ((const struct ct_key *)reply)->saddr;
}

static __always_inline int nat_snat_take_over(const int family, const void *reply, const void *reply_val, __u64 now,
					      __u64 hold)
{
	union ct_key_any fk;
	void *old, *fwd;
	__u64 seen;
	__u8 flags;

	if (ct_key_f(family, reply, proto) != IPPROTO_TCP)
		return 0;
	old = bpf_map_lookup_elem(ct_map(family), reply);
	if (!old)
		return 0;
	flags = ct_val_f(family, old, flags);
	if (!(flags & CT_F_CLOSING))
		return 0; /* a live flow's: no need to look further */
	seen = ct_val_f(family, old, last_seen);
	ct_peer_key(family, &fk, reply, old);
	fwd = bpf_map_lookup_elem(ct_map(family), &fk);
	if (fwd && !nat_fwd_names(family, fwd, reply))
		fwd = NULL; /* the client's port is another flow's by now */
	if (!nat_take_over_allowed(flags, seen, fwd != NULL, fwd ? ct_val_f(family, fwd, last_seen) : 0, now, hold))
		return 0;
	if (__sync_val_compare_and_swap(&ct_val_f(family, old, last_seen), seen, now) != seen)
		return 0;
	if (fwd)
		ct_delete(family, &fk);
	return ct_insert(family, reply, reply_val, BPF_ANY) == 0;
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
 * quiet for SNAT_CLOSED_HOLD_NS is taken over (nat_snat_take_over()); in
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
 * forgotten (ct_forget_flow()), or when the LRU evicts it.
 */
/* The 32 bits of an address (IPv6 folded) that the flow hash takes: the
 * source of a conntrack key k, and of a packet p. */
static __always_inline __u32 nat_key_saddr32(const int family, const void *k)
{
	if (family == AF_INET6)
		return addr6_fold(((const struct ct6_key *)k)->saddr);
	return ((const struct ct_key *)k)->saddr;
}

static __always_inline __u32 nat_pkt_saddr32(const int family, const void *p)
{
	if (family == AF_INET6)
		return addr6_fold(((const struct pkt6 *)p)->saddr);
	return ((const struct pkt4 *)p)->saddr;
}

static __always_inline __be16 nat_snat_reserve(const int family, const struct svcmap_config *cfg, void *reply,
					       const void *reply_val, const void *p, int *insert_failed)
{
	__u64 now = ct_val_f(family, reply_val, last_seen), hold, hold_last;
	__be16 *reply_port = &ct_key_f(family, reply, dport);
	__u32 min, max, span, port, hash, i;
	int err;

	nat_snat_range(cfg, &min, &max);
	span = max - min + 1;
	hash = nat_flow_hash(nat_key_saddr32(family, reply), ct_key_f(family, reply, sport),
			     ct_key_f(family, reply, proto), nat_pkt_saddr32(family, p), pkt_f(family, p, sport));
	port = nat_first_port(min, max, pkt_f(family, p, sport), hash);
	hold_last = nat_hold_last(pkt_f(family, p, proto), pkt_f(family, p, tcp_flags));

	for (i = 0; i < SNAT_PORT_TRIES; i++) {
		*reply_port = bpf_htons((__u16)port);
		err = ct_insert(family, reply, reply_val, BPF_NOEXIST);
		if (err == 0)
			return *reply_port;
		if (err != -EEXIST)
			*insert_failed = 1;
		else {
			hold = nat_hold_of_try(i, hold_last);
			if (nat_snat_take_over(family, reply, reply_val, now, hold))
				return *reply_port;
		}
		port = min + bpf_get_prandom_u32() % span;
	}
	return 0;
}

#endif /* SVCMAP_LIB_NAT_H */
