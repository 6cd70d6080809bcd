/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Rewriting one header field and the checksums that cover it, incrementally:
 * the IPv4 header checksum for addresses and the TTL, the TCP/UDP checksum
 * for addresses (through the pseudo-header) and ports.
 *
 * At tc, bpf_l4_csum_replace (ctx_l4_csum_replace) works on the skb's checksum state: with a full
 * checksum in the packet it updates the field; with CHECKSUM_PARTIAL (an
 * offloaded packet that still has to be checksummed) the field holds only
 * the pseudo-header sum, so only BPF_F_PSEUDO_HDR changes touch it; with
 * CHECKSUM_COMPLETE it keeps skb->csum right too. Every change therefore
 * goes through the helpers, never as a recomputation here. At XDP the
 * same calls update complete checksums by arithmetic (ctx_xdp.h).
 *
 * UDP: a zero checksum means "none" (IPv4 allows it). BPF_F_MARK_MANGLED_0
 * leaves a zero field alone and writes a computed zero as 0xffff, its
 * one's-complement equal, so "none" and "zero" never mix.
 */
#ifndef SVCMAP_LIB_CSUM_H
#define SVCMAP_LIB_CSUM_H

#include "packet.h"
#include "packet6.h"

static __always_inline __u64 csum_l4_flags(const struct pkt4 *p)
{
	return p->proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
}

/* Replace an IPv4 address (at IP4_SADDR_OFF or IP4_DADDR_OFF). 0 or a negative errno.
 * A fragment after the first has no L4 checksum (csum_off 0): the first
 * fragment's covers the whole datagram. */
static __always_inline int csum4_store_addr(struct ctx_buff *ctx, const struct pkt4 *p, __u32 off, __be32 from,
					    __be32 to)
{
	int err;

	if (p->csum_off) {
		err = ctx_l4_csum_replace(ctx, p->csum_off, from, to, csum_l4_flags(p) | BPF_F_PSEUDO_HDR | sizeof(to));
		if (err < 0)
			return err;
	}
	err = ctx_l3_csum_replace(ctx, IP4_CSUM_OFF, from, to, sizeof(to));
	if (err < 0)
		return err;
	return ctx_store_bytes(ctx, off, &to, sizeof(to));
}

/* Replace a TCP/UDP port (at l4_off + L4_SPORT_OFF or L4_DPORT_OFF), either family. */
static __always_inline int csum_store_port(struct ctx_buff *ctx, __u32 csum_off, __u8 proto, __u32 off, __be16 from,
					   __be16 to)
{
	int err;

	err = ctx_l4_csum_replace(ctx, csum_off, from, to,
				  (proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0) | sizeof(to));
	if (err < 0)
		return err;
	return ctx_store_bytes(ctx, off, &to, sizeof(to));
}

/*
 * Replace an IPv6 address (at IP6_SADDR_OFF or IP6_DADDR_OFF): IPv6 has no
 * header checksum, so only the L4 checksum's pseudo-header changes, by the
 * difference of the two 16-byte addresses (bpf_csum_diff), which
 * bpf_l4_csum_replace takes with a size of 0. For UDP a zero checksum is
 * invalid in IPv6 (RFC 8200); BPF_F_MARK_MANGLED_0 still keeps a computed
 * zero from being written as one.
 */
static __always_inline int csum6_store_addr(struct ctx_buff *ctx, const struct pkt6 *p, __u32 off, const __be32 from[4],
					    const __be32 to[4])
{
	__be32 f[4], t[4];
	__s64 diff;
	int err;

	__builtin_memcpy(f, from, sizeof(f));
	__builtin_memcpy(t, to, sizeof(t));
	diff = bpf_csum_diff(f, sizeof(f), t, sizeof(t), 0);
	if (diff < 0)
		return (int)diff;
	err = ctx_l4_csum_replace(ctx, p->csum_off, 0, (__u32)diff,
				  (p->proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0) | BPF_F_PSEUDO_HDR);
	if (err < 0)
		return err;
	return ctx_store_bytes(ctx, off, t, sizeof(t));
}

/* Hop limit minus one: no checksum covers it. */
static __always_inline int csum6_dec_hop_limit(struct ctx_buff *ctx, struct pkt6 *p)
{
	__u8 hl = p->hop_limit - 1;
	int err = ctx_store_bytes(ctx, IP6_HLIM_OFF, &hl, sizeof(hl));

	if (err < 0)
		return err;
	p->hop_limit = hl;
	return 0;
}

/* TTL minus one. The header checksum covers TTL as the high byte of the
 * 16-bit word it shares with the protocol. */
static __always_inline int csum4_dec_ttl(struct ctx_buff *ctx, struct pkt4 *p)
{
	__u8 ttl = p->ttl - 1;
	__be16 from = bpf_htons(((__u16)p->ttl << 8) | p->proto);
	__be16 to = bpf_htons(((__u16)ttl << 8) | p->proto);
	int err;

	err = ctx_l3_csum_replace(ctx, IP4_CSUM_OFF, from, to, sizeof(to));
	if (err < 0)
		return err;
	err = ctx_store_bytes(ctx, IP4_TTL_OFF, &ttl, sizeof(ttl));
	if (err < 0)
		return err;
	p->ttl = ttl;
	return 0;
}

#endif /* SVCMAP_LIB_CSUM_H */
