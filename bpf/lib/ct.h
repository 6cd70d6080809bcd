/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Connection tracking for the tc programs: a flow is remembered by the
 * 5-tuple of its packets as they arrive, once per direction (CT_DIR_*), and
 * each entry holds the translation its packets get. Each entry also carries
 * the flow's state, coarsely (CT_F_SEEN_REPLY, CT_F_FIN_*, CT_F_CLOSING),
 * and when a packet was last seen: the agent's conntrack GC (src/agent/
 * ct-gc.ts) removes a flow's two entries together once it has been idle
 * longer than its state allows, which gives its SNAT port back (a closed
 * flow's port goes to a new flow sooner, see nat4_snat_take_over() in
 * nat.h). The map is an LRU as well, so a full map still makes room for
 * new flows.
 */
#ifndef SVCMAP_LIB_CT_H
#define SVCMAP_LIB_CT_H

#include "packet.h"
#include "maps_tc.h"
#include "conns.h"

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

/* The CT_F_* bits that are the flow's state, not its translation. */
#define CT_F_STATE (CT_F_SEEN_REPLY | CT_F_CLOSING | CT_F_FIN_FWD | CT_F_FIN_REPLY)

/* What a packet (its protocol and TCP flags), met in direction dir, says
 * about its flow: state bits to add. Either family. */
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

static __always_inline __u8 ct4_state_of(const struct pkt4 *p, __u8 dir)
{
	return ct_state_of(p->proto, p->tcp_flags, dir);
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
 */
static __always_inline void ct4_peer_key(struct ct_key *k, const struct ct_key *self,
					 const struct ct_value *v)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->saddr = v->new_daddr ? v->new_daddr : self->daddr;
	k->sport = v->new_dport ? v->new_dport : self->dport;
	k->daddr = v->new_saddr ? v->new_saddr : self->saddr;
	k->dport = v->new_sport ? v->new_sport : self->sport;
	k->proto = self->proto;
	if (self->dir != CT_DIR_FWD)
		k->dir = CT_DIR_FWD;
	else
		k->dir = (v->flags & CT_F_SNAT) ? CT_DIR_REPLY_IN : CT_DIR_REPLY_OUT;
}

/*
 * Live connection counts at tc (struct backend_conns, field tc; IPv6 flows
 * the same in svcmap_conns6, ct6_uncount()): a flow
 * through a frontend whose algorithm reads the counts (CT_F_COUNTED) counts
 * for its backend from the creation of its forward entry (when it is not
 * created closing) until the forward entry gains CT_F_CLOSING, or is
 * forgotten or collected while still open. Only the forward entry's
 * state is looked at, so each flow counts once. The decrement is skipped
 * when the entry's backend id no longer names the endpoint the flow went
 * to (gone, or reused), as for the socket LB.
 */
/* Whether the entry's backend id still names the endpoint the flow went to. */
static __always_inline int ct4_backend_current(const struct ct_value *v)
{
	struct backend_value *be;
	__u32 id = v->backend_id;

	be = bpf_map_lookup_elem(&SVCMAP_MAP_BACKENDS, &id);
	return be && be->addr == v->new_daddr && be->port == v->new_dport;
}

static __always_inline void ct4_uncount(const struct ct_value *fwd)
{
	if ((fwd->flags & CT_F_COUNTED) && ct4_backend_current(fwd))
		conns_add(fwd->backend_id, CONNS_FIELD_TC, -1);
}

/* A forward entry whose flags went from `was` to `now` stops counting when it
 * starts closing. Either family. */
static __always_inline int ct_stops_counting(__u8 was, __u8 now)
{
	return !(was & CT_F_CLOSING) && (now & CT_F_CLOSING);
}

/* A new forward entry's flags, CT_F_COUNTED added when its frontend's
 * algorithm reads the counts and it is not created closing. Either family. */
