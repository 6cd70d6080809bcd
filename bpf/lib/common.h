/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Small things every svcmap program needs. */
#ifndef SVCMAP_COMMON_H
#define SVCMAP_COMMON_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/errno.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "svcmap_maps.h"

/* cgroup sock_addr verdicts */
#define SYS_REJECT  0
#define SYS_PROCEED 1

#ifndef SOCK_DGRAM
#define SOCK_DGRAM 2
#endif

/* 127.0.0.0/8 in network byte order, tested without a byte swap. */
static __always_inline int is_loopback4(__be32 addr)
{
	return (addr & bpf_htonl(0xff000000)) == bpf_htonl(0x7f000000);
}

#endif /* SVCMAP_COMMON_H */
