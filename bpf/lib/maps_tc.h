/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The maps only the tc programs use. Included by tc.c alone, so that the
 * socket-hook object does not carry (or pin) them. Layouts live in
 * include/svcmap_maps.h with every other map's; pinned like every map (see
 * maps.h).
 */
#ifndef SVCMAP_LIB_MAPS_TC_H
#define SVCMAP_LIB_MAPS_TC_H

#include "common.h"

/* Connection tracking: one entry per flow direction (CT_DIR_*). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ct_key);
	__type(value, struct ct_value);
	__uint(max_entries, SVCMAP_CT_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_CT SEC(".maps");

/* loadBalancerSourceRanges: {rev_nat_id, CIDR} -> 1. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct src_range_key);
	__type(value, __u8);
	__uint(max_entries, SVCMAP_SRC_RANGE_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_SRC_RANGE SEC(".maps");

/* The node's settings, written by the agent before it attaches the programs. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct svcmap_config);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_CONFIG SEC(".maps");

/* SNAT source address per egress device: ifindex -> primary IPv4 address. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct dev_addr_value);
	__uint(max_entries, SVCMAP_DEV_ADDR_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_DEV_ADDR SEC(".maps");

/* The IPv6 twins of the three above (tc_lb.h). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ct6_key);
	__type(value, struct ct6_value);
	__uint(max_entries, SVCMAP_CT_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_CT6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct src_range6_key);
	__type(value, __u8);
	__uint(max_entries, SVCMAP_SRC_RANGE_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_SRC_RANGE6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct dev_addr6_value);
	__uint(max_entries, SVCMAP_DEV_ADDR_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_DEV_ADDR6 SEC(".maps");

static __always_inline const struct svcmap_config *tc_config(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&SVCMAP_MAP_CONFIG, &zero);
}

#endif /* SVCMAP_LIB_MAPS_TC_H */
