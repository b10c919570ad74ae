/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Backend selection, shared by the socket hooks (sock_lb.c) and the tc path
 * (tc_lb.c): the one place that reads a Service's Maglev table, applies
 * sessionAffinity and counts translations and refusals. Each path supplies
 * its own client identity (network namespace cookie / source address) and
 * flow hash (socket cookie / node-independent packet hash), and turns the
 * result into its own verdict (errno for a socket, drop counter for a
 * packet).
 */
#ifndef SY_LIB_LB_H
#define SY_LIB_LB_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../sy_common.h"
#include "../sy_maps.h"

/* Why no backend was chosen. */
enum sy_pick_err {
	SY_PICK_OK = 0,
	SY_PICK_NO_BACKEND = 1,      /* the Service has no usable backend */
	SY_PICK_NO_TABLE = 2,        /* entry without a Maglev table (transient) */
	SY_PICK_BACKEND_MISSING = 3, /* the slot names an id missing from sy_backend */
};

/* murmur3's 32-bit mixing step and finaliser. */
static __always_inline __u32 sy_mix32(__u32 h, __u32 k)
{
	k *= 0xcc9e2d51;
	k = (k << 15) | (k >> 17);
	k *= 0x1b873593;
	h ^= k;
	h = (h << 13) | (h >> 19);
	return h * 5 + 0xe6546b64;
}

static __always_inline __u32 sy_fmix32(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

/* A 64-bit finaliser (xor-shift-multiply), folded to 32 bits. */
static __always_inline __u32 sy_mix64(__u64 x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return (__u32)x;
}

/*
 * Chooses the backend of one new flow of `svc`: the client's sticky backend
 * while sessionAffinity holds and the backend still exists, otherwise slot
 * hash % M of the Service's Maglev table (M slots at table_off of the pool) (weights are how many slots a
 * backend owns), remembered for the client when the Service is sticky.
 * Fills *bid and *out and returns SY_PICK_OK, or says why not.
 */
static __always_inline int sy_lb_pick(const struct sy_svc_val *svc, __u64 client, __u32 hash,
				      __u32 *bid, struct sy_backend **out)
{
	struct sy_affinity_key akey = {};
	struct sy_affinity_val aval = {};
	struct sy_svc_stats *st = sy_svc_stats_of(svc->svc_id);
	struct sy_be_stats *bst;
	struct sy_backend *be;
	__u32 svc_id = svc->svc_id;
	__u32 slot, chunk_idx, zero = 0, *id;
	struct sy_mg_chunk *chunk;
	__u64 now = 0;
	void *pool;
	int err = SY_PICK_NO_TABLE;

	if (svc->backend_count == 0) {
		err = SY_PICK_NO_BACKEND;
		goto refuse;
	}
	if (svc->flags & SY_SVC_F_AFFINITY) {
		struct sy_affinity_val *cur;

		akey.client = client;
		akey.svc_id = svc_id;
		now = bpf_ktime_get_ns();
		cur = bpf_map_lookup_elem(&sy_affinity, &akey);
		if (cur && now - cur->last_used_ns <= (__u64)svc->affinity_timeout * 1000000000ULL) {
			/* A backend that left the Service has lost its id: pick anew. The
			 * agent also deletes the entries of backends that left a sticky
			 * Service whose set shrank, so a reused id is never followed. */
			be = bpf_map_lookup_elem(&sy_backend, &cur->backend_id);
			if (be) {
				cur->last_used_ns = now;
				*bid = cur->backend_id;
				goto found;
			}
		}
	}
	if (svc->table_m == 0)
		goto refuse;
	pool = bpf_map_lookup_elem(&sy_mg_pool, &zero);
	if (!pool)
		goto refuse;
	slot = svc->table_off + hash % svc->table_m;
	chunk_idx = slot / SY_MG_CHUNK;
	chunk = bpf_map_lookup_elem(pool, &chunk_idx);
	if (!chunk)
		goto refuse;
	id = &chunk->ids[slot % SY_MG_CHUNK];
	be = bpf_map_lookup_elem(&sy_backend, id);
	if (!be) {
		err = SY_PICK_BACKEND_MISSING;
		goto refuse;
	}
	*bid = *id;
	if (svc->flags & SY_SVC_F_AFFINITY) {
		aval.last_used_ns = now;
		aval.backend_id = *id;
		bpf_map_update_elem(&sy_affinity, &akey, &aval, BPF_ANY);
	}
found:
	if (st)
		st->translations += 1;
	bst = sy_be_stats_of(*bid);
	if (bst)
		bst->connections += 1;
	*out = be;
	return SY_PICK_OK;
refuse:
	if (st)
		st->refused += 1;
	return err;
}

#endif /* SY_LIB_LB_H */
