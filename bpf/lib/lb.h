/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Service lookup and backend selection, shared by the socket hooks and the
 * tc programs, for both families: the IPv4 maps and the IPv6 ones (maps.h,
 * svcmap_conns6, svcmap_maglev6). The functions take the family as a
 * constant and the frontend's key (struct svc_key or svc6_key) as a
 * pointer; only the key, the maps and the frontend address folded to 32
 * bits (for the hashes of dh and maglev) are per family.
 */
#ifndef SVCMAP_LIB_LB_H
#define SVCMAP_LIB_LB_H

#include "common.h"
#include "maps.h"
#include "maps.h"
#include "conns.h"

/* A field both families' service keys (backends) have, of either's. */
#define svc_key_f(family, k, f) fam_field(family, struct svc_key, struct svc6_key, k, f)

/* The family's maps. */
static __always_inline void *lb_svc_map(const int family)
{
	return family == AF_INET6 ? (void *)&SVCMAP_MAP_SERVICES6 : (void *)&SVCMAP_MAP_SERVICES;
}

static __always_inline void *lb_be_map(const int family)
{
	return family == AF_INET6 ? (void *)&SVCMAP_MAP_BACKENDS6 : (void *)&SVCMAP_MAP_BACKENDS;
}

/* The frontend address of key, folded to 32 bits for IPv6: what the hashes take. */
static __always_inline __u32 lb_key_addr32(const int family, const void *key)
{
	if (family == AF_INET6)
		return addr6_fold(((const struct svc6_key *)key)->addr);
	return ((const struct svc_key *)key)->addr;
}

/* The master entry of a frontend, or NULL. The key's slot is left at 0. */
static __always_inline struct svc_value *lb_lookup_service(const int family, void *key)
{
	svc_key_f(family, key, slot) = 0;
	return bpf_map_lookup_elem(lb_svc_map(family), key);
}

/*
 * In-node traffic (the socket hooks) of an ETP=Local frontend uses the
 * internal twin, which holds every backend, as kube-proxy does for traffic
 * that does not come from outside the node.
 */
static __always_inline struct svc_value *lb_internal_scope(const int family, void *key, struct svc_value *svc)
{
	struct svc_value *twin;

	if (!(svc->flags & SVC_F_TWO_SCOPES))
		return svc;
	svc_key_f(family, key, scope) = SVC_SCOPE_INT;
	svc_key_f(family, key, slot) = 0;
	twin = bpf_map_lookup_elem(lb_svc_map(family), key);
	if (twin)
		return twin;
	svc_key_f(family, key, scope) = SVC_SCOPE_EXT;
	return svc;
}

/*
 * A 32-bit mix of a 64-bit value (murmur3's finalizer over both halves):
 * what the hashing algorithms hash a client's identity with. Only its
 * spread matters; nothing outside the datapath computes it.
 */
static __always_inline __u32 lb_hash32(__u32 x)
{
	x ^= x >> 16;
	x *= 0x85ebca6b;
	x ^= x >> 13;
	x *= 0xc2b2ae35;
	x ^= x >> 16;
	return x;
}

static __always_inline __u32 lb_hash64(__u64 v)
{
	return lb_hash32((__u32)v ^ lb_hash32((__u32)(v >> 32) + 0x9e3779b9));
}

/*
 * LB_ALG_LC, LB_ALG_SED, LB_ALG_NQ: the slot whose backend has the fewest
 * active connections (conns_active_in()), looking at min(count, LB_SCAN_MAX)
 * consecutive slots from a random one (wrapping), the first of equals
 * winning: so ties (an idle service, equal loads) spread over the slots
 * instead of all going to slot 1, and a frontend with more than
 * LB_SCAN_MAX slots gets the least loaded of a random window of
 * LB_SCAN_MAX. An idle backend ends the scan (none can be less loaded).
 * With every weight 1, SED's (active + 1) / weight orders the backends as
 * active does, and NQ's "an idle one, else SED" is that same choice: the
 * three choose alike, as IPVS's do with equal weights (IPVS's lc also
 * weighs inactive connections, 1/256 each; these counts have none).
 * A slot that is missing (a reader that saw an older count) is skipped.
 * Each family has its own bpf_loop callback (lb4_scan_step(),
 * lb6_scan_step(): a callback takes no family argument) over this shared
 * step.
 */
struct lb_scan_state {
	__u32 count;
	__u32 start;     /* 0-based slot the scan starts at */
	__u32 best_slot; /* 1..count */
	__u64 best;
};

