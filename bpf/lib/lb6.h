/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Service lookup and backend selection for IPv6 frontends (the IPv6 maps,
 * maps6.h), shared by the socket hooks (sock_lb6.h) and the tc programs
 * (tc_lb6.h), as lb.h is for IPv4.
 */
#ifndef SVCMAP_LIB_LB6_H
#define SVCMAP_LIB_LB6_H

#include "lb.h"
#include "maps6.h"

/*
 * lb4_pick_slot() for an IPv6 frontend. IPv6 connections are not counted
 * (struct backend_conns counts IPv4 backends) and Maglev tables are keyed
 * by IPv4 reverse-NAT ids, so lc, sed, nq and maglev choose at random here;
 * dh hashes the frontend's address (its words folded) and port.
 */
static __always_inline __u16 lb6_pick_slot(const struct svc_value *svc, const struct svc6_key *fe,
					   __u32 client_hash)
{
	return lb_pick_slot_common(svc, fe->addr[0] ^ fe->addr[1] ^ fe->addr[2] ^ fe->addr[3], fe->port,
				   client_hash);
}

/* As lb4_select_backend(): a slot missing in a shrinking frontend's window falls back to slot 1. */
static __always_inline struct backend6_value *lb6_select_backend(struct svc6_key *key, const struct svc_value *svc,
								 __u32 client_hash, __u32 *backend_id)
{
	struct svc_value *slot;

	key->slot = lb6_pick_slot(svc, key, client_hash);
	slot = bpf_map_lookup_elem(&SVCMAP_MAP_SERVICES6, key);
	if (!slot) {
		key->slot = 1;
		slot = bpf_map_lookup_elem(&SVCMAP_MAP_SERVICES6, key);
		if (!slot)
			return NULL;
	}
	*backend_id = slot->backend_id;
	return bpf_map_lookup_elem(&SVCMAP_MAP_BACKENDS6, backend_id);
}

/* The client's remembered backend while it is current, by lb4_affinity_current()'s rules. */
static __always_inline struct backend6_value *lb6_affinity_current(const struct affinity_value *aff, struct svc6_key *key,
								   const struct svc_value *svc, __u32 *backend_id, __u64 now)
{
	__u64 last = aff->last_used;
	__u32 id = aff->backend_id;
	__u16 s = aff->slot;
	struct svc6_key k = *key;
	struct backend6_value *be;
	struct svc_value *slot;

	if ((now > last && now - last > (__u64)svc->affinity_timeout * NSEC_PER_SEC) || s == 0 || s > svc->count)
		return NULL;
	k.slot = s;
	slot = bpf_map_lookup_elem(&SVCMAP_MAP_SERVICES6, &k);
	if (!slot || slot->backend_id != id)
		return NULL;
	be = bpf_map_lookup_elem(&SVCMAP_MAP_BACKENDS6, &id);
	if (be) {
		key->slot = s;
		*backend_id = id;
	}
	return be;
}

/*
 * sessionAffinity for IPv6 frontends, as lb4_affinity_select(): a current
 * entry is used and refreshed, else the algorithm chooses and the choice is
 * stored (a concurrent first choice of the same client wins).
 */
static __always_inline struct backend6_value *lb6_affinity_select(struct svc6_key *key, const struct svc_value *svc,
								  const struct affinity_key *akey, __u32 client_hash)
{
	struct affinity_value fresh = {};
	struct affinity_value *aff;
	struct backend6_value *be, *won;
	__u64 now = bpf_ktime_get_boot_ns();
	__u32 id = 0;

	aff = bpf_map_lookup_elem(&SVCMAP_MAP_AFFINITY, akey);
	if (aff) {
		be = lb6_affinity_current(aff, key, svc, &id, now);
		if (be) {
			aff->last_used = now;
			return be;
		}
	}
	be = lb6_select_backend(key, svc, client_hash, &id);
	if (!be)
		return NULL;
	fresh.last_used = now;
	fresh.backend_id = id;
	fresh.slot = key->slot;
	if (!aff && bpf_map_update_elem(&SVCMAP_MAP_AFFINITY, akey, &fresh, BPF_NOEXIST) == 0)
		return be;
	if (!aff) {
		aff = bpf_map_lookup_elem(&SVCMAP_MAP_AFFINITY, akey);
		won = aff ? lb6_affinity_current(aff, key, svc, &id, now) : NULL;
		if (won)
			return won;
	}
	bpf_map_update_elem(&SVCMAP_MAP_AFFINITY, akey, &fresh, BPF_ANY);
	return be;
}

#endif /* SVCMAP_LIB_LB6_H */
