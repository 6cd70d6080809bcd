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

/* Address families (linux/socket.h is not for BPF programs). */
#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

/* cgroup sock_addr verdicts */
#define SYS_REJECT  0
#define SYS_PROCEED 1

#ifndef SOCK_DGRAM
#define SOCK_DGRAM 2
#endif

/*
 * Family-generic code (see docs/architecture-datapath.md): a core takes the
 * family as a constant (AF_INET or AF_INET6) and the family's maps, keys and
 * values as void pointers. fam_field() is a field that the IPv4 struct T4 and
 * the IPv6 struct T6 both have, by name, of the struct at ptr: an lvalue of
 * the field's type. With a constant family the compiler keeps one branch.
 */
#define fam_field(family, T4, T6, ptr, f) (*((family) == AF_INET6 ? &((T6 *)(ptr))->f : &((T4 *)(ptr))->f))

/* Member f of the struct at ptr (T4 or T6), as a void pointer. */
#define fam_ptr(family, T4, T6, ptr, f) ((family) == AF_INET6 ? (void *)&((T6 *)(ptr))->f : (void *)&((T4 *)(ptr))->f)

/* The address field f (__be32 in T4, __be32[4] in T6) of the struct at ptr,
 * as a pointer to its first word, for the addr_*() helpers below. */
#define fam_addr(family, T4, T6, ptr, f) \
	((family) == AF_INET6 ? (__be32 *)((T6 *)(ptr))->f : (__be32 *)&((T4 *)(ptr))->f)

/* 127.0.0.0/8 in network byte order, tested without a byte swap. */
static __always_inline int is_loopback4(__be32 addr)
{
	return (addr & bpf_htonl(0xff000000)) == bpf_htonl(0x7f000000);
}

/* IPv6 addresses as four __be32 words (struct svc6_key and the others). */
static __always_inline int addr6_eq(const __be32 a[4], const __be32 b[4])
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

static __always_inline int addr6_zero(const __be32 a[4])
{
	return !(a[0] | a[1] | a[2] | a[3]);
}

/* An IPv6 address as the 32 bits the address hashes take. */
static __always_inline __u32 addr6_fold(const __be32 a[4])
{
	return a[0] ^ a[1] ^ a[2] ^ a[3];
}

/* dst := a unless it is all zero (a conntrack entry's "leave it"), else b. */
static __always_inline void addr6_or(__be32 dst[4], const __be32 a[4], const __be32 b[4])
{
	if (addr6_zero(a))
		__builtin_memcpy(dst, b, 16);
	else
		__builtin_memcpy(dst, a, 16);
}

/* Addresses of either family as words (one for IPv4, four for IPv6). */
static __always_inline int addr_eq(const int family, const __be32 *a, const __be32 *b)
{
	return family == AF_INET6 ? addr6_eq(a, b) : a[0] == b[0];
}

static __always_inline int addr_zero(const int family, const __be32 *a)
{
	return family == AF_INET6 ? addr6_zero(a) : !a[0];
}

static __always_inline void addr_copy(const int family, __be32 *dst, const __be32 *src)
{
	if (family == AF_INET6)
		__builtin_memcpy(dst, src, 16);
	else
		dst[0] = src[0];
}

/* dst := a unless it is zero (a conntrack entry's "leave it"), else b. */
static __always_inline void addr_or(const int family, __be32 *dst, const __be32 *a, const __be32 *b)
{
	addr_copy(family, dst, addr_zero(family, a) ? b : a);
}

#endif /* SVCMAP_COMMON_H */
