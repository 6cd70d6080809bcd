/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The tc context (ctx.h): struct __sk_buff and the skb helpers. The skb
 * knows its checksum state, so every checksum change goes through
 * bpf_l3/l4_csum_replace (csum.h says why); a redirect resolves the
 * neighbour when it is not known yet (bpf_redirect_neigh).
 */
#ifndef SVCMAP_LIB_CTX_SKB_H
#define SVCMAP_LIB_CTX_SKB_H

#define SVCMAP_CTX_SKB 1

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#define ctx_buff __sk_buff

#define CTX_PASS           TC_ACT_OK
#define CTX_DROP           TC_ACT_SHOT
#define CTX_RESOLVES_NEIGH 1

static __always_inline long ctx_load_bytes(const struct __sk_buff *ctx, __u32 off, void *to, __u32 len)
{
	return bpf_skb_load_bytes(ctx, off, to, len);
}

static __always_inline long ctx_store_bytes(struct __sk_buff *ctx, __u32 off, const void *from, __u32 len)
{
	return bpf_skb_store_bytes(ctx, off, from, len, 0);
}

/* Room for len bytes right after the fixed IP header (20 bytes IPv4, 40
 * IPv6), or -len bytes taken away there: DSR's option (dsr.h). */
static __always_inline long ctx_adjust_l3_room(struct __sk_buff *ctx, __s32 len)
{
	return bpf_skb_adjust_room(ctx, len, BPF_ADJ_ROOM_NET, 0);
}

/* A header rewritten whole (its checksum computed by the caller): a
 * CHECKSUM_COMPLETE skb's sum follows the bytes. */
static __always_inline long ctx_store_hdr(struct __sk_buff *ctx, __u32 off, const void *from, __u32 len)
{
	return bpf_skb_store_bytes(ctx, off, from, len, BPF_F_RECOMPUTE_CSUM);
}

static __always_inline long ctx_l3_csum_replace(struct __sk_buff *ctx, __u32 off, __u64 from, __u64 to, __u64 size)
{
	return bpf_l3_csum_replace(ctx, off, from, to, size);
}

static __always_inline long ctx_l4_csum_replace(struct __sk_buff *ctx, __u32 off, __u64 from, __u64 to, __u64 flags)
{
	return bpf_l4_csum_replace(ctx, off, from, to, flags);
}

static __always_inline __u32 ctx_len(const struct __sk_buff *ctx)
{
	return ctx->len;
}

static __always_inline __u32 ctx_ifindex(const struct __sk_buff *ctx)
{
	return ctx->ifindex;
}

/* BPF_MTU_CHK_SEGS: a GRO-merged skb is judged by its segments (fib.h). */
static __always_inline int ctx_mtu_ok(struct __sk_buff *ctx, __u32 ifindex)
{
	__u32 mtu = 0; /* 0: check the skb's own length */

	return bpf_check_mtu(ctx, ifindex, &mtu, 0, BPF_MTU_CHK_SEGS) == BPF_MTU_CHK_RET_SUCCESS;
}

/* tc can send a packet out of any device. */
static __always_inline int ctx_can_redirect(const struct __sk_buff *ctx, __u32 ifindex)
{
	(void)ctx;
	(void)ifindex;
	return 1;
}

/* Out of fib->ifindex, the L2 header filled from the neighbour table. */
static __always_inline int ctx_redirect(struct __sk_buff *ctx, const struct bpf_fib_lookup *fib)
{
	(void)ctx;
	return bpf_redirect_neigh(fib->ifindex, NULL, 0, 0);
}

#endif /* SVCMAP_LIB_CTX_SKB_H */