static __always_inline void lb_scan_init(struct lb_scan_state *st, __u16 count)
{
	st->count = count;
	st->best = ~0ULL;
	st->start = bpf_get_prandom_u32() % count;
	st->best_slot = st->start + 1;
}

/* The scan's state and the frontend's key (slot set per step), either family. */
struct lb_scan {
	union {
		struct svc_key v4;
		struct svc6_key v6;
	} key;
	struct lb_scan_state st;
};

/* One step: slot (start + i) of the frontend. 1 ends the loop. */
static __always_inline long lb_scan_step(const int family, __u64 i, struct lb_scan *sc)
{
	struct lb_scan_state *st = &sc->st;
	struct svc_value *v;
	__u32 s;
	__u64 n;

	if (i >= st->count)
		return 1;
	s = st->start + (__u32)i;
	if (s >= st->count)
		s -= st->count;
	svc_key_f(family, &sc->key, slot) = (__u16)(s + 1);
	v = bpf_map_lookup_elem(lb_svc_map(family), &sc->key);
	if (!v)
		return 0;
	n = conns_active_in(family == AF_INET6 ? (void *)&SVCMAP_MAP_BE_CONNS6 : (void *)&SVCMAP_MAP_BE_CONNS,
			    v->backend_id);
	if (n < st->best) {
		st->best = n;
		st->best_slot = s + 1;
		if (n == 0)
			return 1;
	}
	return 0;
}

/* bpf_loop callbacks: the verifier checks each once, whatever the bound. */
static long lb4_scan_step(__u64 i, void *arg)
{
	return lb_scan_step(AF_INET, i, arg);
}

static long lb6_scan_step(__u64 i, void *arg)
{
	return lb_scan_step(AF_INET6, i, arg);
}

static __always_inline __u16 lb_least_loaded(const int family, const struct svc_value *svc, const void *fe)
{
	struct lb_scan sc;

	if (family == AF_INET6)
		sc.key.v6 = *(const struct svc6_key *)fe;
	else
		sc.key.v4 = *(const struct svc_key *)fe;
	lb_scan_init(&sc.st, svc->count);
	bpf_loop(LB_SCAN_MAX, family == AF_INET6 ? lb6_scan_step : lb4_scan_step, &sc, 0);
	return (__u16)sc.st.best_slot;
}

/*
 * LB_ALG_MAGLEV: the slot the frontend's Maglev table (maglev_map:
 * svcmap_maglev, or svcmap_maglev6 for IPv6; see svcmap_maps.h) holds for
 * client_hash mixed with the frontend's address (an IPv6 one folded to 32
 * bits) and port (not its rev_nat_id: two nodes' agents build the same
 * table from the same backends, so a client hashes alike on both). 0 when
 * the frontend has no table (yet) or it is empty: the caller chooses at
 * random. The hash and the table say which backend; the slot is only how
 * the services map names it, so the usual miss fallback
 * (lb_slot_backend()) applies.
 */
static __always_inline __u16 lb_maglev_slot(void *maglev_map, const struct svc_value *svc, __be32 fe_addr,
					    __be16 fe_port, __u32 client_hash)
{
	__u32 rn = svc->rev_nat_id, idx = 0, pos;
	struct maglev_entry *head, *e;
	void *table;

	table = bpf_map_lookup_elem(maglev_map, &rn);
	if (!table)
		return 0;
	head = bpf_map_lookup_elem(table, &idx);
	if (!head || head->slot[0] == 0)
		return 0;
	pos = lb_hash32(client_hash ^ lb_hash64(((__u64)fe_port << 32) | fe_addr)) % head->slot[0];
	idx = 1 + pos / MAGLEV_SLOTS_PER_ENTRY;
	e = bpf_map_lookup_elem(table, &idx);
	if (!e)
		return 0;
	return e->slot[pos % MAGLEV_SLOTS_PER_ENTRY];
}

/*
 * The slot (1..count) the frontend's algorithm picks for a new connection,
 * for every algorithm but the scans of lc, sed and nq (the family's
 * lbN_least_loaded(), see lb_alg_counts()), for either family (fe_addr: the
 * frontend's address, an IPv6 one folded to 32 bits; maglev_map: the
 * family's tables). svc->count is not 0 (the callers check).
 *  LB_ALG_RR: the master's counter (its backend_id field, see struct
 *    svc_value) advanced with one atomic fetch-and-add: every CPU and both
 *    datapaths share it, so sequential connections rotate exactly through
 *    the slots and concurrent ones still each get a distinct turn. A
 *    per-CPU counter would not be round robin at all.
 *  LB_ALG_SH: client_hash (the caller's hash of the client: socket LB the
 *    network namespace cookie, tc the source address) modulo count: the
 *    same client gets the same slot while the count is unchanged.
 *  LB_ALG_DH: the hash of the frontend's address and port (the entry's, so
 *    the socket LB and tc agree): one slot for every client of it.
 *  LB_ALG_MAGLEV: lb_maglev_slot(), random while the table is missing.
 *  LB_ALG_RANDOM, and any value this datapath does not know: uniform
 *    random, the distribution of
 *    kube-proxy's 1/n, 1/(n-1), ... probability cascade.
 */
