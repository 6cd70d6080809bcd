/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Which address a SNATed flow takes: that of the device its packets to the
 * backend leave through, as iptables' MASQUERADE does (and Cilium per
 * device), so that a node whose other nodes sit behind a second device
 * answers from an address they can route back to.
 *
 * The device is the FIB's answer for the packet as the stack would forward
 * it after DNAT: the client's source, the backend's destination, from the
 * ingress device. Its address comes from svcmap_devaddr, which the agent
 * keeps in step with the node's addresses (src/agent/device-addresses.ts).
 * Asked once per new flow; the flow's entries keep the address.
 */
#ifndef SVCMAP_LIB_SNAT_ADDR_H
#define SVCMAP_LIB_SNAT_ADDR_H

#include "fib.h"
#include "maps_tc.h"

/* A route was found in each of these (FRAG_NEEDED only judges the packet's
 * size; fib_redirect() deals with that). */
static __always_inline int snat_route_found(long rc)
{
	return rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH || rc == BPF_FIB_LKUP_RET_FRAG_NEEDED;
}

/*
 * The SNAT source for a new flow of p to the backend {daddr, dport}: 0 and
 * *addr set, or the reason to drop the packet: DP_R_SNAT_NO_ROUTE when the
 * FIB has no forwardable route (no route, blackhole, unreachable, a local
 * address, forwarding off on the ingress device: the stack would not
 * forward it either), DP_R_NO_SNAT_ADDR when the egress device has no
 * address in the map. p is the family's packet (struct pkt4 or pkt6),
 * daddr and *addr the family's address (one word, or four): IPv6 takes
 * svcmap_devaddr6.
 */
static __always_inline enum dp_reason snat_source(const int family, struct ctx_buff *ctx, const void *p,
						  const __be32 *daddr, __be16 dport, __be32 *addr)
{
	struct bpf_fib_lookup fib;
	__u32 ifindex;
	long rc;

	fib_params(family, &fib, ctx, p, daddr, dport);
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (!snat_route_found(rc))
		return DP_R_SNAT_NO_ROUTE;
	ifindex = fib.ifindex;
	if (family == AF_INET6) {
		struct dev_addr6_value *dev = bpf_map_lookup_elem(&SVCMAP_MAP_DEV_ADDR6, &ifindex);

		if (!dev || addr6_zero(dev->addr))
			return DP_R_NO_SNAT_ADDR;
		__builtin_memcpy(addr, dev->addr, sizeof(dev->addr));
	} else {
		struct dev_addr_value *dev = bpf_map_lookup_elem(&SVCMAP_MAP_DEV_ADDR, &ifindex);

		if (!dev || !dev->addr)
			return DP_R_NO_SNAT_ADDR;
		*addr = dev->addr;
	}
	return 0;
}

#endif /* SVCMAP_LIB_SNAT_ADDR_H */
