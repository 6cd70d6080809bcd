/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Connection tracking for the tc programs: a flow is remembered by the
 * 5-tuple of its packets as they arrive, once per direction (CT_DIR_*), and
 * each entry holds the translation its packets get. Each entry also carries
 * the flow's state, coarsely (CT_F_SEEN_REPLY, CT_F_FIN_*, CT_F_CLOSING),
 * and when a packet was last seen: the agent's conntrack GC (src/agent/
 * ct-gc.ts) removes a flow's two entries together once it has been idle
 * longer than its state allows, which gives its SNAT port back (a closed
 * flow's port goes to a new flow sooner, see nat_snat_take_over() in
 * nat.h). The map is an LRU as well, so a full map still makes room for
 * new flows.
 *
 * Both families: svcmap_ct (struct ct_key/ct_value) and svcmap_ct6 (struct
 * ct6_key/ct6_value) follow the same rules, which the agent's GC relies
 * on. The cores take the family as a constant and the family's map, key and
 * entry as pointers; only the key builders (ct4_key_of()/ct6_key_of(),
 * ct4_peer_key()/ct6_peer_key()) and the backend check are per family.
 */
#ifndef SVCMAP_LIB_CT_H
#define SVCMAP_LIB_CT_H

#include "packet.h"
#include "packet6.h"
#include "maps_tc.h"
#include "maps.h"
#include "conns.h"

/* last_seen is written at most this often per entry, not on every packet:
 * a write per packet would bounce the entry's cache line between CPUs. */
#define CT_REFRESH_NS 1000000000ULL

/* A field both families' keys (values) have, of either's (pkt_f(): packet6.h). */
#define ct_key_f(family, k, f) fam_field(family, struct ct_key, struct ct6_key, k, f)
#define ct_val_f(family, v, f) fam_field(family, struct ct_value, struct ct6_value, v, f)
/* An address field of either family's key (value, packet), as words. */
#define ct_key_addr(family, k, f) fam_addr(family, struct ct_key, struct ct6_key, k, f)
#define ct_val_addr(family, v, f) fam_addr(family, struct ct_value, struct ct6_value, v, f)

/* Room for a key of either family on the stack. */
union ct_key_any {
	struct ct_key v4;
	struct ct6_key v6;
};

static __always_inline void *ct_map(const int family)
{
	return family == AF_INET6 ? (void *)&SVCMAP_MAP_CT6 : (void *)&SVCMAP_MAP_CT;
}

/* The key of packet p (struct pkt4 or pkt6) in direction dir. */
static __always_inline void ct4_key_of(struct ct_key *k, const struct pkt4 *p)
{
	k->saddr = p->saddr;
	k->daddr = p->daddr;
}

static __always_inline void ct6_key_of(struct ct6_key *k, const struct pkt6 *p)
{
	__builtin_memcpy(k->saddr, p->saddr, sizeof(k->saddr));
	__builtin_memcpy(k->daddr, p->daddr, sizeof(k->daddr));
}

static __always_inline void ct_key_of(const int family, void *k, const void *p, __u8 dir)
{
	if (family == AF_INET6) {
		__builtin_memset(k, 0, sizeof(struct ct6_key));
		ct6_key_of(k, p);
	} else {
		__builtin_memset(k, 0, sizeof(struct ct_key));
		ct4_key_of(k, p);
	}
	ct_key_f(family, k, sport) = pkt_f(family, p, sport);
	ct_key_f(family, k, dport) = pkt_f(family, p, dport);
	ct_key_f(family, k, proto) = pkt_f(family, p, proto);
	ct_key_f(family, k, dir) = dir;
}

/* The CT_F_* bits that are the flow's state, not its translation. */
#define CT_F_STATE (CT_F_SEEN_REPLY | CT_F_CLOSING | CT_F_FIN_FWD | CT_F_FIN_REPLY)

/* What a packet (its protocol and TCP flags), met in direction dir, says
 * about its flow: state bits to add. */
static __always_inline __u8 ct_state_of(__u8 proto, __u8 tcp_flags, __u8 dir)
{
	__u8 s = 0;

	if (dir != CT_DIR_FWD)
		s |= CT_F_SEEN_REPLY;
	if (proto == IPPROTO_TCP) {
		if (tcp_flags & TCP_FLAG_RST)
			s |= CT_F_CLOSING;
		if (tcp_flags & TCP_FLAG_FIN)
			s |= dir == CT_DIR_FWD ? CT_F_FIN_FWD : CT_F_FIN_REPLY;
	}
	return s;
}

