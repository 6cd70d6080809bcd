// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Entry file for the cgroup v2 socket hooks (IPv4, and IPv6 below). The
 * logic lives in lib/sock_lb.h, one core for both families; this file only
 * maps hooks to it.
 */
#include "lib/sock_lb.h"

/* 0: proceed. A negative errno: refuse the call with it, at once: a
 * frontend without backends fails with ECONNREFUSED instead of a connect
 * that hangs on an address nobody answers; a bind the node's own socket may
 * not make fails with EADDRINUSE. */
static __always_inline int verdict(int err)
{
	if (!err)
		return SYS_PROCEED;
	bpf_set_retval(err);
	return SYS_REJECT;
}

SEC("cgroup/connect4")
int svcmap_connect4(struct bpf_sock_addr *ctx)
{
	return verdict(sock_xlate_fwd(AF_INET, ctx, DP_HOOK_CONNECT4));
}

/* Unconnected UDP: every datagram picks its backend. */
SEC("cgroup/sendmsg4")
int svcmap_sendmsg4(struct bpf_sock_addr *ctx)
{
	if (ctx->type != SOCK_DGRAM) {
		dp_count(DP_HOOK_SENDMSG4, DP_R_PASSED);
		return SYS_PROCEED;
	}
	return verdict(sock_xlate_fwd(AF_INET, ctx, DP_HOOK_SENDMSG4));
}

SEC("cgroup/recvmsg4")
int svcmap_recvmsg4(struct bpf_sock_addr *ctx)
{
	sock_xlate_rev(AF_INET, ctx, DP_HOOK_RECVMSG4);
	return SYS_PROCEED;
}

SEC("cgroup/getpeername4")
int svcmap_getpeer4(struct bpf_sock_addr *ctx)
{
	sock_xlate_rev(AF_INET, ctx, DP_HOOK_GETPEERNAME4);
	return SYS_PROCEED;
}

/* IPv6 twins of the hooks above (lib/sock_lb.h), attached with them. */
SEC("cgroup/connect6")
int svcmap_connect6(struct bpf_sock_addr *ctx)
{
	return verdict(sock_xlate_fwd(AF_INET6, ctx, DP_HOOK_CONNECT6));
}

SEC("cgroup/sendmsg6")
int svcmap_sendmsg6(struct bpf_sock_addr *ctx)
{
	if (ctx->type != SOCK_DGRAM) {
		dp_count(DP_HOOK_SENDMSG6, DP_R_PASSED);
		return SYS_PROCEED;
	}
	return verdict(sock_xlate_fwd(AF_INET6, ctx, DP_HOOK_SENDMSG6));
}

SEC("cgroup/recvmsg6")
int svcmap_recvmsg6(struct bpf_sock_addr *ctx)
{
	sock_xlate_rev(AF_INET6, ctx, DP_HOOK_RECVMSG6);
	return SYS_PROCEED;
}

SEC("cgroup/getpeername6")
int svcmap_getpeer6(struct bpf_sock_addr *ctx)
{
	sock_xlate_rev(AF_INET6, ctx, DP_HOOK_GETPEERNAME6);
	return SYS_PROCEED;
}

/* Bind protection: the node's own socket may not take a NodePort's port. */
SEC("cgroup/bind4")
int svcmap_bind4(struct bpf_sock_addr *ctx)
{
	return verdict(sock_bind(AF_INET, ctx, DP_HOOK_BIND4));
}

SEC("cgroup/bind6")
int svcmap_bind6(struct bpf_sock_addr *ctx)
{
	return verdict(sock_bind(AF_INET6, ctx, DP_HOOK_BIND6));
}

/* The socket's backend (if the socket LB connected it to one) stops
 * counting it: the last close(), also of a killed process. */
SEC("cgroup/sock_release")
int svcmap_sock_release(struct bpf_sock *ctx)
{
	sock_uncount(AF_INET, ctx);
	/* Only an AF_INET6 socket can have counted for an IPv6 backend (an
	 * IPv4-mapped one counts in the IPv4 storage): one lookup fewer for the rest. */
	if (ctx->family == AF_INET6)
		sock_uncount(AF_INET6, ctx);
	return 1;
}

char _license[] SEC("license") = "Dual BSD/GPL";
