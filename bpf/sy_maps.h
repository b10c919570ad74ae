/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Maps shared by the switchyard programs. All are pinned by name under the
 * agent's bpffs directory so that a restarted agent (and the next program
 * version) reuses them: the wire never sees an empty table. Sizes here are
 * defaults; the agent sets the real ones before load.
 */
#ifndef SY_MAPS_H
#define SY_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "sy_common.h"

#define SY_DEFAULT_MAX_SERVICES 65536
#define SY_DEFAULT_MAX_BACKENDS 262144

/* Frontend (IPv4) → service. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SY_DEFAULT_MAX_SERVICES);
	__type(key, struct sy_svc4_key);
	__type(value, struct sy_svc_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_svc4 SEC(".maps");

/* Frontend (IPv6) → service. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SY_DEFAULT_MAX_SERVICES);
	__type(key, struct sy_svc6_key);
	__type(value, struct sy_svc_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_svc6 SEC(".maps");

/* Backend id → address, port, flags. Ids are never reused while referenced. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SY_DEFAULT_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct sy_backend);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_backend SEC(".maps");

/*
 * The Maglev table pool. Every service entry names its table as a run of
 * slots in one mmapable array (the agent fills a table with one memcpy into
 * free slots, then writes the entry: no map-in-map update, so no RCU grace
 * period per table change). The pool itself is the one inner map of this
 * outer array so that the agent can replace it with a larger copy (same
 * offsets) when it fills up; BPF_F_INNER_MAP lets the copy have another size.
 */
struct sy_mg_pool_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32[SY_MG_CHUNK]); /* one struct sy_mg_chunk */
	__uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct sy_mg_pool_inner);
} sy_mg_pool SEC(".maps");

/* {socket cookie, backend} → frontend, for recvmsg/getpeername of UDP sockets (IPv4). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, struct sy_sock_revnat4_key);
	__type(value, struct sy_sock_revnat4_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_sock_revnat4 SEC(".maps");

/* IPv6 twin of sy_sock_revnat4. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, struct sy_sock_revnat6_key);
	__type(value, struct sy_sock_revnat6_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_sock_revnat6 SEC(".maps");

/*
 * The peer record of each translated TCP socket (getpeername), stored with the
 * socket and freed with it: it costs what is open, and no number of connects
 * can evict a live socket's record (or UDP's entries above).
 */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sy_tcp_peer);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_tcp_peer SEC(".maps");

/* {client netns, service} → sticky backend for sessionAffinity: ClientIP. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, struct sy_affinity_key);
	__type(value, struct sy_affinity_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_affinity SEC(".maps");

/* Per-service counters, indexed by svc_id. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SY_DEFAULT_MAX_SERVICES);
	__type(key, __u32);
	__type(value, struct sy_svc_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_svc_stats SEC(".maps");

/*
 * Per-backend counters, by backend id. A hash, not an array: backend ids grow
 * without bound (they are never reused). Entries are made and removed by the
 * agent with their backend, so the programs never insert; memory is 32 bytes
 * × possible CPUs per live backend.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, SY_DEFAULT_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct sy_be_stats);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_be_stats SEC(".maps");

/* Counters per drop reason (enum sy_drop_reason). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SY_DROP__MAX);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sy_drops SEC(".maps");

static __always_inline void sy_count_drop(__u32 reason)
{
	__u64 *v = bpf_map_lookup_elem(&sy_drops, &reason);

	if (v)
		*v += 1;
}

static __always_inline struct sy_svc_stats *sy_svc_stats_of(__u32 svc_id)
{
	return bpf_map_lookup_elem(&sy_svc_stats, &svc_id);
}

static __always_inline struct sy_be_stats *sy_be_stats_of(__u32 backend_id)
{
	return bpf_map_lookup_elem(&sy_be_stats, &backend_id);
}

#endif /* SY_MAPS_H */