static __always_inline __u16 lb_pick_slot_common(void *maglev_map, const struct svc_value *svc, __be32 fe_addr,
						 __be16 fe_port, __u32 client_hash)
{
	__u32 n;

	switch (svc->algorithm) {
	case LB_ALG_RR:
		n = __sync_fetch_and_add(&((struct svc_value *)svc)->backend_id, 1);
		break;
	case LB_ALG_SH:
		n = client_hash;
		break;
	case LB_ALG_DH:
		n = lb_hash64(((__u64)fe_port << 32) | fe_addr);
		break;
	case LB_ALG_MAGLEV:
		n = lb_maglev_slot(maglev_map, svc, fe_addr, fe_port, client_hash);
		if (n)
			return (__u16)n;
		/* No table (yet): random. */
		n = bpf_get_prandom_u32();
		break;
	default:
		n = bpf_get_prandom_u32();
		break;
	}
	return (__u16)(n % svc->count + 1);
}

/* The slot a frontend's algorithm picks (fe: its key). */
static __always_inline __u16 lb_pick_slot(const int family, const struct svc_value *svc, const void *fe,
					  __u32 client_hash)
{
	if (lb_alg_counts(svc->algorithm))
		return lb_least_loaded(family, svc, fe);
	return lb_pick_slot_common(family == AF_INET6 ? (void *)&SVCMAP_MAP_MAGLEV6 : (void *)&SVCMAP_MAP_MAGLEV, svc,
				   lb_key_addr32(family, fe), svc_key_f(family, fe, port), client_hash);
}

/*
 * The backend of the slot at key (*slot: the one the algorithm picked), in
 * the maps given. The agent writes a shrinking service's new slots
 * and count before it deletes the old slots and backends, so a miss here is
 * only the narrow window of a reader that saw the old count; it falls back
 * to slot 1, which always exists while count > 0.
 */
static __always_inline void *lb_slot_backend(void *svc_map, void *be_map, void *key, __u16 *slot, __u32 *backend_id)
{
	struct svc_value *v;

	v = bpf_map_lookup_elem(svc_map, key);
	if (!v) {
		*slot = 1;
		v = bpf_map_lookup_elem(svc_map, key);
		if (!v)
			return NULL;
	}
	*backend_id = v->backend_id;
	return bpf_map_lookup_elem(be_map, backend_id);
}

/* Backend selection for a frontend (key) by its algorithm (lb_pick_slot()):
 * the family's struct backend_value or backend6_value. */
static __always_inline void *lb_select_backend(const int family, void *key, const struct svc_value *svc,
					       __u32 client_hash, __u32 *backend_id)
{
	svc_key_f(family, key, slot) = lb_pick_slot(family, svc, key, client_hash);
	return lb_slot_backend(lb_svc_map(family), lb_be_map(family), key, &svc_key_f(family, key, slot), backend_id);
}

#define NSEC_PER_SEC 1000000000ULL

/*
 * sessionAffinity: ClientIP. A client's remembered backend is used when it
 * is still current, and only then:
 *  - younger than the frontend's affinity_timeout, counted from its last use
 *    (bpf_ktime_get_boot_ns(): CLOCK_BOOTTIME, so a suspended node does not
 *    stretch a timeout that Kubernetes gives in wall seconds);
 *  - its slot (1..count) of the frontend still holds its backend id.
 *
 * The slot check is why the entry stores the slot: one more lookup in the
 * services map, O(1), and nothing else for the agent to maintain. The slots
 * are the frontend's current backends, written in the order that keeps
 * every reader consistent, so a backend that left the service (or went
 * terminating while others are ready: the model takes it out of the slots),
 * or whose id was freed and reused, fails the check and the client chooses
 * again at once. A stale id is never trusted by itself. (Cilium keeps an
 * agent-maintained {rev_nat_id, backend_id} match map instead: a second copy
 * of the slots that the sync would have to order against them.) The price:
 * when a frontend shrinks, the agent moves its last slot's backend into the
 * freed slot, and the clients of that one backend choose again once.
 * The backend's state is not looked at, as random selection does not: what
 * the slots hold is what may be used.
 */
