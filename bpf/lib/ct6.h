/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Connection tracking of IPv6 flows at tc (svcmap_ct6): ct.h's rules over
 * 16-byte addresses. The state bits (ct_state_of(), ct_state_merge()) and
 * their refresh (ct_refresh()) are ct.h's own; the agent's conntrack GC
 * collects both maps alike. IPv6 flows are counted as IPv4 ones are (see
 * ct4_uncount()), in svcmap_conns6's tc field: LB_ALG_LC/SED/NQ at tc read
 * both the socket LB's and tc's counts of IPv6 backends.
 */
#ifndef SVCMAP_LIB_CT6_H
#define SVCMAP_LIB_CT6_H

#include "packet6.h"
#include "maps_tc.h"
#include "maps6.h"
#include "ct.h"

static __always_inline void ct6_key_of(struct ct6_key *k, const struct pkt6 *p, __u8 dir)
{
	__builtin_memset(k, 0, sizeof(*k));
	__builtin_memcpy(k->saddr, p->saddr, sizeof(k->saddr));
	__builtin_memcpy(k->daddr, p->daddr, sizeof(k->daddr));
	k->sport = p->sport;
	k->dport = p->dport;
	k->proto = p->proto;
	k->dir = dir;
}

/* ct4_peer_key() for IPv6: the key of the flow's other entry. */
static __always_inline void ct6_peer_key(struct ct6_key *k, const struct ct6_key *self,
					 const struct ct6_value *v)
{
	__builtin_memset(k, 0, sizeof(*k));
	addr6_or(k->saddr, v->new_daddr, self->daddr);
	addr6_or(k->daddr, v->new_saddr, self->saddr);
	k->sport = v->new_dport ? v->new_dport : self->dport;
	k->dport = v->new_sport ? v->new_sport : self->sport;
	k->proto = self->proto;
	if (self->dir != CT_DIR_FWD)
		k->dir = CT_DIR_FWD;
	else
		k->dir = (v->flags & CT_F_SNAT) ? CT_DIR_REPLY_IN : CT_DIR_REPLY_OUT;
}

/* ct4_backend_current() for IPv6. */
static __always_inline int ct6_backend_current(const struct ct6_value *v)
{
	struct backend6_value *be;
	__u32 id = v->backend_id;

	be = bpf_map_lookup_elem(&SVCMAP_MAP_BACKENDS6, &id);
	return be && addr6_eq(be->addr, v->new_daddr) && be->port == v->new_dport;
}

/* ct4_uncount() for IPv6: a counted open flow's forward entry takes its
 * flow off its IPv6 backend's tc count, unless the id was reused. */
static __always_inline void ct6_uncount(const struct ct6_value *fwd)
{
	if ((fwd->flags & CT_F_COUNTED) && ct6_backend_current(fwd))
		conns_add_in(&SVCMAP_MAP_BE_CONNS6, fwd->backend_id, CONNS_FIELD_TC, -1);
}

/* ct4_lookup() for IPv6: the entry, its last_seen refreshed and the
 * packet's state news written to it and to the flow's other entry. */
static __always_inline struct ct6_value *ct6_lookup(const struct pkt6 *p, __u8 dir)
{
	struct ct6_value *v, *peer;
	struct ct6_key k, pk;
	__u64 now;
	__u8 flags;

	ct6_key_of(&k, p, dir);
	v = bpf_map_lookup_elem(&SVCMAP_MAP_CT6, &k);
	if (!v)
		return NULL;
	now = bpf_ktime_get_ns();
	flags = ct_state_merge(v->flags, ct_state_of(p->proto, p->tcp_flags, dir));
	if (flags == v->flags) {
		ct_refresh(&v->last_seen, flags, now);
		return v;
	}
	if (dir == CT_DIR_FWD && ct_stops_counting(v->flags, flags))
		ct6_uncount(v);
	v->flags = flags;
	v->last_seen = now;
	ct6_peer_key(&pk, &k, v);
	peer = bpf_map_lookup_elem(&SVCMAP_MAP_CT6, &pk);
	if (peer && ct_peer_merge(&peer->flags, flags, dir))
		ct6_uncount(peer);
	return v;
}

static __always_inline int ct6_insert(const struct ct6_key *k, const struct ct6_value *v, __u64 flags)
{
	return bpf_map_update_elem(&SVCMAP_MAP_CT6, k, v, flags);
}

static __always_inline void ct6_delete(const struct ct6_key *k)
{
	bpf_map_delete_elem(&SVCMAP_MAP_CT6, k);
}

/* ct4_reply_of() for IPv6: the flow's reply entry when it names the forward entry back. */
static __always_inline struct ct6_value *ct6_reply_of(const struct pkt6 *p, const struct ct6_value *v,
						      struct ct6_key *rep)
{
	struct ct6_key fwd, back;
	struct ct6_value *rv;

	ct6_key_of(&fwd, p, CT_DIR_FWD);
	ct6_peer_key(rep, &fwd, v);
	rv = bpf_map_lookup_elem(&SVCMAP_MAP_CT6, rep);
	if (!rv)
		return NULL;
	ct6_peer_key(&back, rep, rv);
	if (!addr6_eq(back.saddr, fwd.saddr) || !addr6_eq(back.daddr, fwd.daddr) ||
	    back.sport != fwd.sport || back.dport != fwd.dport)
		return NULL;
	return rv;
}

/* ct4_forget_flow() for IPv6: the forward entry and its own reply entry; a
 * flow still open stops counting. */
static __always_inline void ct6_forget_flow(const struct pkt6 *p, const struct ct6_value *v)
{
	struct ct6_key fwd, rep;

	if (ct6_reply_of(p, v, &rep))
		ct6_delete(&rep);
	if (!(v->flags & CT_F_CLOSING))
		ct6_uncount(v);
	ct6_key_of(&fwd, p, CT_DIR_FWD);
	ct6_delete(&fwd);
}

#endif /* SVCMAP_LIB_CT6_H */
