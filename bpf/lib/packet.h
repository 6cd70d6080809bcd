/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Parsing: an Ethernet frame carrying IPv4 and TCP or UDP, reduced to the
 * tuple and offsets the tc and XDP programs need. Headers are copied out
 * with ctx_load_bytes (ctx.h), so a non-linear skb or a multi-buffer XDP
 * frame parses like a linear one and no packet pointer outlives a helper
 * that may move the data.
 */
#ifndef SVCMAP_LIB_PACKET_H
#define SVCMAP_LIB_PACKET_H

#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>

#include "ctx.h"
#include "common.h"

#ifndef offsetof
#define offsetof(type, member) __builtin_offsetof(type, member)
#endif

#define IP4_OFF       ETH_HLEN
#define IP4_TTL_OFF   (IP4_OFF + offsetof(struct iphdr, ttl))
#define IP4_CSUM_OFF  (IP4_OFF + offsetof(struct iphdr, check))
#define IP4_SADDR_OFF (IP4_OFF + offsetof(struct iphdr, saddr))
#define IP4_DADDR_OFF (IP4_OFF + offsetof(struct iphdr, daddr))

/* Both TCP and UDP start with the source and destination ports. */
#define L4_SPORT_OFF 0
#define L4_DPORT_OFF 2

/* The TCP flags byte, and the flags in it that svcmap looks at. */
#define TCP_FLAGS_OFF 13
#define TCP_FLAG_FIN  0x01
#define TCP_FLAG_SYN  0x02
#define TCP_FLAG_RST  0x04
#define TCP_FLAG_ACK  0x10

#define IP4_MF     0x2000
#define IP4_OFFSET 0x1fff

/* pkt4.frag: which part of a fragmented datagram the packet is. */
#define PKT4_FRAG_FIRST 1 /* offset 0, more to come: carries the L4 header */
#define PKT4_FRAG_LATER 2 /* offset > 0: no L4 header (ports 0, csum_off 0) */

struct pkt4 {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto; /* IPPROTO_TCP, IPPROTO_UDP or IPPROTO_ICMP */
	__u8 ttl;
	__u8 tos;
	__u8 tcp_flags; /* TCP only: the flags byte (TCP_FLAG_*) */
	__u32 l4_off;   /* from the start of the frame */
	__u32 csum_off; /* the L4 checksum field, from the start of the frame; 0: none here */
	__u8 frag;      /* 0, PKT4_FRAG_FIRST or PKT4_FRAG_LATER */
	__u8 frag_last; /* PKT4_FRAG_LATER: no more fragments follow (MF clear) */
	__be16 ip_id;   /* fragments: the datagram's IP id */
};

/* The L4 header's fields the tc programs need, either family. */
struct pkt_l4 {
	__be16 sport; /* TCP/UDP; 0 for ICMP */
	__be16 dport;
	__u8 tcp_flags; /* TCP only */
	__u32 csum_off; /* the L4 checksum field, from the start of the frame */
};

/*
 * The L4 header at l4_off (TCP, UDP, or icmp_proto: IPPROTO_ICMP or
 * IPPROTO_ICMPV6), of which the IP header says l4_len bytes follow: 0 with
 * *l4 filled, DP_R_OTHER_PROTO for another protocol, DP_R_MALFORMED when
 * the header is cut short (the checksum helpers write into all of it).
 */
static __always_inline enum dp_reason pkt_l4_parse(struct ctx_buff *ctx, __u8 proto, __u8 icmp_proto, __u32 l4_off,
						   __u32 l4_len, struct pkt_l4 *l4)
{
	__be16 ports[2] = {};
	__u32 l4_min, csum_at;

	if (proto == icmp_proto) {
		l4_min = 8; /* type, code, checksum, and 4 bytes of the rest */
		csum_at = 2;
	} else if (proto == IPPROTO_TCP) {
		l4_min = sizeof(struct tcphdr);
		csum_at = offsetof(struct tcphdr, check);
	} else if (proto == IPPROTO_UDP) {
		l4_min = sizeof(struct udphdr);
		csum_at = offsetof(struct udphdr, check);
	} else {
		return DP_R_OTHER_PROTO;
	}
	if (l4_len < l4_min || ctx_len(ctx) < l4_off + l4_min)
		return DP_R_MALFORMED;
	if (proto != icmp_proto && ctx_load_bytes(ctx, l4_off, ports, sizeof(ports)) < 0)
		return DP_R_MALFORMED;
	l4->tcp_flags = 0;
	if (proto == IPPROTO_TCP && ctx_load_bytes(ctx, l4_off + TCP_FLAGS_OFF, &l4->tcp_flags, 1) < 0)
		return DP_R_MALFORMED;
	l4->sport = ports[0];
	l4->dport = ports[1];
	l4->csum_off = l4_off + csum_at;
	return 0;
}

