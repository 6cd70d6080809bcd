// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Entry file for the XDP program on the node's external devices: NodePort,
 * LoadBalancer and externalIPs translated before the stack, IPv4 and IPv6,
 * with tc's flows (lib/xdp_lb.h); what XDP cannot do passes to tc's ingress
 * program on the same device. This file only sends each packet to its
 * family's instance.
 */
#include "lib/ctx_xdp.h"
#include "lib/xdp_lb.h"

SEC("xdp")
int svcmap_xdp(struct xdp_md *ctx)
{
	__be16 proto = 0;

	/* A frame too short for an ethertype: pkt4_parse() counts it. */
	ctx_load_bytes(ctx, offsetof(struct ethhdr, h_proto), &proto, sizeof(proto));
	if (proto != bpf_htons(ETH_P_IPV6))
		return xdp4_ingress(ctx);
	return xdp6_ingress(ctx);
}

char _license[] SEC("license") = "Dual BSD/GPL";