/* An entry whose state did not change: its last_seen, refreshed at most
 * once per CT_REFRESH_NS. A closed flow's last packets are few, and each
 * restarts the time its SNAT port is held (SNAT_CLOSED_HOLD_NS in nat.h). */
static __always_inline void ct_refresh(__u64 *last_seen, __u8 flags, __u64 now)
{
	if ((flags & CT_F_CLOSING) || now - *last_seen > CT_REFRESH_NS)
		*last_seen = now;
}

/* flags with the state bits `add`; a FIN from each side makes it CT_F_CLOSING. */
static __always_inline __u8 ct_state_merge(__u8 flags, __u8 add)
{
	flags |= add & CT_F_STATE;
	if ((flags & (CT_F_FIN_FWD | CT_F_FIN_REPLY)) == (CT_F_FIN_FWD | CT_F_FIN_REPLY))
		flags |= CT_F_CLOSING;
	return flags;
}

/*
 * The key of the other entry of the flow that entry {self, v} belongs to:
 * the reverse of the tuple v translates packets into. For a forward entry
 * that is the reply entry (from the backend: to the SNAT address and port,
 * CT_DIR_REPLY_IN, or to the client, CT_DIR_REPLY_OUT); for a reply entry
 * (whose packets become frontend -> client) it is the forward entry.
 * The addresses per family (an address of v left 0 means "unchanged").
 */
static __always_inline void ct4_peer_key(struct ct_key *k, const struct ct_key *self, const struct ct_value *v)
{
	k->saddr = v->new_daddr ? v->new_daddr : self->daddr;
	k->daddr = v->new_saddr ? v->new_saddr : self->saddr;
}

static __always_inline void ct6_peer_key(struct ct6_key *k, const struct ct6_key *self, const struct ct6_value *v)
{
	addr6_or(k->saddr, v->new_daddr, self->daddr);
	addr6_or(k->daddr, v->new_saddr, self->saddr);
}

static __always_inline void ct_peer_key(const int family, void *k, const void *self, const void *v)
{
	__be16 new_sport = ct_val_f(family, v, new_sport);
	__be16 new_dport = ct_val_f(family, v, new_dport);

	if (family == AF_INET6) {
		__builtin_memset(k, 0, sizeof(struct ct6_key));
		ct6_peer_key(k, self, v);
	} else {
		__builtin_memset(k, 0, sizeof(struct ct_key));
		ct4_peer_key(k, self, v);
	}
	ct_key_f(family, k, sport) = new_dport ? new_dport : ct_key_f(family, self, dport);
	ct_key_f(family, k, dport) = new_sport ? new_sport : ct_key_f(family, self, sport);
	ct_key_f(family, k, proto) = ct_key_f(family, self, proto);
	if (ct_key_f(family, self, dir) != CT_DIR_FWD)
		ct_key_f(family, k, dir) = CT_DIR_FWD;
	else
		ct_key_f(family, k, dir) = (ct_val_f(family, v, flags) & CT_F_SNAT) ? CT_DIR_REPLY_IN :
										      CT_DIR_REPLY_OUT;
}

/* Whether keys a and b name the same tuple (addresses and ports). */
static __always_inline int ct_same_tuple(const int family, const void *a, const void *b)
{
	const struct ct6_key *a6 = a, *b6 = b;
	const struct ct_key *a4 = a, *b4 = b;

	if (ct_key_f(family, a, sport) != ct_key_f(family, b, sport) ||
	    ct_key_f(family, a, dport) != ct_key_f(family, b, dport))
		return 0;
	if (family == AF_INET6)
		return addr6_eq(a6->saddr, b6->saddr) && addr6_eq(a6->daddr, b6->daddr);
	return a4->saddr == b4->saddr && a4->daddr == b4->daddr;
}

/*
 * Live connection counts at tc (struct backend_conns, field tc, in
 * svcmap_be_conns or for IPv6 backends svcmap_conns6): a flow through a
 * frontend whose algorithm reads the counts (CT_F_COUNTED) counts for its
 * backend from the creation of its forward entry (when it is not created
 * closing) until the forward entry gains CT_F_CLOSING, or is forgotten or
 * collected while still open. Only the forward entry's state is looked at,
 * so each flow counts once. The decrement is skipped when the entry's
 * backend id no longer names the endpoint the flow went to (gone, or
 * reused), as for the socket LB.
 */
static __always_inline void *ct_conns_map(const int family)
{
	return family == AF_INET6 ? (void *)&SVCMAP_MAP_BE_CONNS6 : (void *)&SVCMAP_MAP_BE_CONNS;
}

