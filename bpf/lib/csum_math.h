/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * One's-complement checksum arithmetic on values (no packet): the
 * incremental updates of RFC 1624, for checksums the programs rewrite
 * themselves (the quote of an ICMP error, and every checksum at XDP, which
 * has no csum_replace helpers: ctx_xdp.h).
 */
#ifndef SVCMAP_LIB_CSUM_MATH_H
#define SVCMAP_LIB_CSUM_MATH_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

/* A 32-bit one's-complement sum folded to 16 bits (not complemented). */
static __always_inline __u16 csum16_fold(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)s;
}

/* RFC 1624: checksum c after a 16-bit word of the covered data went from
 * `from` to `to`. Words are as they lie in memory: one's-complement sums do
 * not depend on byte order as long as all words are taken alike. */
static __always_inline __u16 csum16_replace2(__u16 c, __u16 from, __u16 to)
{
	__u32 s = (__u16)~c;

	s += (__u16)~from;
	s += to;
	return (__u16)~csum16_fold(s);
}

static __always_inline __u16 csum16_replace4(__u16 c, __u32 from, __u32 to)
{
	c = csum16_replace2(c, (__u16)from, (__u16)to);
	return csum16_replace2(c, (__u16)(from >> 16), (__u16)(to >> 16));
}

/* Checksum c after the covered data changed by diff, a 32-bit
 * one's-complement sum of the difference (what bpf_csum_diff returns). */
static __always_inline __u16 csum16_add_diff(__u16 c, __u32 diff)
{
	__u64 s = (__u16)~c;

	s += diff;
	s = (s & 0xffffffff) + (s >> 32);
	return (__u16)~csum16_fold((__u32)s);
}

#endif /* SVCMAP_LIB_CSUM_MATH_H */
