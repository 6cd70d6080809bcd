/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Parsing an Ethernet frame carrying IPv6 and TCP, UDP or ICMPv6, as
 * packet.h does for IPv4. Only a transport header directly after the fixed
 * 40-byte header is looked at: a packet with extension headers (hop-by-hop,
 * routing, fragment, destination options, ...) is passed untouched and
 * counted as DP_R_IPV6_EXT_HDR. Walking them would cost a bounded loop per
 * packet for what NodePort clients do not send (TCP and UDP from a host
 * carry none; IPv6 fragments, of large UDP datagrams, are the one common
 * case, and they are not translated: see the README).
 */
#ifndef SVCMAP_LIB_PACKET6_H
#define SVCMAP_LIB_PACKET6_H

#include <linux/ipv6.h>

#include "packet.h"

#ifndef IPPROTO_ICMPV6
#define IPPROTO_ICMPV6 58
#endif

#define IP6_OFF       ETH_HLEN
#define IP6_HLIM_OFF  (IP6_OFF + offsetof(struct ipv6hdr, hop_limit))
#define IP6_SADDR_OFF (IP6_OFF + offsetof(struct ipv6hdr, saddr))
#define IP6_DADDR_OFF (IP6_OFF + offsetof(struct ipv6hdr, daddr))

struct pkt6 {
	__be32 saddr[4];
	__be32 daddr[4];
	__be16 sport;
	__be16 dport;
	__u8 proto; /* IPPROTO_TCP, IPPROTO_UDP or IPPROTO_ICMPV6 */
	__u8 hop_limit;
	__u8 tcp_flags; /* TCP only: the flags byte (TCP_FLAG_*) */
	__u8 pad;
	__be32 flowinfo; /* traffic class and flow label, for the FIB lookup */
	__u32 l4_off;    /* from the start of the frame */
	__u32 csum_off;  /* the L4 checksum field, from the start of the frame */
};

/*
 * 0 for an IPv6 TCP, UDP or ICMPv6 packet (the transport header right after
 * the fixed header), with `p` filled (for ICMPv6 the ports are 0); else the
 * reason to count the untouched packet under: DP_R_OTHER_PROTO (not IPv6,
 * other protocols), DP_R_IPV6_EXT_HDR (extension headers, fragments),
 * DP_R_MALFORMED (cut short, or not version 6).
 */
static __always_inline enum dp_reason pkt6_parse(struct ctx_buff *ctx, struct pkt6 *p)
{
	struct ipv6hdr ip;
	struct pkt_l4 l4;
	enum dp_reason reason;

	reason = pkt_ip_header(ctx, ETH_P_IPV6, &ip, sizeof(ip));
	if (reason)
		return reason;
	if (ip.version != 6)
		return DP_R_MALFORMED;
	if (ip.nexthdr != IPPROTO_TCP && ip.nexthdr != IPPROTO_UDP && ip.nexthdr != IPPROTO_ICMPV6)
		return DP_R_IPV6_EXT_HDR;
	p->l4_off = IP6_OFF + sizeof(ip);
	reason = pkt_l4_parse(ctx, ip.nexthdr, IPPROTO_ICMPV6, p->l4_off, bpf_ntohs(ip.payload_len), &l4);
	if (reason)
		return reason;
	__builtin_memcpy(p->saddr, &ip.saddr, sizeof(p->saddr));
	__builtin_memcpy(p->daddr, &ip.daddr, sizeof(p->daddr));
	p->sport = l4.sport;
	p->dport = l4.dport;
	p->proto = ip.nexthdr;
	p->hop_limit = ip.hop_limit;
	p->tcp_flags = l4.tcp_flags;
	p->pad = 0;
	/* The first word of the header without the version: what bpf_fib_lookup calls flowinfo. */
	__builtin_memcpy(&p->flowinfo, &ip, sizeof(p->flowinfo));
	p->flowinfo &= bpf_htonl(0x0fffffff);
	p->csum_off = l4.csum_off;
	return 0;
}

/* A field both families' packets have, of either's; an address field as words. */
#define pkt_f(family, p, f)    fam_field(family, struct pkt4, struct pkt6, p, f)
#define pkt_addr(family, p, f) fam_addr(family, struct pkt4, struct pkt6, p, f)

/* pkt4_parse() or pkt6_parse(), into p of the family. */
static __always_inline enum dp_reason pkt_parse(const int family, struct ctx_buff *ctx, void *p)
{
	return family == AF_INET6 ? pkt6_parse(ctx, p) : pkt4_parse(ctx, p);
}

#endif /* SVCMAP_LIB_PACKET6_H */
