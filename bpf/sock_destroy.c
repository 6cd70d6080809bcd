// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Entry file for socket termination: BPF socket iterators the agent runs,
 * in each network namespace it can enter, after backends left frontends.
 * The logic lives in lib/sock_term.h; this file only maps iterators to it.
 * TCP is opt-in (--destroy-tcp-sockets): the agent loads that program only
 * then.
 */
#include "lib/sock_term.h"

SEC("iter/udp")
int svcmap_term_udp(struct bpf_iter__udp *ctx)
{
	struct sock_common *sk = (struct sock_common *)ctx->udp_sk;

	if (sk)
		sock_term(ctx->meta, sk, IPPROTO_UDP);
	return 0;
}

SEC("iter/tcp")
int svcmap_term_tcp(struct bpf_iter__tcp *ctx)
{
	struct sock_common *sk = ctx->sk_common;
	unsigned char state;

	if (!sk)
		return 0;
	state = sk->skc_state;
	if (state == SVCMAP_TCP_TIME_WAIT || state == SVCMAP_TCP_NEW_SYN_RECV || state == SVCMAP_TCP_LISTEN ||
	    state == SVCMAP_TCP_CLOSE)
		return 0;
	sock_term(ctx->meta, sk, IPPROTO_TCP);
	return 0;
}

char _license[] SEC("license") = "Dual BSD/GPL";
