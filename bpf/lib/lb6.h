/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Service lookup and backend selection for IPv6 frontends: lb.h's shared
 * logic (scope, algorithms, counts, Maglev, the slot fallback, affinity)
 * over the IPv6 maps (maps6.h, svcmap_conns6, svcmap_maglev6). Only the
 * key, the maps and the frontend address folded to 32 bits (for the hashes
 * of dh and maglev) are IPv6's own.
 */
#ifndef SVCMAP_LIB_LB6_H
#define SVCMAP_LIB_LB6_H

#include "lb.h"
#include "maps6.h"

/* The ETP=Local internal twin, as lb4_internal_scope(). */
static __always_inline struct svc_value *lb6_internal_scope(struct svc6_key *key, struct svc_value *svc)
{
	return lb_internal_scope(&SVCMAP_MAP_SERVICES6, key, &key->scope, &key->slot, svc);
}

struct lb6_scan {
	struct svc6_key key;
	struct lb_scan_state st;
};

static long lb6_scan_step(__u64 i, void *arg)
{
	struct lb6_scan *sc = arg;

	return lb_scan_step(i, &sc->st, &SVCMAP_MAP_SERVICES6, &SVCMAP_MAP_BE_CONNS6, &sc->key, &sc->key.slot);
}

static __always_inline __u16 lb6_least_loaded(const struct svc_value *svc, const struct svc6_key *fe)
{
	struct lb6_scan sc = { .key = *fe };

	lb_scan_init(&sc.st, svc->count);
	bpf_loop(LB_SCAN_MAX, lb6_scan_step, &sc, 0);
	return (__u16)sc.st.best_slot;
}

/* lb4_pick_slot() for an IPv6 frontend. */
static __always_inline __u16 lb6_pick_slot(const struct svc_value *svc, const struct svc6_key *fe,
					   __u32 client_hash)
{
	if (lb_alg_counts(svc->algorithm))
		return lb6_least_loaded(svc, fe);
	return lb_pick_slot_common(&SVCMAP_MAP_MAGLEV6, svc, addr6_fold(fe->addr), fe->port, client_hash);
}

/* lb4_select_backend() for an IPv6 frontend. */
static __always_inline struct backend6_value *lb6_select_backend(struct svc6_key *key, const struct svc_value *svc,
								 __u32 client_hash, __u32 *backend_id)
{
	key->slot = lb6_pick_slot(svc, key, client_hash);
	return lb_slot_backend(&SVCMAP_MAP_SERVICES6, &SVCMAP_MAP_BACKENDS6, key, &key->slot, backend_id);
}

/* lb4_affinity_select() for an IPv6 frontend. */
static __always_inline struct backend6_value *lb6_affinity_select(struct svc6_key *key, const struct svc_value *svc,
								  const struct affinity_key *akey, __u32 client_hash,
								  __u32 *backend_id)
{
	struct affinity_value *aff;
	__u64 now = bpf_ktime_get_boot_ns();
	void *be;

	be = lb_affinity_find(&SVCMAP_MAP_SERVICES6, &SVCMAP_MAP_BACKENDS6, akey, key, &key->slot, svc, backend_id, now, &aff);
	if (be)
		return be;
	be = lb6_select_backend(key, svc, client_hash, backend_id);
	if (!be)
		return NULL;
	return lb_affinity_remember(&SVCMAP_MAP_SERVICES6, &SVCMAP_MAP_BACKENDS6, akey, key, &key->slot, svc, be,
				    backend_id, now, aff);
}

#endif /* SVCMAP_LIB_LB6_H */