/* Whether the entry's backend id still names the endpoint the flow went to. */
static __always_inline int ct_backend_current(const int family, const void *v)
{
	__u32 id = ct_val_f(family, v, backend_id);
	const struct backend6_value *be6;
	const struct backend_value *be4;
	const struct ct6_value *v6 = v;
	const struct ct_value *v4 = v;

	if (family == AF_INET6) {
		be6 = bpf_map_lookup_elem(&SVCMAP_MAP_BACKENDS6, &id);
		return be6 && addr6_eq(be6->addr, v6->new_daddr) && be6->port == v6->new_dport;
	}
	be4 = bpf_map_lookup_elem(&SVCMAP_MAP_BACKENDS, &id);
	return be4 && be4->addr == v4->new_daddr && be4->port == v4->new_dport;
}

static __always_inline void ct_uncount(const int family, const void *fwd)
{
	if ((ct_val_f(family, fwd, flags) & CT_F_COUNTED) && ct_backend_current(family, fwd))
		conns_add_in(ct_conns_map(family), ct_val_f(family, fwd, backend_id), CONNS_FIELD_TC, -1);
}

/* A forward entry whose flags went from `was` to `now` stops counting when it
 * starts closing. */
static __always_inline int ct_stops_counting(__u8 was, __u8 now)
{
	return !(was & CT_F_CLOSING) && (now & CT_F_CLOSING);
}

/* A new forward entry's flags, CT_F_COUNTED added when its frontend's
 * algorithm reads the counts and it is not created closing. */
static __always_inline __u8 ct_count_new(__u8 flags, __u8 alg)
{
	if (!(flags & CT_F_CLOSING) && lb_alg_counts(alg))
		flags |= CT_F_COUNTED;
	return flags;
}

/* The flow's other entry, met from direction dir, gets the state `flags`
 * merged into its own: 1 when it is the forward entry and that made it
 * start closing (the caller takes it off its count). */
static __always_inline int ct_peer_merge(__u8 *peer_flags, __u8 flags, __u8 dir)
{
	__u8 was = *peer_flags;
	__u8 now = ct_state_merge(was, flags);

	if (now == was)
		return 0;
	*peer_flags = now;
	return dir != CT_DIR_FWD && ct_stops_counting(was, now);
}

/*
 * The entry of key k in map (the family's conntrack map), NULL if none,
 * with the state bits `state` that its packet brings. Its last_seen is
 * refreshed (at most once per CT_REFRESH_NS), and what the packet says
 * about the flow's state is written at once, to this entry and to the
 * flow's other entry, so that either alone has the whole state.
 *
 * The flags are a plain read-modify-write (BPF has no atomic or on a
 * byte): two CPUs changing the same entry's state at the same instant may
 * lose one bit. Later packets of the same kind set it again, the flow's
 * other entry has its own copy, and the GC reads both entries; the worst
 * left is a flow kept for a longer lifetime than its state allows.
 */
static __always_inline void *__ct_lookup(const int family, void *map, const void *k, __u8 state)
{
	__u8 dir = ct_key_f(family, k, dir);
	union ct_key_any pk;
	void *v, *peer;
	__u8 flags;
	__u64 now;

	v = bpf_map_lookup_elem(map, k);
	if (!v)
		return NULL;
	now = bpf_ktime_get_ns();
	flags = ct_state_merge(ct_val_f(family, v, flags), state);
	if (flags == ct_val_f(family, v, flags)) {
		ct_refresh(&ct_val_f(family, v, last_seen), flags, now);
		return v;
	}
	if (dir == CT_DIR_FWD && ct_stops_counting(ct_val_f(family, v, flags), flags))
		ct_uncount(family, v);
	ct_val_f(family, v, flags) = flags;
	ct_val_f(family, v, last_seen) = now;
	ct_peer_key(family, &pk, k, v);
	peer = bpf_map_lookup_elem(map, &pk);
	if (peer && ct_peer_merge(&ct_val_f(family, peer, flags), flags, dir))
		ct_uncount(family, peer);
	return v;
}

/* The entry for packet p (struct pkt4 or pkt6) in direction dir: __ct_lookup(). */
static __always_inline void *ct_lookup(const int family, const void *p, __u8 dir)
{
	union ct_key_any k;

	ct_key_of(family, &k, p, dir);
	return __ct_lookup(family, ct_map(family), &k,
			   ct_state_of(pkt_f(family, p, proto), pkt_f(family, p, tcp_flags), dir));
}

