/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Live connections per backend (struct backend_conns in svcmap_maps.h):
 * the counts both datapaths keep and LB_ALG_LC/SED/NQ read. Every change is
 * an atomic add on the map value in place, by the datapath or (through
 * conns_adjust(), run by the agent as a BPF_PROG_TYPE_SYSCALL program) by
 * the agent, so no writer ever overwrites another's count.
 */
#ifndef SVCMAP_LIB_CONNS_H
#define SVCMAP_LIB_CONNS_H

#include "common.h"
#include "maps.h"

/* Whether connections through a frontend with this algorithm are counted:
 * only those whose choice reads the counts. */
static __always_inline int lb_alg_counts(__u8 alg)
{
	return alg == LB_ALG_LC || alg == LB_ALG_SED || alg == LB_ALG_NQ;
}

/*
 * The helpers below take the family's counts map (svcmap_be_conns, or
 * svcmap_conns6 for IPv6 backend ids) as their first argument; they are
 * inlined, so each call site reads its own map.
 */

/* The counts of backend id, created (zero) when missing: an increment must
 * land somewhere. NULL only when the map is full. */
static __always_inline struct backend_conns *conns_get_or_create(void *map, __u32 id)
{
	struct backend_conns zero = {};
	struct backend_conns *c;

	c = bpf_map_lookup_elem(map, &id);
	if (c)
		return c;
	/* NOEXIST: another CPU may create it first; either way, look again. */
	bpf_map_update_elem(map, &id, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, &id);
}

/* Adds delta to one field (CONNS_FIELD_*); a decrement never creates. */
static __always_inline void conns_add_in(void *map, __u32 id, __u32 field, __s64 delta)
{
	struct backend_conns *c;

	if (!id)
		return;
	c = delta > 0 ? conns_get_or_create(map, id) : bpf_map_lookup_elem(map, &id);
	if (!c)
		return;
	if (field == CONNS_FIELD_SOCK)
		__sync_fetch_and_add(&c->sock, delta);
	else
		__sync_fetch_and_add(&c->tc, delta);
}

/* conns_add_in() of an IPv4 backend. */
static __always_inline void conns_add(__u32 id, __u32 field, __s64 delta)
{
	conns_add_in(&SVCMAP_MAP_BE_CONNS, id, field, delta);
}

/* Active connections to backend id: both fields, a negative one as 0. */
static __always_inline __u64 conns_active_in(void *map, __u32 id)
{
	struct backend_conns *c = bpf_map_lookup_elem(map, &id);
	__s64 s, t;

	if (!c)
		return 0;
	s = c->sock;
	t = c->tc;
	return (__u64)(s > 0 ? s : 0) + (__u64)(t > 0 ? t : 0);
}

/*
 * The agent's one way to change a count (BPF_PROG_RUN of a SEC("syscall")
 * program with a struct conns_adjust as context): the conntrack GC's
 * decrements for flows it collects, and the recount's corrections, of
 * either family's map. 0, or -EINVAL for a field or family that does not
 * exist.
 */
static __always_inline int conns_adjust(const struct conns_adjust *a)
{
	__u32 id = a->backend_id;
	__u32 field = a->field;
	__u32 family = a->family;
	__s64 delta = a->delta;

	if (field != CONNS_FIELD_SOCK && field != CONNS_FIELD_TC)
		return -EINVAL;
	if (family == 6)
		conns_add_in(&SVCMAP_MAP_BE_CONNS6, id, field, delta);
	else if (family == 0 || family == 4)
		conns_add_in(&SVCMAP_MAP_BE_CONNS, id, field, delta);
	else
		return -EINVAL;
	return 0;
}

#endif /* SVCMAP_LIB_CONNS_H */