static __always_inline __u8 ct_count_new(__u8 flags, __u8 alg)
{
	if (!(flags & CT_F_CLOSING) && lb_alg_counts(alg))
		flags |= CT_F_COUNTED;
	return flags;
}

/* The flow's other entry, met from direction dir, gets the state `flags`
 * merged into its own: 1 when it is the forward entry and that made it
 * start closing (the caller takes it off its count). Either family. */
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
 * The entry for this packet in direction dir, NULL if none. Its last_seen
 * is refreshed (at most once per CT_REFRESH_NS), and what the packet says
 * about the flow's state is written at once, to this entry and to the
 * flow's other entry, so that either alone has the whole state.
 *
 * The flags are a plain read-modify-write (BPF has no atomic or on a
 * byte): two CPUs changing the same entry's state at the same instant may
 * lose one bit. Later packets of the same kind set it again, the flow's
 * other entry has its own copy, and the GC reads both entries; the worst
 * left is a flow kept for a longer lifetime than its state allows.
 */
static __always_inline struct ct_value *ct4_lookup(const struct pkt4 *p, __u8 dir)
{
	struct ct_value *v, *peer;
	struct ct_key k, pk;
	__u8 flags;
	__u64 now;

	ct4_key_of(&k, p, dir);
	v = bpf_map_lookup_elem(&SVCMAP_MAP_CT, &k);
	if (!v)
		return NULL;
	now = bpf_ktime_get_ns();
	flags = ct_state_merge(v->flags, ct4_state_of(p, dir));
	if (flags == v->flags) {
		ct_refresh(&v->last_seen, flags, now);
		return v;
	}
	if (dir == CT_DIR_FWD && ct_stops_counting(v->flags, flags))
		ct4_uncount(v);
	v->flags = flags;
	v->last_seen = now;
	ct4_peer_key(&pk, &k, v);
	peer = bpf_map_lookup_elem(&SVCMAP_MAP_CT, &pk);
	if (peer && ct_peer_merge(&peer->flags, flags, dir))
		ct4_uncount(peer);
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
 * The reply entry of the flow whose forward entry is v (the entry for
 * packet p, in CT_DIR_FWD), keyed by the translated tuple seen from the
 * backend (its key in *rep), or NULL when there is none that names this
 * forward entry back: a closed flow's SNAT port may have gone to another
 * flow (nat4_snat_take_over()), or the entry was removed (by the LRU, or by
 * the agent's GC in a race with a take-over).
 */
static __always_inline struct ct_value *ct4_reply_of(const struct pkt4 *p, const struct ct_value *v,
						     struct ct_key *rep)
{
	struct ct_key fwd, back;
	struct ct_value *rv;

	ct4_key_of(&fwd, p, CT_DIR_FWD);
	ct4_peer_key(rep, &fwd, v);
	rv = bpf_map_lookup_elem(&SVCMAP_MAP_CT, rep);
	if (!rv)
		return NULL;
	ct4_peer_key(&back, rep, rv);
	if (back.saddr != fwd.saddr || back.daddr != fwd.daddr ||
	    back.sport != fwd.sport || back.dport != fwd.dport)
		return NULL;
	return rv;
}

/*
 * Forgets the flow whose forward entry is v (the entry for packet p, in
 * CT_DIR_FWD): the forward entry and its reply entry (ct4_reply_of()),
 * never another flow's. For a SNATed flow that gives its SNAT port back.
 * A flow still open stops counting.
 */
static __always_inline void ct4_forget_flow(const struct pkt4 *p, const struct ct_value *v)
{
	struct ct_key fwd, rep;

	if (ct4_reply_of(p, v, &rep))
		ct4_delete(&rep);
	if (!(v->flags & CT_F_CLOSING))
		ct4_uncount(v);
	ct4_key_of(&fwd, p, CT_DIR_FWD);
	ct4_delete(&fwd);
}

#endif /* SVCMAP_LIB_CT_H */