/* The frame's IP header (len bytes after the Ethernet header, at IP4_OFF or
 * IP6_OFF) into *ip when its ethertype is `ethertype`: 0, or
 * DP_R_OTHER_PROTO (another ethertype), DP_R_MALFORMED (cut short). */
static __always_inline enum dp_reason pkt_ip_header(struct ctx_buff *ctx, __u16 ethertype, void *ip, __u32 len)
{
	__be16 proto;

	if (ctx_load_bytes(ctx, offsetof(struct ethhdr, h_proto), &proto, sizeof(proto)) < 0)
		return DP_R_MALFORMED;
	if (proto != bpf_htons(ethertype))
		return DP_R_OTHER_PROTO;
	if (ctx_load_bytes(ctx, ETH_HLEN, ip, len) < 0)
		return DP_R_MALFORMED;
	return 0;
}

/*
 * 0 for an IPv4 TCP, UDP or ICMP packet that is not a fragment, and for a
 * fragment of a TCP or UDP datagram, with `p` filled (for ICMP the ports are
 * 0, l4_off is the ICMP header and csum_off its checksum: see icmp.h for
 * what is done with it; for a fragment p->frag says which, and one after
 * the first has ports 0 and csum_off 0: see frag.h);
 * for anything else, which the programs pass untouched, the reason to count
 * it under (never 0, which is DP_R_PASSED):
 *  DP_R_OTHER_PROTO: other ethertypes (ARP, IPv6, VLAN tags on the wire)
 *                    and other IP protocols;
 *  DP_R_MALFORMED:   a frame too short for its headers, or an IPv4 header
 *                    that is not one (the stack judges and drops it);
 *  DP_R_FRAGMENT:    fragments of ICMP (never translated).
 */
static __always_inline enum dp_reason pkt4_parse(struct ctx_buff *ctx, struct pkt4 *p)
{
	struct pkt_l4 l4;
	enum dp_reason reason;
	struct iphdr ip;
	__u32 ip_len;

	reason = pkt_ip_header(ctx, ETH_P_IP, &ip, sizeof(ip));
	if (reason)
		return reason;
	if (ip.version != 4 || ip.ihl < 5)
		return DP_R_MALFORMED;
	p->frag = 0;
	p->frag_last = 0;
	p->ip_id = ip.id;
	if (ip.frag_off & bpf_htons(IP4_MF | IP4_OFFSET)) {
		if (ip.protocol != IPPROTO_TCP && ip.protocol != IPPROTO_UDP)
			return DP_R_FRAGMENT;
		p->frag = (ip.frag_off & bpf_htons(IP4_OFFSET)) ? PKT4_FRAG_LATER : PKT4_FRAG_FIRST;
		p->frag_last = !(ip.frag_off & bpf_htons(IP4_MF));
	}
	if (p->frag == PKT4_FRAG_LATER) {
		p->saddr = ip.saddr;
		p->daddr = ip.daddr;
		p->sport = 0;
		p->dport = 0;
		p->proto = ip.protocol;
		p->ttl = ip.ttl;
		p->tos = ip.tos;
		p->tcp_flags = 0;
		p->l4_off = IP4_OFF + ip.ihl * 4;
		p->csum_off = 0;
		return 0;
	}

	ip_len = ip.ihl * 4;
	p->l4_off = IP4_OFF + ip_len;
	if (bpf_ntohs(ip.tot_len) < ip_len)
		return DP_R_MALFORMED;
	reason = pkt_l4_parse(ctx, ip.protocol, IPPROTO_ICMP, p->l4_off, bpf_ntohs(ip.tot_len) - ip_len, &l4);
	if (reason)
		return reason;
	p->tcp_flags = l4.tcp_flags;
	p->csum_off = l4.csum_off;
	p->saddr = ip.saddr;
	p->daddr = ip.daddr;
	p->sport = l4.sport;
	p->dport = l4.dport;
	p->proto = ip.protocol;
	p->ttl = ip.ttl;
	p->tos = ip.tos;
	return 0;
}

#endif /* SVCMAP_LIB_PACKET_H */