static __always_inline void *lb_affinity_current(void *svc_map, void *be_map, const struct affinity_value *aff,
						 void *key, __u16 *slot, const struct svc_value *svc, __u32 *backend_id,
						 __u64 now)
{
	/* Each field read once: another CPU may be replacing the entry. */
	__u64 last = aff->last_used;
	__u32 id = aff->backend_id;
	__u16 s = aff->slot, was = *slot;
	struct svc_value *v;
	void *be;

	/* An entry another CPU refreshed a moment later than `now` is fresh. */
	if (now > last && now - last > (__u64)svc->affinity_timeout * NSEC_PER_SEC)
		return NULL;
	if (s == 0 || s > svc->count)
		return NULL;
	*slot = s;
	v = bpf_map_lookup_elem(svc_map, key);
	be = v && v->backend_id == id ? bpf_map_lookup_elem(be_map, &id) : NULL;
	if (!be) {
		*slot = was;
		return NULL;
	}
	*backend_id = id;
	return be;
}

/*
 * Backend selection for a frontend with SVC_F_AFFINITY (the callers test
 * the flag: other frontends never touch the affinity map), in two halves
 * around the frontend's own selection (lb_affinity_select()). *akey names the client and the frontend. A
 * current entry is used and its last use refreshed (lb_affinity_find());
 * otherwise the frontend's algorithm chooses, as without affinity, and the
 * choice is remembered (lb_affinity_remember()).
 */
static __always_inline void *lb_affinity_find(void *svc_map, void *be_map, const struct affinity_key *akey, void *key,
					      __u16 *slot, const struct svc_value *svc, __u32 *backend_id, __u64 now,
					      struct affinity_value **entry)
{
	struct affinity_value *aff;
	void *be;

	aff = bpf_map_lookup_elem(&SVCMAP_MAP_AFFINITY, akey);
	*entry = aff;
	if (!aff)
		return NULL;
	be = lb_affinity_current(svc_map, be_map, aff, key, slot, svc, backend_id, now);
	if (be)
		aff->last_used = now;
	return be;
}

/* be (at *slot, id *backend_id) was chosen for a client whose entry was
 * stale (aff) or missing (NULL): stored, unless a concurrent first choice
 * of the same client won, which is then followed. */
static __always_inline void *lb_affinity_remember(void *svc_map, void *be_map, const struct affinity_key *akey,
						  void *key, __u16 *slot, const struct svc_value *svc, void *be,
						  __u32 *backend_id, __u64 now, struct affinity_value *aff)
{
	struct affinity_value fresh = {};

	fresh.last_used = now;
	fresh.backend_id = *backend_id;
	fresh.slot = *slot;
	if (aff) {
		/* Stale: replaced whole, so a reader sees the old or the new entry. */
		bpf_map_update_elem(&SVCMAP_MAP_AFFINITY, akey, &fresh, BPF_ANY);
		return be;
	}
	if (bpf_map_update_elem(&SVCMAP_MAP_AFFINITY, akey, &fresh, BPF_NOEXIST) == 0)
		return be;
	/* Another connection of the same client (on another CPU) stored its
	 * choice first: follow it, so that connections opened together still
	 * share one backend. */
	aff = bpf_map_lookup_elem(&SVCMAP_MAP_AFFINITY, akey);
	if (aff) {
		void *won = lb_affinity_current(svc_map, be_map, aff, key, slot, svc, backend_id, now);

		if (won)
			return won;
	}
	bpf_map_update_elem(&SVCMAP_MAP_AFFINITY, akey, &fresh, BPF_ANY);
	return be;
}

/* sessionAffinity for a frontend (client_hash as for lb_select_backend()). */
static __always_inline void *lb_affinity_select(const int family, void *key, const struct svc_value *svc,
						const struct affinity_key *akey, __u32 client_hash, __u32 *backend_id)
{
	void *svc_map = lb_svc_map(family), *be_map = lb_be_map(family);
	__u16 *slot = &svc_key_f(family, key, slot);
	struct affinity_value *aff;
	__u64 now = bpf_ktime_get_boot_ns();
	void *be;

	be = lb_affinity_find(svc_map, be_map, akey, key, slot, svc, backend_id, now, &aff);
	if (be)
		return be;
	be = lb_select_backend(family, key, svc, client_hash, backend_id);
	if (!be)
		return NULL;
	return lb_affinity_remember(svc_map, be_map, akey, key, slot, svc, be, backend_id, now, aff);
}

#endif /* SVCMAP_LIB_LB_H */
