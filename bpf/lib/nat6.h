/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Address and port translation of IPv6 packets, and SNAT ports for IPv6
 * flows: nat.h's rules (the same port range, the client's port first,
 * SNAT_PORT_TRIES candidates, BPF_NOEXIST so that two live flows never
 * share a port, a closed flow's port taken over by a new flow after the
 * same holds: nat_take_over_allowed()) over svcmap_ct6.
 */
#ifndef SVCMAP_LIB_NAT6_H
#define SVCMAP_LIB_NAT6_H

#include "csum.h"
#include "ct.h"
#include "nat.h"

/* nat4_rewrite() for IPv6: the fields v sets, with the L4 checksum. */
static __always_inline int nat6_rewrite(struct __sk_buff *skb, struct pkt6 *p, const struct ct6_value *v)
{
	int err;

	if (!addr6_zero(v->new_saddr) && !addr6_eq(v->new_saddr, p->saddr)) {
		err = csum6_store_addr(skb, p, IP6_SADDR_OFF, p->saddr, v->new_saddr);
		if (err < 0)
			return err;
		__builtin_memcpy(p->saddr, v->new_saddr, sizeof(p->saddr));
	}
	if (!addr6_zero(v->new_daddr) && !addr6_eq(v->new_daddr, p->daddr)) {
		err = csum6_store_addr(skb, p, IP6_DADDR_OFF, p->daddr, v->new_daddr);
		if (err < 0)
			return err;
		__builtin_memcpy(p->daddr, v->new_daddr, sizeof(p->daddr));
	}
	if (v->new_sport && v->new_sport != p->sport) {
		err = csum_store_port(skb, p->csum_off, p->proto, p->l4_off + L4_SPORT_OFF, p->sport, v->new_sport);
		if (err < 0)
			return err;
		p->sport = v->new_sport;
	}
	if (v->new_dport && v->new_dport != p->dport) {
		err = csum_store_port(skb, p->csum_off, p->proto, p->l4_off + L4_DPORT_OFF, p->dport, v->new_dport);
		if (err < 0)
			return err;
		p->dport = v->new_dport;
	}
	return 0;
}

/* nat4_snat_take_over() for IPv6: 1 when the port in reply->dport, held by
 * a closed flow quiet for `hold`, is now the new flow's. */
static __always_inline int nat6_snat_take_over(const struct ct6_key *reply, const struct ct6_value *reply_val,
					       __u64 now, __u64 hold)
{
	struct ct6_value *old, *fwd;
	struct ct6_key fk;
	__u64 seen;

	if (reply->proto != IPPROTO_TCP)
		return 0;
	old = bpf_map_lookup_elem(&SVCMAP_MAP_CT6, reply);
	if (!old || !(old->flags & CT_F_CLOSING))
		return 0; /* a live flow's: no need to look further */
	seen = old->last_seen;
	ct_peer_key(AF_INET6, &fk, reply, old);
	fwd = bpf_map_lookup_elem(&SVCMAP_MAP_CT6, &fk);
	if (fwd && (fwd->new_sport != reply->dport || !addr6_eq(fwd->new_saddr, reply->daddr) ||
		    !addr6_eq(fwd->new_daddr, reply->saddr) || fwd->new_dport != reply->sport))
		fwd = NULL; /* the client's port is another flow's by now */
	if (!nat_take_over_allowed(old->flags, seen, fwd != NULL, fwd ? fwd->last_seen : 0, now, hold))
		return 0;
	if (__sync_val_compare_and_swap(&old->last_seen, seen, now) != seen)
		return 0;
	if (fwd)
		ct_delete(AF_INET6, &fk);
	return ct_insert(AF_INET6, reply, reply_val, BPF_ANY) == 0;
}

/*
 * nat4_snat_reserve() for IPv6: reserves a SNAT port by inserting the
 * flow's reply entry (reply: {backend, SNAT address, backend port, (port),
 * proto, CT_DIR_REPLY_IN}); the port (network order) or 0, with
 * *insert_failed set when an insert failed for another reason than the
 * port being taken.
 */
static __always_inline __be16 nat6_snat_reserve(const struct svcmap_config *cfg, struct ct6_key *reply,
						const struct ct6_value *reply_val, const struct pkt6 *p,
						int *insert_failed)
{
	struct ct_key folded = {
		.saddr = addr6_fold(reply->saddr),
		.sport = reply->sport,
		.proto = reply->proto,
	};
	__u64 hold_last = nat_hold_last(p->proto, p->tcp_flags);
	__u32 min, max, port, i;
	int err;

	nat4_snat_range(cfg, &min, &max);
	port = nat_first_port(min, max, p->sport, nat4_flow_hash(&folded, addr6_fold(p->saddr), p->sport));
	for (i = 0; i < SNAT_PORT_TRIES; i++) {
		reply->dport = bpf_htons((__u16)port);
		err = ct_insert(AF_INET6, reply, reply_val, BPF_NOEXIST);
		if (err == 0)
			return reply->dport;
		if (err != -EEXIST)
			*insert_failed = 1;
		else if (nat6_snat_take_over(reply, reply_val, reply_val->last_seen, nat_hold_of_try(i, hold_last)))
			return reply->dport;
		port = min + bpf_get_prandom_u32() % (max - min + 1);
	}
	return 0;
}

#endif /* SVCMAP_LIB_NAT6_H */
