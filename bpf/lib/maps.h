/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The maps every entry file shares, defined once, both families' (the
 * per-socket reverse NAT maps are in maps_sock.h, the tc ones in maps_tc.h). Layouts live in
 * include/svcmap_maps.h. Every svcmap map is declared pinned by name
 * (LIBBPF_PIN_BY_NAME): this is the one statement of what is pinned, and
 * so shared by the objects and kept across restarts. The agent opens the
 * objects with its --pin-dir as libbpf's pin root (src/bpf/loader.ts), so
 * a map sits at <pin-dir>/<name>, and both objects load the same one.
 */
#ifndef SVCMAP_LIB_MAPS_H
#define SVCMAP_LIB_MAPS_H

#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct svc_key);
	__type(value, struct svc_value);
	__uint(max_entries, SVCMAP_SERVICES_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_SERVICES SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct backend_value);
	__uint(max_entries, SVCMAP_BACKENDS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_BACKENDS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct rev_nat_value);
	__uint(max_entries, SVCMAP_REVNAT_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_REVNAT SEC(".maps");

/* The IPv6 twins of the three above: sized like them. */
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

/* Session affinity: {client, frontend} -> {backend, slot, last use}. Both
 * entry files use it (keys of the socket hooks and of tc differ in origin),
 * so it lives here; frontends without SVC_F_AFFINITY never touch it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct affinity_key);
	__type(value, struct affinity_value);
	__uint(max_entries, SVCMAP_AFFINITY_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_AFFINITY SEC(".maps");

/* Live connections per backend (struct backend_conns): both datapaths
 * count into the one pinned map, and LB_ALG_LC/SED/NQ read it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct backend_conns);
	__uint(max_entries, SVCMAP_BE_CONNS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_BE_CONNS SEC(".maps");

/* The same for IPv6 backends (ids of svcmap_be6). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct backend_conns);
	__uint(max_entries, SVCMAP_BE_CONNS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_BE_CONNS6 SEC(".maps");

/* Maglev tables: rev_nat_id -> inner array (see svcmap_maps.h). The inner
 * definition is only the template libbpf creates the outer map with; the
 * agent creates each frontend's table at its own size. */
struct svcmap_maglev_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__uint(value_size, sizeof(struct maglev_entry));
	__uint(max_entries, 1 + (SVCMAP_MAGLEV_DEFAULT_M + MAGLEV_SLOTS_PER_ENTRY - 1) / MAGLEV_SLOTS_PER_ENTRY);
	__uint(map_flags, BPF_F_INNER_MAP);
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, __u32);
	__uint(value_size, sizeof(__u32)); /* an inner map's fd (update) or id (lookup) */
	__uint(max_entries, SVCMAP_MAGLEV_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct svcmap_maglev_inner);
} SVCMAP_MAP_MAGLEV SEC(".maps");

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

/* Zone names for the backends' zone ids (see svcmap_maps.h): the agent's
 * and svcmap dump's; no program reads it. Declared here so that it is
 * created and pinned with the maps it describes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct zone_name);
	__uint(max_entries, SVCMAP_ZONES_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_ZONES SEC(".maps");

/* Datapath counters: (hook, reason) -> packets, per CPU (see enum dp_reason).
 * Both entry files count into the one pinned map. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct dp_counter);
	__uint(max_entries, SVCMAP_METRICS_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SVCMAP_MAP_METRICS SEC(".maps");

/*
 * Counts one packet (tc) or one call (socket hooks) under its hook and
 * reason. The add is atomic: the socket hooks run in process context, where
 * two calls of one hook may interleave on a CPU; at tc it costs next to
 * nothing more on a per-CPU line.
 */
static __always_inline void dp_count(enum dp_hook hook, enum dp_reason reason)
{
	__u32 idx = (__u32)hook * DP_REASON_STRIDE + (__u32)reason;
	struct dp_counter *c;

	c = bpf_map_lookup_elem(&SVCMAP_MAP_METRICS, &idx);
	if (c)
		__sync_fetch_and_add(&c->packets, 1);
}

#endif /* SVCMAP_LIB_MAPS_H */
