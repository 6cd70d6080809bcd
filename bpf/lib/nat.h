/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Address and port translation: applying a conntrack entry's rewrite to a
 * packet, and choosing a SNAT source port that no other flow to the same
 * backend holds.
 */
#ifndef SVCMAP_LIB_NAT_H
#define SVCMAP_LIB_NAT_H

#include "csum.h"
#include "ct.h"

/* The agent always writes the SNAT port range (SNAT_PORT_MIN/MAX in
 * src/agent/tc-datapath.ts, which is where it is chosen). These only stand
 * in for a config without a usable range (0 or inverted), and are the same
 * ports: above Linux's default ephemeral range (32768-60999). */
#define SNAT_PORT_MIN_FALLBACK 61000
#define SNAT_PORT_MAX_FALLBACK 65535

/* Ports tried for a new SNAT flow before it is dropped. */
#define SNAT_PORT_TRIES 16

/*
 * Rewrites the fields that v sets (non-zero and different from the
 * packet's), with checksums, and updates p to the new tuple. 0 or a
 * negative errno; on error the packet may be half rewritten and must be
 * dropped.
 */
static __always_inline int nat4_rewrite(struct __sk_buff *skb, struct pkt4 *p,
					const struct ct_value *v)
{
	int err;

	if (v->new_saddr && v->new_saddr != p->saddr) {
		err = csum4_store_addr(skb, p, IP4_SADDR_OFF, p->saddr, v->new_saddr);
		if (err < 0)
			return err;
		p->saddr = v->new_saddr;
	}
	if (v->new_daddr && v->new_daddr != p->daddr) {
		err = csum4_store_addr(skb, p, IP4_DADDR_OFF, p->daddr, v->new_daddr);
		if (err < 0)
			return err;
		p->daddr = v->new_daddr;
	}
	if (v->new_sport && v->new_sport != p->sport) {
		err = csum4_store_port(skb, p, p->l4_off + L4_SPORT_OFF, p->sport, v->new_sport);
		if (err < 0)
			return err;
		p->sport = v->new_sport;
	}
	if (v->new_dport && v->new_dport != p->dport) {
		err = csum4_store_port(skb, p, p->l4_off + L4_DPORT_OFF, p->dport, v->new_dport);
		if (err < 0)
			return err;
		p->dport = v->new_dport;
	}
	return 0;
}

/* The SNAT source port range of cfg, host order, inclusive: the one place
 * that reads it, so choosing a port and recognising a reply agree. */
static __always_inline void nat4_snat_range(const struct svcmap_config *cfg,
					    __u32 *min, __u32 *max)
{
	*min = cfg->snat_port_min;
	*max = cfg->snat_port_max;
	if (*min == 0 || *max < *min) {
		*min = SNAT_PORT_MIN_FALLBACK;
		*max = SNAT_PORT_MAX_FALLBACK;
	}
}

/*
 * Reserves a SNAT source port by inserting the flow's reply entry:
 * `reply` is {backend, node_ip, backend port, (port), proto,
 * CT_DIR_REPLY_IN}, and the port goes into reply->dport. The insert is
 * BPF_NOEXIST, so a port some other flow to the same backend address and
 * port holds is never taken over, also not by a concurrent CPU. The
 * client's own port is tried first when it is in range (it keeps ports
 * stable where it can, as netfilter's masquerade does); then random ports.
 * Returns the port (network order) or 0 when every try was taken.
 * A port comes back when its reply entry goes: the agent's conntrack GC
 * removes a flow's entries once it is closed or idle for long enough (see
 * CT_F_CLOSING), a stale flow is forgotten (ct4_forget_flow()), or the LRU
 * evicts it.
 */
static __always_inline __be16 nat4_snat_reserve(const struct svcmap_config *cfg,
						struct ct_key *reply,
						const struct ct_value *reply_val,
						__be16 client_port)
{
	__u32 min, max, span, port, i;

	nat4_snat_range(cfg, &min, &max);
	span = max - min + 1;
	port = bpf_ntohs(client_port);
	if (port < min || port > max)
		port = min + bpf_get_prandom_u32() % span;

	for (i = 0; i < SNAT_PORT_TRIES; i++) {
		reply->dport = bpf_htons((__u16)port);
		if (ct4_insert(reply, reply_val, BPF_NOEXIST) == 0)
			return reply->dport;
		port = min + bpf_get_prandom_u32() % span;
	}
	return 0;
}

#endif /* SVCMAP_LIB_NAT_H */
