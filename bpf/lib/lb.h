/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Service lookup and backend selection, shared by the socket hooks and the
 * tc programs.
 */
#ifndef SVCMAP_LIB_LB_H
#define SVCMAP_LIB_LB_H

#include "common.h"
#include "maps.h"

/* The master entry of a frontend, or NULL. key->slot is left at 0. */
static __always_inline struct svc_value *lb4_lookup_service(struct svc_key *key)
{
	key->slot = 0;
	return bpf_map_lookup_elem(&SVCMAP_MAP_SERVICES, key);
}

/*
 * In-node traffic (the socket hooks) of an ETP=Local frontend uses the
 * internal twin, which holds every backend, as kube-proxy does for traffic
 * that does not come from outside the node.
 */
static __always_inline struct svc_value *lb4_internal_scope(struct svc_key *key,
							    struct svc_value *svc)
{
	struct svc_value *twin;

	if (!(svc->flags & SVC_F_TWO_SCOPES))
		return svc;
	key->scope = SVC_SCOPE_INT;
	key->slot = 0;
	twin = bpf_map_lookup_elem(&SVCMAP_MAP_SERVICES, key);
	if (twin)
		return twin;
	key->scope = SVC_SCOPE_EXT;
	return svc;
}

/*
 * Uniform random choice among the frontend's slots: the distribution of
 * kube-proxy's 1/n, 1/(n-1), ... probability cascade. The agent writes a
 * shrinking service's new slots and count before it deletes the old slots
 * and backends, so a miss here is only the narrow window of a reader that
 * saw the old count; it falls back to slot 1, which always exists while
 * count > 0.
 */
static __always_inline struct backend_value *lb4_select_backend(struct svc_key *key,
								const struct svc_value *svc,
								__u32 *backend_id)
{
	struct backend_value *be;
	struct svc_value *slot;

	key->slot = (bpf_get_prandom_u32() % svc->count) + 1;
	slot = bpf_map_lookup_elem(&SVCMAP_MAP_SERVICES, key);
	if (!slot) {
		key->slot = 1;
		slot = bpf_map_lookup_elem(&SVCMAP_MAP_SERVICES, key);
		if (!slot)
			return NULL;
	}
	*backend_id = slot->backend_id;
	be = bpf_map_lookup_elem(&SVCMAP_MAP_BACKENDS, backend_id);
	return be;
}

#endif /* SVCMAP_LIB_LB_H */
