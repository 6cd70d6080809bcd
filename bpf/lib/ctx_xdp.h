/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The XDP context (ctx.h): struct xdp_md, bpf_xdp_load_bytes/store_bytes
 * (which also reach the fragments of a multi-buffer packet), and the
 * checksum updates done here by arithmetic (csum_math.h): XDP has no
 * csum_replace helpers, and no checksum state either. A packet at XDP is
 * taken to carry complete checksums, as one from the wire does; what can
 * carry a partial one (an skb a local socket sent through a veth) is told
 * apart before anything is rewritten (xdp_lb.h: xdp_csum_partial()).
 *
 * A redirect writes the L2 addresses the FIB lookup found and sends the
 * frame out with bpf_redirect_map(), also back out of the device it came
 * in on, and only to a device in svcmap_xdp_tx: those whose driver takes
 * redirected frames now (ndo_xdp_xmit: the NDO_XMIT bit of the device's
 * XDP features, which the agent follows). Not XDP_TX: a veth hands its
 * XDP_TX frames to a peer that drains them only when the peer runs an XDP
 * program itself (veth_xdp_flush()), which no feature bit says, while it
 * takes redirected ones whenever the bit is set (the peer runs XDP or has
 * GRO on). ctx_can_redirect() asks before anything is rewritten: for a
 * device not in the map the packet passes to tc untouched. XDP cannot
 * resolve a neighbour: CTX_RESOLVES_NEIGH is 0, and such packets pass to
 * tc too.
 */
#ifndef SVCMAP_LIB_CTX_XDP_H
#define SVCMAP_LIB_CTX_XDP_H

#define SVCMAP_CTX_XDP 1

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

#include "csum_math.h"

#ifndef EINVAL
#define EINVAL 22
#endif

#define ctx_buff xdp_md

#define CTX_PASS           XDP_PASS
#define CTX_DROP           XDP_DROP
#define CTX_RESOLVES_NEIGH 0

/* The devices a translated frame may leave by (ifindex -> ifindex), by a
 * redirect (see the top). Per object, not pinned: the agent
 * fills it after loading. Empty, every translated packet passes to tc. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 256);
} svcmap_xdp_tx SEC(".maps");

static __always_inline long ctx_load_bytes(struct xdp_md *ctx, __u32 off, void *to, __u32 len)
{
	return bpf_xdp_load_bytes(ctx, off, to, len);
}

static __always_inline long ctx_store_bytes(struct xdp_md *ctx, __u32 off, const void *from, __u32 len)
{
	return bpf_xdp_store_bytes(ctx, off, (void *)from, len);
}

/* The checksum at off after a field of `size` (BPF_F_HDR_FIELD_MASK: 2 or
 * 4 bytes from -> to; 0: `to` is a bpf_csum_diff() of the change). With
 * BPF_F_MARK_MANGLED_0 (UDP), a zero field ("no checksum") stays and a
 * computed zero is written as 0xffff, as the skb helper does. */
static __always_inline long ctx_csum_replace(struct xdp_md *ctx, __u32 off, __u64 from, __u64 to, __u64 flags)
{
	__u16 c;
	long err;

	err = bpf_xdp_load_bytes(ctx, off, &c, sizeof(c));
	if (err < 0)
		return err;
	if ((flags & BPF_F_MARK_MANGLED_0) && !c)
		return 0;
	switch (flags & BPF_F_HDR_FIELD_MASK) {
	case 0:
		c = csum16_add_diff(c, (__u32)to);
		break;
	case 2:
		c = csum16_replace2(c, (__u16)from, (__u16)to);
		break;
	case 4:
		c = csum16_replace4(c, (__u32)from, (__u32)to);
		break;
	default:
		return -EINVAL;
	}
	if ((flags & BPF_F_MARK_MANGLED_0) && !c)
		c = 0xffff;
	return bpf_xdp_store_bytes(ctx, off, &c, sizeof(c));
}

/* XDP adds and removes no bytes: a packet whose DSR option would be added
 * or removed passes to tc (xdp_lb.h), so nothing at XDP calls these. */
static __always_inline long ctx_adjust_l3_room(struct xdp_md *ctx, __s32 len)
{
	(void)ctx;
	(void)len;
	return -EINVAL;
}

static __always_inline long ctx_store_hdr(struct xdp_md *ctx, __u32 off, const void *from, __u32 len)
{
	return bpf_xdp_store_bytes(ctx, off, (void *)from, len);
}

static __always_inline long ctx_l3_csum_replace(struct xdp_md *ctx, __u32 off, __u64 from, __u64 to, __u64 size)
{
	return ctx_csum_replace(ctx, off, from, to, size & BPF_F_HDR_FIELD_MASK);
}

/* BPF_F_PSEUDO_HDR says nothing here: with a complete checksum, a
 * pseudo-header field counts like any other. */
static __always_inline long ctx_l4_csum_replace(struct xdp_md *ctx, __u32 off, __u64 from, __u64 to, __u64 flags)
{
	return ctx_csum_replace(ctx, off, from, to, flags & (BPF_F_HDR_FIELD_MASK | BPF_F_MARK_MANGLED_0));
}

static __always_inline __u32 ctx_len(struct xdp_md *ctx)
{
	return (__u32)bpf_xdp_get_buff_len(ctx);
}

static __always_inline __u32 ctx_ifindex(const struct xdp_md *ctx)
{
	return ctx->ingress_ifindex;
}

static __always_inline int ctx_mtu_ok(struct xdp_md *ctx, __u32 ifindex)
{
	__u32 mtu = 0;

	return bpf_check_mtu(ctx, ifindex, &mtu, 0, 0) == BPF_MTU_CHK_RET_SUCCESS;
}

/* Whether ctx_redirect() can send a frame out of ifindex (see the top). */
static __always_inline int ctx_can_redirect(const struct xdp_md *ctx, __u32 ifindex)
{
	(void)ctx;
	return bpf_map_lookup_elem(&svcmap_xdp_tx, &ifindex) != NULL;
}

/* Out of fib->ifindex with the addresses the lookup found (see the top).
 * A device removed from svcmap_xdp_tx since ctx_can_redirect(): the
 * translated frame goes to the stack, as tc's does without a route. */
static __always_inline int ctx_redirect(struct xdp_md *ctx, const struct bpf_fib_lookup *fib)
{
	if (ctx_store_bytes(ctx, offsetof(struct ethhdr, h_dest), fib->dmac, ETH_ALEN) < 0 ||
	    ctx_store_bytes(ctx, offsetof(struct ethhdr, h_source), fib->smac, ETH_ALEN) < 0)
		return XDP_DROP;
	return bpf_redirect_map(&svcmap_xdp_tx, fib->ifindex, XDP_PASS);
}

#endif /* SVCMAP_LIB_CTX_XDP_H */
