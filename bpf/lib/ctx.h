/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The packet context the datapath's cores work on, one of two: the entry
 * file includes ctx_skb.h (tc: struct __sk_buff) or ctx_xdp.h (XDP: struct
 * xdp_md) before any other header, and the cores and concern headers reach
 * the packet only through what both define:
 *
 *   struct ctx_buff                the context type
 *   ctx_load_bytes/ctx_store_bytes copies out of and into the packet
 *   ctx_l3_csum_replace            the IPv4 header checksum after a field changed
 *   ctx_l4_csum_replace            the TCP/UDP/ICMP checksum (flags as bpf_l4_csum_replace's)
 *   ctx_adjust_l3_room             bytes added or removed after the fixed IP header (tc only)
 *   ctx_store_hdr                  a header rewritten whole, the skb's checksum state kept
 *   ctx_len, ctx_ifindex           the packet's length, the device it came in on
 *   ctx_mtu_ok                     whether it fits the MTU of a device it would leave by
 *   ctx_can_redirect, ctx_redirect whether it can leave by a device a FIB lookup named; out of it
 *   CTX_PASS, CTX_DROP             the verdicts: on to the stack (at XDP: to tc), dropped
 *   CTX_RESOLVES_NEIGH             1 when ctx_redirect resolves an unknown neighbour itself
 *
 * The choice is made by the compiler, per object: one program never holds
 * both, and each gets straight-line code for its own context.
 */
#ifndef SVCMAP_LIB_CTX_H
#define SVCMAP_LIB_CTX_H

#if !defined(SVCMAP_CTX_SKB) && !defined(SVCMAP_CTX_XDP)
#error "include lib/ctx_skb.h or lib/ctx_xdp.h before the datapath's headers"
#endif

#endif /* SVCMAP_LIB_CTX_H */
