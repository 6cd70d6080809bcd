// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Entry file for the tc programs (sched_cls, direct action) on the node's
 * external devices: NodePort, LoadBalancer and externalIPs for traffic from
 * outside the node, IPv4 and IPv6. The logic lives in lib/tc_lb.h and
 * lib/tc_lb6.h; this file only maps the two hooks to it.
 */
#include "lib/tc_lb6.h"

SEC("tc")
int svcmap_tc_in(struct __sk_buff *skb)
{
	return tc_ingress(skb);
}

SEC("tc")
int svcmap_tc_out(struct __sk_buff *skb)
{
	return tc_egress(skb);
}

/* Not attached: the agent runs it (BPF_PROG_RUN) to change a backend's
 * connection count atomically (conns_adjust() in lib/conns.h). */
SEC("syscall")
int svcmap_conns_adjust(struct conns_adjust *ctx)
{
	return conns_adjust(ctx);
}

char _license[] SEC("license") = "Dual BSD/GPL";
