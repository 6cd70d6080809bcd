/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ICMPv6 errors about translated flows (RFC 4443: destination unreachable,
 * packet too big, time exceeded), translated back as icmp.h does for IPv4:
 * the quoted packet's addresses and ports, its TCP/UDP checksum where the
 * quote holds it, and the outer destination (and the outer source when the
 * quoted packet's destination itself answered), so that PMTU discovery and
 * "unreachable" reach the right host through an IPv6 NodePort. Which entry
 * translates an error, at which hook, is icmp.h's rule over svcmap_ct6.
 *
 * Checksums: IPv6 has no header checksum, the quoted IPv6 header none
 * either. The ICMPv6 checksum covers a pseudo-header of the outer addresses
 * (unlike ICMP's) and the whole message: the quoted bytes' changes are
 * added to it incrementally (RFC 1624, csum16_replace*() of icmp.h), and
 * an outer address change goes through csum6_store_addr() as for TCP/UDP.
 * A quote with extension headers is not looked into (passed untranslated).
 */
#ifndef SVCMAP_LIB_ICMP6_H
#define SVCMAP_LIB_ICMP6_H

#include "icmp.h"
#include "ct.h"
#include "csum.h"

#define ICMPV6_DEST_UNREACH   1
#define ICMPV6_PKT_TOOBIG     2
#define ICMPV6_TIME_EXCEED    3

struct icmp6_quote {
	__be32 saddr[4];
	__be32 daddr[4];
	__u32 ip_off;      /* the quoted IPv6 header, from the start of the frame */
	__u32 l4_off;      /* the quoted TCP/UDP header */
	__u32 l4_csum_off; /* its checksum; 0: not there to update */
	__u16 icmp_csum;
	__u16 l4_csum;
	__be16 sport;
	__be16 dport;
	__u8 proto;
};

/* 0 when p (ICMPv6, p->l4_off at its header) is an error about a TCP/UDP
 * packet, with *q filled; -1 for anything else (neighbour discovery, echo,
 * quotes cut short or with extension headers), passed untouched. */
static __always_inline int icmp6_parse_quote(struct __sk_buff *skb, const struct pkt6 *p, struct icmp6_quote *q)
{
	struct ipv6hdr ip;
	__be16 ports[2];
	__u8 icmp[4];

	if (bpf_skb_load_bytes(skb, p->l4_off, icmp, sizeof(icmp)) < 0)
		return -1;
	if (icmp[0] != ICMPV6_DEST_UNREACH && icmp[0] != ICMPV6_PKT_TOOBIG && icmp[0] != ICMPV6_TIME_EXCEED)
		return -1;
	__builtin_memcpy(&q->icmp_csum, &icmp[ICMP_CSUM_OFF], sizeof(q->icmp_csum));
	q->ip_off = p->l4_off + ICMP_QUOTE_OFF;
	if (bpf_skb_load_bytes(skb, q->ip_off, &ip, sizeof(ip)) < 0 || ip.version != 6)
		return -1;
	if (ip.nexthdr != IPPROTO_TCP && ip.nexthdr != IPPROTO_UDP)
		return -1;
	q->l4_off = q->ip_off + sizeof(ip);
	if (icmp_quote_l4(skb, ip.nexthdr, q->l4_off, ports, &q->l4_csum_off, &q->l4_csum) < 0)
		return -1;
	__builtin_memcpy(q->saddr, &ip.saddr, sizeof(q->saddr));
	__builtin_memcpy(q->daddr, &ip.daddr, sizeof(q->daddr));
	q->sport = ports[0];
	q->dport = ports[1];
	q->proto = ip.nexthdr;
	return 0;
}

/* icmp4_flow() for IPv6: the entry translating the quoted tuple reversed, in dir. */
static __always_inline struct ct6_value *icmp6_flow(const struct icmp6_quote *q, __u8 dir)
{
	struct ct6_key k = {
		.sport = q->dport,
		.dport = q->sport,
		.proto = q->proto,
		.dir = dir,
	};

	__builtin_memcpy(k.saddr, q->daddr, sizeof(k.saddr));
	__builtin_memcpy(k.daddr, q->saddr, sizeof(k.daddr));
	return bpf_map_lookup_elem(&SVCMAP_MAP_CT6, &k);
}

/* Checksum c after the 16-byte address `from` became `to`. */
static __always_inline __u16 csum16_replace16(__u16 c, const __be32 from[4], const __be32 to[4])
{
	c = csum16_replace4(c, from[0], to[0]);
	c = csum16_replace4(c, from[1], to[1]);
	c = csum16_replace4(c, from[2], to[2]);
	return csum16_replace4(c, from[3], to[3]);
}

/*
 * icmp4_rewrite() for IPv6: translates the error as entry v says and updates
 * p to the new outer addresses. 0, or a negative errno, after which the
 * packet may be half rewritten and must be dropped.
 */
static __always_inline int icmp6_rewrite(struct __sk_buff *skb, struct pkt6 *p, const struct icmp6_quote *q,
					 const struct ct6_value *v)
{
	__be32 saddr[4], daddr[4], outer_s[4];
	__be16 sport = v->new_dport ? v->new_dport : q->sport;
	__be16 dport = v->new_sport ? v->new_sport : q->dport;
	__u16 icmp_csum = q->icmp_csum;
	__u16 l4_csum = q->l4_csum;
	int err;

	addr6_or(saddr, v->new_daddr, q->saddr);
	addr6_or(daddr, v->new_saddr, q->daddr);
	__builtin_memcpy(outer_s, p->saddr, sizeof(outer_s));
	if (q->l4_csum_off) {
		l4_csum = csum16_replace16(l4_csum, q->saddr, saddr);
		l4_csum = csum16_replace16(l4_csum, q->daddr, daddr);
		l4_csum = csum16_replace2(l4_csum, q->sport, sport);
		l4_csum = csum16_replace2(l4_csum, q->dport, dport);
		if (q->proto == IPPROTO_UDP && l4_csum == 0)
			l4_csum = 0xffff;
	}
	icmp_csum = csum16_replace16(icmp_csum, q->saddr, saddr);
	icmp_csum = csum16_replace16(icmp_csum, q->daddr, daddr);
	icmp_csum = csum16_replace2(icmp_csum, q->sport, sport);
	icmp_csum = csum16_replace2(icmp_csum, q->dport, dport);
	if (q->l4_csum_off)
		icmp_csum = csum16_replace2(icmp_csum, q->l4_csum, l4_csum);

	err = icmp4_store(skb, q->ip_off + offsetof(struct ipv6hdr, saddr), saddr, sizeof(saddr));
	if (!err)
		err = icmp4_store(skb, q->ip_off + offsetof(struct ipv6hdr, daddr), daddr, sizeof(daddr));
	if (!err)
		err = icmp4_store(skb, q->l4_off + L4_SPORT_OFF, &sport, sizeof(sport));
	if (!err)
		err = icmp4_store(skb, q->l4_off + L4_DPORT_OFF, &dport, sizeof(dport));
	if (!err && q->l4_csum_off)
		err = icmp4_store(skb, q->l4_csum_off, &l4_csum, sizeof(l4_csum));
	if (!err)
		err = icmp4_store(skb, p->csum_off, &icmp_csum, sizeof(icmp_csum));
	if (err)
		return err;

	/* The outer header, through the ICMPv6 checksum's pseudo-header. */
	if (!addr6_zero(v->new_daddr) && !addr6_eq(v->new_daddr, p->daddr)) {
		err = csum6_store_addr(skb, p, IP6_DADDR_OFF, p->daddr, v->new_daddr);
		if (err)
			return err;
		__builtin_memcpy(p->daddr, v->new_daddr, sizeof(p->daddr));
	}
	if (addr6_eq(outer_s, q->daddr) && !addr6_eq(daddr, outer_s)) {
		err = csum6_store_addr(skb, p, IP6_SADDR_OFF, outer_s, daddr);
		if (err)
			return err;
		__builtin_memcpy(p->saddr, daddr, sizeof(p->saddr));
	}
	return 0;
}

#endif /* SVCMAP_LIB_ICMP6_H */
