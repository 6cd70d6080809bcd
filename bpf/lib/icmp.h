/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ICMP errors about translated flows: destination unreachable (every code,
 * "fragmentation needed" among them) and time exceeded. Such an error
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
 */
#ifndef SVCMAP_LIB_ICMP_H
#define SVCMAP_LIB_ICMP_H

#include "packet.h"
#include "maps_tc.h"

#define ICMP_DEST_UNREACH 3
#define ICMP_TIME_EXCEEDED 11

/* Offsets inside the ICMP message. */
#define ICMP_CSUM_OFF  2
#define ICMP_QUOTE_OFF 8

/* RFC 1624: checksum c after a 16-bit word of the covered data went from
 * `from` to `to`. Words are as they lie in memory: one's-complement sums do
 * not depend on byte order as long as all words are taken alike. */
static __always_inline __u16 csum16_replace2(__u16 c, __u16 from, __u16 to)
{
	__u32 s = (__u16)~c;

	s += (__u16)~from;
	s += to;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

static __always_inline __u16 csum16_replace4(__u16 c, __u32 from, __u32 to)
{
	c = csum16_replace2(c, (__u16)from, (__u16)to);
	return csum16_replace2(c, (__u16)(from >> 16), (__u16)(to >> 16));
}

struct icmp4_quote {
	__u32 icmp_off;    /* the ICMP header, from the start of the frame */
	__u32 ip_off;      /* the quoted IPv4 header */
	__u32 l4_off;      /* the quoted TCP/UDP header */
	__u32 l4_csum_off; /* its checksum; 0: not there to update */
	__u16 icmp_csum;
	__u16 ip_csum;
	__u16 l4_csum;
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
};

/*
 * The quoted TCP/UDP header at l4_off (either family): its ports, and where
 * its checksum lies (*csum_off 0: not there to update: cut off, or UDP's
 * zero "none"), with the checksum's value. 0, or -1 when the ports are not
 * in the quote.
 */
static __always_inline int icmp_quote_l4(struct __sk_buff *skb, __u8 proto, __u32 l4_off, __be16 ports[2],
					 __u32 *csum_off, __u16 *csum)
{
	if (bpf_skb_load_bytes(skb, l4_off, ports, 2 * sizeof(__be16)) < 0)
		return -1;
	*csum_off = l4_off + (proto == IPPROTO_TCP ? offsetof(struct tcphdr, check) : offsetof(struct udphdr, check));
	if (bpf_skb_load_bytes(skb, *csum_off, csum, sizeof(*csum)) < 0 || (proto == IPPROTO_UDP && *csum == 0))
		*csum_off = 0;
	return 0;
}

/*
 * p is the outer packet (IPv4, protocol ICMP, p->l4_off at the ICMP
 * header). 0 when it is an error the datapath translates, with *q filled;
 * -1 for everything else (other ICMP types, quotes too short or not of a
 * first TCP/UDP fragment), which is passed untouched.
 */
static __always_inline int icmp4_parse_quote(struct __sk_buff *skb, const struct pkt4 *p,
					     struct icmp4_quote *q)
{
	__u8 icmp[4];
	struct iphdr ip;
	__be16 ports[2];
	__u32 ihl;

	if (bpf_skb_load_bytes(skb, p->l4_off, icmp, sizeof(icmp)) < 0)
		return -1;
	if (icmp[0] != ICMP_DEST_UNREACH && icmp[0] != ICMP_TIME_EXCEEDED)
		return -1;
	q->icmp_off = p->l4_off;
	__builtin_memcpy(&q->icmp_csum, &icmp[ICMP_CSUM_OFF], sizeof(q->icmp_csum));
	q->ip_off = p->l4_off + ICMP_QUOTE_OFF;
	if (bpf_skb_load_bytes(skb, q->ip_off, &ip, sizeof(ip)) < 0)
		return -1;
	if (ip.version != 4 || ip.ihl < 5)
		return -1;
	/* A later fragment quotes no ports. */
	if (ip.frag_off & bpf_htons(IP4_OFFSET))
		return -1;
	if (ip.protocol != IPPROTO_TCP && ip.protocol != IPPROTO_UDP)
		return -1;
	ihl = ip.ihl * 4;
	q->l4_off = q->ip_off + ihl;
	if (icmp_quote_l4(skb, ip.protocol, q->l4_off, ports, &q->l4_csum_off, &q->l4_csum) < 0)
		return -1;
	q->ip_csum = ip.check;
	q->saddr = ip.saddr;
	q->daddr = ip.daddr;
	q->sport = ports[0];
	q->dport = ports[1];
	q->proto = ip.protocol;
	return 0;
}

/* The entry of the flow the quoted packet belongs to, looked up in dir by
 * the quoted tuple reversed (the packet that the entry translates). No
 * state is recorded: an error says nothing about the flow's TCP state. */
static __always_inline struct ct_value *icmp4_flow(const struct icmp4_quote *q, __u8 dir)
{
	struct ct_key k = {
		.saddr = q->daddr,
		.daddr = q->saddr,
		.sport = q->dport,
		.dport = q->sport,
		.proto = q->proto,
		.dir = dir,
	};

	return bpf_map_lookup_elem(&SVCMAP_MAP_CT, &k);
}

static __always_inline int icmp4_store(struct __sk_buff *skb, __u32 off, const void *v, __u32 len)
{
	return bpf_skb_store_bytes(skb, off, v, len, 0);
}

/*
 * Translates the error as entry v says (see the top of this file) and
 * updates p to the new outer addresses. 0, or a negative errno, after which
 * the packet may be half rewritten and must be dropped.
 */
static __always_inline int icmp4_rewrite(struct __sk_buff *skb, struct pkt4 *p,
					 const struct icmp4_quote *q, const struct ct_value *v)
{
	__be32 saddr = v->new_daddr ? v->new_daddr : q->saddr;
	__be16 sport = v->new_dport ? v->new_dport : q->sport;
	__be32 daddr = v->new_saddr ? v->new_saddr : q->daddr;
	__be16 dport = v->new_sport ? v->new_sport : q->dport;
	__u16 icmp_csum = q->icmp_csum;
	__u16 ip_csum = q->ip_csum;
	__u16 l4_csum = q->l4_csum;
	__be32 outer_s = p->saddr, outer_d = p->daddr;
	int err;

	/* The quoted IPv4 header: addresses, and its checksum. */
	ip_csum = csum16_replace4(ip_csum, q->saddr, saddr);
	ip_csum = csum16_replace4(ip_csum, q->daddr, daddr);
	/* The quoted L4 checksum: pseudo-header addresses and ports. */
	if (q->l4_csum_off) {
		l4_csum = csum16_replace4(l4_csum, q->saddr, saddr);
		l4_csum = csum16_replace4(l4_csum, q->daddr, daddr);
		l4_csum = csum16_replace2(l4_csum, q->sport, sport);
		l4_csum = csum16_replace2(l4_csum, q->dport, dport);
		if (q->proto == IPPROTO_UDP && l4_csum == 0)
			l4_csum = 0xffff; /* a computed 0 is sent as all ones: 0 means none */
	}
	/* The ICMP checksum covers every byte changed inside the message. */
	icmp_csum = csum16_replace4(icmp_csum, q->saddr, saddr);
	icmp_csum = csum16_replace4(icmp_csum, q->daddr, daddr);
	icmp_csum = csum16_replace2(icmp_csum, q->ip_csum, ip_csum);
	icmp_csum = csum16_replace2(icmp_csum, q->sport, sport);
	icmp_csum = csum16_replace2(icmp_csum, q->dport, dport);
	if (q->l4_csum_off)
		icmp_csum = csum16_replace2(icmp_csum, q->l4_csum, l4_csum);

	err = icmp4_store(skb, q->ip_off + offsetof(struct iphdr, saddr), &saddr, sizeof(saddr));
	if (!err)
		err = icmp4_store(skb, q->ip_off + offsetof(struct iphdr, daddr), &daddr, sizeof(daddr));
	if (!err)
		err = icmp4_store(skb, q->ip_off + offsetof(struct iphdr, check), &ip_csum, sizeof(ip_csum));
	if (!err)
		err = icmp4_store(skb, q->l4_off + L4_SPORT_OFF, &sport, sizeof(sport));
	if (!err)
		err = icmp4_store(skb, q->l4_off + L4_DPORT_OFF, &dport, sizeof(dport));
	if (!err && q->l4_csum_off)
		err = icmp4_store(skb, q->l4_csum_off, &l4_csum, sizeof(l4_csum));
	if (!err)
		err = icmp4_store(skb, q->icmp_off + ICMP_CSUM_OFF, &icmp_csum, sizeof(icmp_csum));
	if (err)
		return err;

	/* The outer header: to where the entry sends the flow's packets; from
	 * the frontend when the quoted packet's destination itself answered. */
	if (v->new_daddr && v->new_daddr != outer_d) {
		err = bpf_l3_csum_replace(skb, IP4_CSUM_OFF, outer_d, v->new_daddr, sizeof(__be32));
		if (!err)
			err = icmp4_store(skb, IP4_DADDR_OFF, &v->new_daddr, sizeof(__be32));
		if (err)
			return err;
		p->daddr = v->new_daddr;
	}
	if (outer_s == q->daddr && daddr != outer_s) {
		err = bpf_l3_csum_replace(skb, IP4_CSUM_OFF, outer_s, daddr, sizeof(__be32));
		if (!err)
			err = icmp4_store(skb, IP4_SADDR_OFF, &daddr, sizeof(daddr));
		if (err)
			return err;
		p->saddr = daddr;
	}
	return 0;
}

#endif /* SVCMAP_LIB_ICMP_H */
