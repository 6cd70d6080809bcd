/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The IPv6 service maps (layouts in include/svcmap_maps.h), pinned by name
 * like every map (see maps.h), in both objects as their IPv4 twins are;
 * sized like them. The per-socket reverse NAT of IPv6 sockets lives with
 * its IPv4 twin in maps_sock.h.
 */
#ifndef SVCMAP_LIB_MAPS6_H
#define SVCMAP_LIB_MAPS6_H

#include "common.h"
#include "maps.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct svc6_key);
	__type(value, struct svc_value);
	__uint(max_entries, SVCMAP_SERVICES_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_SERVICES6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct backend6_value);
	__uint(max_entries, SVCMAP_BACKENDS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_BACKENDS6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct rev_nat6_value);
	__uint(max_entries, SVCMAP_REVNAT_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_REVNAT6 SEC(".maps");


/* Maglev tables of IPv6 frontends: svcmap_revnat6 id -> inner table, as
 * svcmap_maglev (the same inner template, maps.h). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, __u32);
	__uint(value_size, sizeof(__u32));
	__uint(max_entries, SVCMAP_MAGLEV_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct svcmap_maglev_inner);
} SVCMAP_MAP_MAGLEV6 SEC(".maps");

#endif /* SVCMAP_LIB_MAPS6_H */
