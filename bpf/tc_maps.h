/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Maps only the tc path uses. Only tc_lb.c includes this header, so the
 * socket hooks alone (no --devices, or the tc path switched off) never create
 * the per-flow tables, whose LRU entries are preallocated.
 */
#ifndef SY_TC_MAPS_H
#define SY_TC_MAPS_H

#include "sy_maps.h"

#define SY_DEFAULT_CT_ENTRIES 524288
#define SY_DEFAULT_SRC_RANGES 65536

/* External frontend (IPv4, scope external) → tc-only attributes (eTP Local, source ranges). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SY_DEFAULT_MAX_SERVICES);
	__type(key, struct sy_svc4_key);
	__type(value, struct sy_ext_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_ext4 SEC(".maps");

/* IPv6 twin of sy_ext4. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SY_DEFAULT_MAX_SERVICES);
	__type(key, struct sy_svc6_key);
	__type(value, struct sy_ext_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_ext6 SEC(".maps");

/* {frontend, allowed source prefix} → 1, for loadBalancerSourceRanges (IPv4). */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SY_DEFAULT_SRC_RANGES);
	__type(key, struct sy_src_range4_key);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_src_range4 SEC(".maps");

/* IPv6 twin of sy_src_range4. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SY_DEFAULT_SRC_RANGES);
	__type(key, struct sy_src_range6_key);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_src_range6 SEC(".maps");

/* Flow state of the tc path (IPv4): two entries per flow, see struct sy_ct4_key. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SY_DEFAULT_CT_ENTRIES);
	__type(key, struct sy_ct4_key);
	__type(value, struct sy_ct4_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_ct4 SEC(".maps");

/* IPv6 twin of sy_ct4. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SY_DEFAULT_CT_ENTRIES);
	__type(key, struct sy_ct6_key);
	__type(value, struct sy_ct6_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_ct6 SEC(".maps");

/* Counters of the tc path (enum sy_tc_counter). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SY_TC__MAX);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_tc_stats SEC(".maps");

static __always_inline void sy_tc_count(__u32 what)
{
	__u64 *v = bpf_map_lookup_elem(&sy_tc_stats, &what);

	if (v)
		*v += 1;
}

#endif /* SY_TC_MAPS_H */
