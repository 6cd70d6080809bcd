/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The maps every entry file shares, defined once. Layouts live in
 * include/svcmap_maps.h; the agent pins the maps under its bpffs directory
 * and reuses them across restarts, so every program sees the same maps.
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
} SVCMAP_MAP_SERVICES SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct backend_value);
	__uint(max_entries, SVCMAP_BACKENDS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} SVCMAP_MAP_BACKENDS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct rev_nat_value);
	__uint(max_entries, SVCMAP_REVNAT_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} SVCMAP_MAP_REVNAT SEC(".maps");

/* Session affinity: {client, frontend} -> {backend, slot, last use}. Both
 * entry files use it (keys of the socket hooks and of tc differ in origin),
 * so it lives here; frontends without SVC_F_AFFINITY never touch it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct affinity_key);
	__type(value, struct affinity_value);
	__uint(max_entries, SVCMAP_AFFINITY_MAX);
} SVCMAP_MAP_AFFINITY SEC(".maps");

#endif /* SVCMAP_LIB_MAPS_H */
