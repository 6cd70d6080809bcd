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


#endif /* SVCMAP_LIB_MAPS_H */
