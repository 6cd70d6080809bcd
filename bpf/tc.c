// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Entry file for the tc programs (sched_cls, direct action) on the node's
 * external devices: NodePort, LoadBalancer and externalIPs for traffic from
 * outside the node, IPv4 and IPv6. The logic lives in lib/tc_lb.h, one
 * core for both families; this file only sends each packet to its family's
 * instance of it.
 */
#include "lib/ctx_skb.h"
#include "lib/tc_lb.h"

/* Each family to its own path, each a function of its own (not inlined), so
 * that their stacks need not fit in one frame. An ICMPv6 packet comes back
 * from tc6_ingress()/tc6_egress() as TC6_ICMP and goes to tc6_icmp() from
 * here, so that its frame and theirs are never on the call chain together;
 * likewise a packet with svcmap's DSR option (TC_DSR: tc4/6_dsr_in()) and a
 * DSR flow's packet that gets it (TC_DSR_ADD: tc4/6_dsr_fwd()). */
SEC("tc")
int svcmap_tc_in(struct __sk_buff *skb)
{
	int verdict;

	if (skb->protocol != bpf_htons(ETH_P_IPV6)) {
		verdict = tc4_ingress(skb);
		if (verdict == TC_DSR_ADD)
			return tc4_dsr_fwd(skb);
		return verdict == TC_DSR ? tc4_dsr_in(skb) : verdict;
	}
	verdict = tc6_ingress(skb);
	if (verdict == TC_DSR_ADD)
		return tc6_dsr_fwd(skb);
	if (verdict == TC_DSR)
		return tc6_dsr_in(skb);
	return verdict == TC6_ICMP ? tc6_icmp(skb, DP_HOOK_TC_INGRESS) : verdict;
}

SEC("tc")
int svcmap_tc_out(struct __sk_buff *skb)
{
	int verdict;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return tc4_egress(skb, DP_HOOK_TC_EGRESS);
	verdict = tc6_egress(skb, DP_HOOK_TC_EGRESS);
	return verdict == TC6_ICMP ? tc6_icmp(skb, DP_HOOK_TC_EGRESS) : verdict;
}

/* Not attached: the agent runs it (BPF_PROG_RUN) to change a backend's
 * connection count atomically (conns_adjust() in lib/conns.h). */
SEC("syscall")
int svcmap_conns_adjust(struct conns_adjust *ctx)
{
	return conns_adjust(ctx);
}

char _license[] SEC("license") = "Dual BSD/GPL";
