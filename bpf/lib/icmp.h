/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ICMP errors about translated flows: destination unreachable (every code,
 * "fragmentation needed" among them) and time exceeded; for IPv6 the
 * ICMPv6 errors of RFC 4443 (destination unreachable, packet too big, time
 * exceeded). Such an error
 * quotes the packet it is about: its IPv4 header and at least the first 8
 * bytes after it (the ports; Linux quotes up to 576 bytes in all). When the
 * quoted packet is one of a tracked flow as it looked on the wire on this
 * side of the node, the error is made to look as the other side would have
 * it, so that PMTU discovery and "unreachable" reach the right host through
 * a NodePort:
 *  - ingress, quoted packet = a reply as svcmap sent it to the client
 *    (frontend -> client): the error goes to the backend, about the packet
 *    the backend sent (backend -> client, or -> node:SNAT port). Found by
 *    the quoted tuple reversed, in CT_DIR_FWD.
 *  - ingress, quoted packet = a request as svcmap sent it to a remote
 *    backend (node:SNAT port -> backend): the error goes to the client,
 *    about the packet the client sent (client -> frontend). Found in
 *    CT_DIR_REPLY_IN.
 *  - egress, quoted packet = a request as svcmap sent it to a local backend
 *    without SNAT (client -> backend), the error forwarded by the node
 *    towards the client: it becomes about client -> frontend. Found in
 *    CT_DIR_REPLY_OUT.
 * In each case the entry found translates the reversed tuple, so the quoted
 * packet (which went the other way) gets source := the entry's new
 * destination and destination := the entry's new source. The outer header
 * follows: its destination, when the entry moves it; its source when the
 * error came from the quoted packet's destination host itself (the
 * backend's "port unreachable" must come from the frontend it was sent to),
 * and is kept when a router on the way sent it.
 *
 * Checksums: the outer IPv4 header's, the ICMP checksum (over the whole
 * ICMP message, no pseudo-header), the quoted IPv4 header's, and the quoted
 * TCP/UDP checksum where it is there to update: for UDP (at byte 6) unless
 * it is 0 ("none"), for TCP (at byte 16) when the error quotes the whole
 * TCP header. As Linux's conntrack NAT does (nf_nat_icmp_reply_translation
 * and the l4 manip functions), it is updated incrementally, for the
 * addresses (pseudo-header) and ports that changed; it usually cannot be
 * verified, since the quote is short of the payload it covers.
 * Every update is incremental (RFC 1624), done here on the loaded values:
 * the changes to the quoted bytes and to the checksums inside the ICMP
 * message cancel out in skb->csum, as the outer header's do.
 *
 * IPv6 (svcmap_ct6, the same rules): IPv6 has no header checksum, the
 * quoted IPv6 header none either. The ICMPv6 checksum covers a
 * pseudo-header of the outer addresses (unlike ICMP's) and the whole
 * message: the quoted bytes' changes are added to it incrementally, and an
 * outer address change goes through csum6_store_addr() as for TCP/UDP. A
 * quote with extension headers is not looked into (passed untranslated).
 */
#ifndef SVCMAP_LIB_ICMP_H
#define SVCMAP_LIB_ICMP_H

#include "packet.h"
#include "packet6.h"
#include "csum.h"
#include "ct.h"
#include "csum_math.h"

#define ICMP_DEST_UNREACH  3
#define ICMP_TIME_EXCEEDED 11

#define ICMPV6_DEST_UNREACH 1
#define ICMPV6_PKT_TOOBIG   2
#define ICMPV6_TIME_EXCEED  3

/* Offsets inside the ICMP (ICMPv6) message. */
#define ICMP_CSUM_OFF  2
#define ICMP_QUOTE_OFF 8

/* Checksum c after an address of the family (one word, or four) went from `from` to `to`. */
static __always_inline __u16 csum16_replace_addr(const int family, __u16 c, const __be32 *from, const __be32 *to)
{
	c = csum16_replace4(c, from[0], to[0]);
	if (family == AF_INET6) {
		c = csum16_replace4(c, from[1], to[1]);
		c = csum16_replace4(c, from[2], to[2]);
		c = csum16_replace4(c, from[3], to[3]);
	}
	return c;
}

/* The quoted packet of an error, either family (IPv4: addresses in word 0). */
struct icmp_quote {
	__be32 saddr[4];
	__be32 daddr[4];
	__u32 icmp_off;    /* the ICMP header, from the start of the frame */
	__u32 ip_off;      /* the quoted IP header */
	__u32 l4_off;      /* the quoted TCP/UDP header */
	__u32 l4_csum_off; /* its checksum; 0: not there to update */
	__u16 icmp_csum;
	__u16 ip_csum; /* IPv4: the quoted header's checksum */
	__u16 l4_csum;
	__be16 sport;
	__be16 dport;
	__u8 proto;
};

/*
 * The quoted TCP/UDP header at l4_off: its ports, and where its checksum
 * lies (*csum_off 0: not there to update: cut off, or UDP's zero "none"),
 * with the checksum's value. 0, or -1 when the ports are not in the quote.
 */
static __always_inline int icmp_quote_l4(struct ctx_buff *ctx, __u8 proto, __u32 l4_off, __u32 end, __be16 ports[2],
					 __u32 *csum_off, __u16 *csum)
{
	if (l4_off + 2 * sizeof(__be16) > end || ctx_load_bytes(ctx, l4_off, ports, 2 * sizeof(__be16)) < 0)
		return -1;
	*csum_off = l4_off + (proto == IPPROTO_TCP ? offsetof(struct tcphdr, check) : offsetof(struct udphdr, check));
	if (*csum_off + sizeof(*csum) > end || ctx_load_bytes(ctx, *csum_off, csum, sizeof(*csum)) < 0 ||
	    (proto == IPPROTO_UDP && *csum == 0))
		*csum_off = 0;
	return 0;
}

/*
 * Where the outer IP packet, and with it the ICMP message, ends: bytes after
 * it in the frame are the link's padding, not part of the quote, and the
 * ICMP checksum does not cover them (a short quote followed by padding must
 * not have its "ports" or checksum read from, or written into, the padding).
 */
static __always_inline int icmp_message_end(const int family, struct ctx_buff *ctx, __u32 *end)
{
	__be16 len;

	if (family == AF_INET6) {
		if (ctx_load_bytes(ctx, ETH_HLEN + offsetof(struct ipv6hdr, payload_len), &len, sizeof(len)) < 0)
			return -1;
		*end = ETH_HLEN + sizeof(struct ipv6hdr) + bpf_ntohs(len);
		return 0;
	}
	if (ctx_load_bytes(ctx, ETH_HLEN + offsetof(struct iphdr, tot_len), &len, sizeof(len)) < 0)
		return -1;
	*end = ETH_HLEN + bpf_ntohs(len);
	return 0;
}

/* The quoted IP header at q->ip_off, per family: its addresses and protocol
 * into q, and where the quoted L4 header starts. 0, or -1 when it is not
 * one to look into (an IPv4 fragment after the first quotes no ports). */
static __always_inline int icmp4_quote_ip(struct ctx_buff *ctx, struct icmp_quote *q, __u32 end)
{
	struct iphdr ip;

	if (ctx_load_bytes(ctx, q->ip_off, &ip, sizeof(ip)) < 0)
		return -1;
	if (ip.version != 4 || ip.ihl < 5 || (ip.frag_off & bpf_htons(IP4_OFFSET)) || q->ip_off + ip.ihl * 4 > end)
		return -1;
	q->l4_off = q->ip_off + ip.ihl * 4;
	q->ip_csum = ip.check;
	q->saddr[0] = ip.saddr;
	q->daddr[0] = ip.daddr;
	q->proto = ip.protocol;
	return 0;
}

static __always_inline int icmp6_quote_ip(struct ctx_buff *ctx, struct icmp_quote *q, __u32 end)
{
	struct ipv6hdr ip;

	if (q->ip_off + sizeof(ip) > end || ctx_load_bytes(ctx, q->ip_off, &ip, sizeof(ip)) < 0 || ip.version != 6)
		return -1;
	q->l4_off = q->ip_off + sizeof(ip);
	q->ip_csum = 0;
	__builtin_memcpy(q->saddr, &ip.saddr, sizeof(q->saddr));
	__builtin_memcpy(q->daddr, &ip.daddr, sizeof(q->daddr));
	q->proto = ip.nexthdr;
	return 0;
}

static __always_inline int icmp_is_error(const int family, __u8 type)
{
	if (family == AF_INET6)
		return type == ICMPV6_DEST_UNREACH || type == ICMPV6_PKT_TOOBIG || type == ICMPV6_TIME_EXCEED;
	return type == ICMP_DEST_UNREACH || type == ICMP_TIME_EXCEEDED;
}

/*
 * p is the outer packet (struct pkt4 or pkt6; protocol ICMP or ICMPv6,
 * l4_off at its header). 0 when it is an error the datapath translates,
 * with *q filled; -1 for everything else (other ICMP types, neighbour
 * discovery, quotes too short, with extension headers or not of a first
 * TCP/UDP fragment), which is passed untouched.
 */
static __always_inline int icmp_parse_quote(const int family, struct ctx_buff *ctx, const void *p, struct icmp_quote *q)
{
	__u32 l4_off = pkt_f(family, p, l4_off);
	__be16 ports[2];
	__u8 icmp[4];
	__u32 end;
	int err;

	if (icmp_message_end(family, ctx, &end) < 0 || ctx_load_bytes(ctx, l4_off, icmp, sizeof(icmp)) < 0)
		return -1;
	if (!icmp_is_error(family, icmp[0]))
		return -1;
	q->icmp_off = l4_off;
	__builtin_memcpy(&q->icmp_csum, &icmp[ICMP_CSUM_OFF], sizeof(q->icmp_csum));
	q->ip_off = l4_off + ICMP_QUOTE_OFF;
	err = family == AF_INET6 ? icmp6_quote_ip(ctx, q, end) : icmp4_quote_ip(ctx, q, end);
	if (err < 0)
		return -1;
	if (q->proto != IPPROTO_TCP && q->proto != IPPROTO_UDP)
		return -1;
	if (icmp_quote_l4(ctx, q->proto, q->l4_off, end, ports, &q->l4_csum_off, &q->l4_csum) < 0)
		return -1;
	q->sport = ports[0];
	q->dport = ports[1];
	return 0;
}

/* The entry of the flow the quoted packet belongs to, looked up in dir by
 * the quoted tuple reversed (the packet that the entry translates). No
 * state is recorded: an error says nothing about the flow's TCP state. */
static __always_inline void *icmp_flow(const int family, const struct icmp_quote *q, __u8 dir)
{
	union ct_key_any k;

	__builtin_memset(&k, 0, sizeof(k));
	addr_copy(family, ct_key_addr(family, &k, saddr), q->daddr);
	addr_copy(family, ct_key_addr(family, &k, daddr), q->saddr);
	ct_key_f(family, &k, sport) = q->dport;
	ct_key_f(family, &k, dport) = q->sport;
	ct_key_f(family, &k, proto) = q->proto;
	ct_key_f(family, &k, dir) = dir;
	return bpf_map_lookup_elem(ct_map(family), &k);
}

static __always_inline int icmp_store(struct ctx_buff *ctx, __u32 off, const void *v, __u32 len)
{
	return ctx_store_bytes(ctx, off, v, len);
}

/* The outer header's source (dst 0) or destination address from `from` to
 * `to`: with IPv4's header checksum, or for IPv6 through the ICMPv6
 * checksum's pseudo-header. */
static __always_inline int icmp_outer_store(const int family, struct ctx_buff *ctx, const void *p, const int dst,
					    const __be32 *from, const __be32 *to)
{
	int err;

	if (family == AF_INET6)
		return csum6_store_addr(ctx, p, dst ? IP6_DADDR_OFF : IP6_SADDR_OFF, from, to);
	err = ctx_l3_csum_replace(ctx, IP4_CSUM_OFF, from[0], to[0], sizeof(__be32));
	if (!err)
		err = icmp_store(ctx, dst ? IP4_DADDR_OFF : IP4_SADDR_OFF, to, sizeof(__be32));
	return err;
}

/*
 * Translates the error as entry v (the family's conntrack entry) says (see
 * the top of this file) and updates p to the new outer addresses. 0, or a
 * negative errno, after which the packet may be half rewritten and must be
 * dropped.
 */
static __always_inline int icmp_rewrite(const int family, struct ctx_buff *ctx, void *p, const struct icmp_quote *q,
					const void *v)
{
	const __u32 alen = family == AF_INET6 ? 16 : 4;
	__be16 new_sport = ct_val_f(family, v, new_sport);
	__be16 new_dport = ct_val_f(family, v, new_dport);
	const __be32 *new_daddr = ct_val_addr(family, v, new_daddr);
	__be32 saddr[4] = {}, daddr[4] = {}, outer_s[4] = {};
	__be16 sport = new_dport ? new_dport : q->sport;
	__be16 dport = new_sport ? new_sport : q->dport;
	__u16 icmp_csum = q->icmp_csum;
	__u16 ip_csum = q->ip_csum;
	__u16 l4_csum = q->l4_csum;
	__be32 *p_saddr = pkt_addr(family, p, saddr);
	__be32 *p_daddr = pkt_addr(family, p, daddr);
	int err;

	addr_or(family, saddr, new_daddr, q->saddr);
	addr_or(family, daddr, ct_val_addr(family, v, new_saddr), q->daddr);
	addr_copy(family, outer_s, p_saddr);
	/* IPv4: the quoted header's addresses, and its checksum. */
	if (family == AF_INET) {
		ip_csum = csum16_replace4(ip_csum, q->saddr[0], saddr[0]);
		ip_csum = csum16_replace4(ip_csum, q->daddr[0], daddr[0]);
	}
	/* The quoted L4 checksum: pseudo-header addresses and ports. */
	if (q->l4_csum_off) {
		l4_csum = csum16_replace_addr(family, l4_csum, q->saddr, saddr);
		l4_csum = csum16_replace_addr(family, l4_csum, q->daddr, daddr);
		l4_csum = csum16_replace2(l4_csum, q->sport, sport);
		l4_csum = csum16_replace2(l4_csum, q->dport, dport);
		if (q->proto == IPPROTO_UDP && l4_csum == 0)
			l4_csum = 0xffff; /* a computed 0 is sent as all ones: 0 means none */
	}
	/* The ICMP checksum covers every byte changed inside the message. */
	icmp_csum = csum16_replace_addr(family, icmp_csum, q->saddr, saddr);
	icmp_csum = csum16_replace_addr(family, icmp_csum, q->daddr, daddr);
	if (family == AF_INET)
		icmp_csum = csum16_replace2(icmp_csum, q->ip_csum, ip_csum);
	icmp_csum = csum16_replace2(icmp_csum, q->sport, sport);
	icmp_csum = csum16_replace2(icmp_csum, q->dport, dport);
	if (q->l4_csum_off)
		icmp_csum = csum16_replace2(icmp_csum, q->l4_csum, l4_csum);

	err = icmp_store(
		ctx, q->ip_off + (family == AF_INET6 ? offsetof(struct ipv6hdr, saddr) : offsetof(struct iphdr, saddr)),
		saddr, alen);
	if (!err)
		err = icmp_store(ctx,
				 q->ip_off + (family == AF_INET6 ? offsetof(struct ipv6hdr, daddr) :
								   offsetof(struct iphdr, daddr)),
				 daddr, alen);
	if (!err && family == AF_INET)
		err = icmp_store(ctx, q->ip_off + offsetof(struct iphdr, check), &ip_csum, sizeof(ip_csum));
	if (!err)
		err = icmp_store(ctx, q->l4_off + L4_SPORT_OFF, &sport, sizeof(sport));
	if (!err)
		err = icmp_store(ctx, q->l4_off + L4_DPORT_OFF, &dport, sizeof(dport));
	if (!err && q->l4_csum_off)
		err = icmp_store(ctx, q->l4_csum_off, &l4_csum, sizeof(l4_csum));
	if (!err)
		err = icmp_store(ctx, q->icmp_off + ICMP_CSUM_OFF, &icmp_csum, sizeof(icmp_csum));
	if (err)
		return err;

	/* The outer header: to where the entry sends the flow's packets; from
	 * the frontend when the quoted packet's destination itself answered. */
	if (!addr_zero(family, new_daddr) && !addr_eq(family, new_daddr, p_daddr)) {
		err = icmp_outer_store(family, ctx, p, 1, p_daddr, new_daddr);
		if (err)
			return err;
		addr_copy(family, p_daddr, new_daddr);
	}
	if (addr_eq(family, outer_s, q->daddr) && !addr_eq(family, daddr, outer_s)) {
		err = icmp_outer_store(family, ctx, p, 0, outer_s, daddr);
		if (err)
			return err;
		addr_copy(family, p_saddr, daddr);
	}
	return 0;
}

#endif /* SVCMAP_LIB_ICMP_H */
