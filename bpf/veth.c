// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Entry file for the tc programs (sched_cls, direct action) on the host side
 * of each pod's veth: per-packet service translation for pods whose sockets
 * the socket LB leaves alone (--socket-lb=host-only, or a pod or namespace
 * that opts out, as service meshes need). svcmap_veth_in sees what the pod
 * sends (DNAT to a backend, with conntrack), svcmap_veth_out what it
 * receives (replies shown as coming from the frontend). The logic is
 * lib/tc_lb.h's, the same core as the external devices', one for both
 * families; this file only sends each packet to its family's instance.
 */
#include "lib/ctx_skb.h"
#include "lib/tc_lb.h"

SEC("tc")
int svcmap_veth_in(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return veth4_from_pod(skb);
	return veth6_from_pod(skb);
}

/* An ICMPv6 packet comes back from tc6_egress() as TC6_ICMP and goes to
 * tc6_icmp() from here (see tc.c). */
SEC("tc")
int svcmap_veth_out(struct __sk_buff *skb)
{
	int verdict;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return tc4_egress(skb, DP_HOOK_VETH_EGRESS);
	verdict = tc6_egress(skb, DP_HOOK_VETH_EGRESS);
	return verdict == TC6_ICMP ? tc6_icmp(skb, DP_HOOK_VETH_EGRESS) : verdict;
}

char _license[] SEC("license") = "Dual BSD/GPL";
