/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Connection tracking for the tc programs: a flow is remembered by the
 * 5-tuple of its packets as they arrive, once per direction (CT_DIR_*), and
 * each entry holds the translation its packets get. The map is an LRU, so
 * entries of finished flows age out as new flows arrive; last_seen is there
 * for anything that wants to expire them sooner.
 */
#ifndef SVCMAP_LIB_CT_H
#define SVCMAP_LIB_CT_H

#include "packet.h"
#include "maps_tc.h"

/* last_seen is written at most this often per entry, not on every packet:
 * a write per packet would bounce the entry's cache line between CPUs. */
#define CT_REFRESH_NS 1000000000ULL

static __always_inline void ct4_key_of(struct ct_key *k, const struct pkt4 *p, __u8 dir)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->saddr = p->saddr;
	k->daddr = p->daddr;
	k->sport = p->sport;
	k->dport = p->dport;
	k->proto = p->proto;
	k->dir = dir;
}

/* The entry for this packet in direction dir, with last_seen refreshed; NULL if none. */
static __always_inline struct ct_value *ct4_lookup(const struct pkt4 *p, __u8 dir)
{
	struct ct_value *v;
	struct ct_key k;
	__u64 now;

	ct4_key_of(&k, p, dir);
	v = bpf_map_lookup_elem(&SVCMAP_MAP_CT, &k);
	if (!v)
		return NULL;
	now = bpf_ktime_get_ns();
	if (now - v->last_seen > CT_REFRESH_NS)
		v->last_seen = now;
	return v;
}

/* 0, -EEXIST with BPF_NOEXIST when the key is taken, or another negative errno. */
static __always_inline int ct4_insert(const struct ct_key *k, const struct ct_value *v, __u64 flags)
{
	return bpf_map_update_elem(&SVCMAP_MAP_CT, k, v, flags);
}

static __always_inline void ct4_delete(const struct ct_key *k)
{
	bpf_map_delete_elem(&SVCMAP_MAP_CT, k);
}

/*
 * Forgets the flow whose forward entry is v (the entry for packet p, in
 * CT_DIR_FWD): the forward entry and the reply entry it implies, which is
 * keyed by the translated tuple seen from the backend. For a SNATed flow
 * that gives its SNAT port back.
 */
static __always_inline void ct4_forget_flow(const struct pkt4 *p, const struct ct_value *v)
{
	struct ct_key fwd, rep = {};

	rep.saddr = v->new_daddr ? v->new_daddr : p->daddr;
	rep.sport = v->new_dport ? v->new_dport : p->dport;
	rep.daddr = v->new_saddr ? v->new_saddr : p->saddr;
	rep.dport = v->new_sport ? v->new_sport : p->sport;
	rep.proto = p->proto;
	rep.dir = (v->flags & CT_F_SNAT) ? CT_DIR_REPLY_IN : CT_DIR_REPLY_OUT;
	ct4_key_of(&fwd, p, CT_DIR_FWD);
	ct4_delete(&rep);
	ct4_delete(&fwd);
}

#endif /* SVCMAP_LIB_CT_H */
