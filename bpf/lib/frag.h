/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * IP fragments of translated datagrams. Only the first fragment carries
 * the ports, so it finds its flow (and gets its translation) like any
 * packet; its addresses' translation is then remembered by the datagram's
 * {saddr, daddr, IP id, proto} (a CT_DIR_FRAG entry in the conntrack map),
 * and each later fragment gets the same addresses (IPv4 header checksum
 * only: the L4 checksum, in the first fragment, covers the whole datagram
 * and was updated there). The entry goes with the last fragment (MF clear);
 * one whose last fragment never came is the GC's (or the LRU's). Cilium
 * keeps its fragments map the same way.
 *
 * Limits: a fragment that arrives ahead of its first, or behind its last
 * (the entry is gone), is not translated (counted as DP_R_FRAGMENT and
 * handed to the stack, which cannot deliver it: the datagram is lost, as
 * with loss on the wire); two datagrams with the same {saddr, daddr, id,
 * proto} in flight at once share an entry.
 */
#ifndef SVCMAP_LIB_FRAG_H
#define SVCMAP_LIB_FRAG_H

#include "ct.h"

static __always_inline void frag4_key(struct ct_key *k, const struct pkt4 *p)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->saddr = p->saddr;
	k->daddr = p->daddr;
	k->sport = p->ip_id;
	k->proto = p->proto;
	k->dir = CT_DIR_FRAG;
}

/* A first fragment, about to be translated as xlate says: remember its
 * addresses' translation for the rest of the datagram. */
static __always_inline void frag4_remember(const struct pkt4 *p, const struct ct_value *xlate)
{
	struct ct_value v = {};
	struct ct_key k;

	if (p->frag != PKT4_FRAG_FIRST)
		return;
	frag4_key(&k, p);
	v.new_saddr = xlate->new_saddr;
	v.new_daddr = xlate->new_daddr;
	v.backend_id = xlate->backend_id;
	v.rev_nat_id = xlate->rev_nat_id;
	v.last_seen = bpf_ktime_get_ns();
	/* A failed insert leaves the later fragments untranslated: counted
	 * as DP_R_FRAGMENT when they come. */
	ct_insert(AF_INET, &k, &v, BPF_ANY);
}

/*
 * A fragment after the first: the addresses it gets in *out (ports and
 * state untouched), 0 when its datagram's first fragment was translated;
 * -1 when not (none seen, or not one svcmap translates).
 */
static __always_inline int frag4_later(const struct pkt4 *p, struct ct_value *out)
{
	struct ct_value *v;
	struct ct_key k;

	frag4_key(&k, p);
	v = bpf_map_lookup_elem(&SVCMAP_MAP_CT, &k);
	if (!v)
		return -1;
	__builtin_memset(out, 0, sizeof(*out));
	out->new_saddr = v->new_saddr;
	out->new_daddr = v->new_daddr;
	if (p->frag_last)
		ct_delete(AF_INET, &k);
	return 0;
}

#endif /* SVCMAP_LIB_FRAG_H */