/* 0, -EEXIST with BPF_NOEXIST when the key is taken, or another negative errno. */
static __always_inline int ct_insert(const int family, const void *k, const void *v, __u64 flags)
{
	return bpf_map_update_elem(ct_map(family), k, v, flags);
}

static __always_inline void ct_delete(const int family, const void *k)
{
	bpf_map_delete_elem(ct_map(family), k);
}

/*
 * The reply entry of the flow whose forward entry is v (the entry for
 * packet p, in CT_DIR_FWD), keyed by the translated tuple seen from the
 * backend (its key in *rep), or NULL when there is none that names this
 * forward entry back: a closed flow's SNAT port may have gone to another
 * flow (nat_snat_take_over()), or the entry was removed (by the LRU, or by
 * the agent's GC in a race with a take-over).
 */
static __always_inline void *ct_reply_of(const int family, const void *p, const void *v, void *rep)
{
	union ct_key_any fwd, back;
	void *rv;

	ct_key_of(family, &fwd, p, CT_DIR_FWD);
	ct_peer_key(family, rep, &fwd, v);
	rv = bpf_map_lookup_elem(ct_map(family), rep);
	if (!rv)
		return NULL;
	ct_peer_key(family, &back, rep, rv);
	if (!ct_same_tuple(family, &back, &fwd))
		return NULL;
	return rv;
}

/*
 * Forgets the flow whose forward entry is v (the entry for packet p, in
 * CT_DIR_FWD): the forward entry and its reply entry (ct_reply_of()),
 * never another flow's. For a SNATed flow that gives its SNAT port back.
 * A flow still open stops counting.
 */
static __always_inline void ct_forget_flow(const int family, const void *p, const void *v)
{
	union ct_key_any fwd, rep;

	if (ct_reply_of(family, p, v, &rep))
		ct_delete(family, &rep);
	if (!(ct_val_f(family, v, flags) & CT_F_CLOSING))
		ct_uncount(family, v);
	ct_key_of(family, &fwd, p, CT_DIR_FWD);
	ct_delete(family, &fwd);
}

/*
 * A new TCP connection (a SYN without ACK) that svcmap leaves untranslated
 * may come from a port an earlier, translated flow of the same client used,
 * to the very backend that flow went to (a client that connects through a
 * Service, then straight to the pod). The earlier flow's reply entry keys
 * exactly this connection's answers (backend -> client, CT_DIR_REPLY_OUT)
 * and would show them as the frontend's, so the client's SYN would never be
 * answered. Its port being in use again, the earlier flow is over: it is
 * forgotten, both entries, as ct_forget_flow() forgets a flow.
 */
static __always_inline void ct_forget_replaced(const int family, const void *p)
{
	union ct_key_any rep, fwd;
	void *rv, *fv;

	if (pkt_f(family, p, proto) != IPPROTO_TCP ||
	    (pkt_f(family, p, tcp_flags) & (TCP_FLAG_SYN | TCP_FLAG_ACK)) != TCP_FLAG_SYN)
		return;
	/* The answer's tuple: p's reversed. */
	if (family == AF_INET6) {
		__builtin_memset(&rep, 0, sizeof(struct ct6_key));
		__builtin_memcpy(rep.v6.saddr, ((const struct pkt6 *)p)->daddr, sizeof(rep.v6.saddr));
		__builtin_memcpy(rep.v6.daddr, ((const struct pkt6 *)p)->saddr, sizeof(rep.v6.daddr));
	} else {
		__builtin_memset(&rep, 0, sizeof(struct ct_key));
		rep.v4.saddr = ((const struct pkt4 *)p)->daddr;
		rep.v4.daddr = ((const struct pkt4 *)p)->saddr;
	}
	ct_key_f(family, &rep, sport) = pkt_f(family, p, dport);
	ct_key_f(family, &rep, dport) = pkt_f(family, p, sport);
	ct_key_f(family, &rep, proto) = IPPROTO_TCP;
	ct_key_f(family, &rep, dir) = CT_DIR_REPLY_OUT;
	rv = bpf_map_lookup_elem(ct_map(family), &rep);
	if (!rv)
		return;
	ct_peer_key(family, &fwd, &rep, rv);
	fv = bpf_map_lookup_elem(ct_map(family), &fwd);
	if (fv) {
		if (!(ct_val_f(family, fv, flags) & CT_F_CLOSING))
			ct_uncount(family, fv);
		ct_delete(family, &fwd);
	}
	ct_delete(family, &rep);
}

#endif /* SVCMAP_LIB_CT_H */
