// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Socket-level load balancing for in-cluster clients.
 *
 * connect/sendmsg rewrite a Service frontend to a backend before the kernel
 * routes anything, so east-west traffic needs no per-packet NAT, no conntrack
 * entry and no hairpin masquerade. recvmsg/getpeername translate the backend
 * back into the frontend the application dialled, using a per-socket record
 * written at connect/sendmsg time.
 *
 * Each hook is a thin wrapper: sock4_xlate() / sock6_xlate() do the work and
 * return 0 (not a service), 1 (translated) or -errno (refuse the call).
 */
#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/errno.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "sy_common.h"
#include "sy_maps.h"

#define SYS_REJECT 0
#define SYS_PROCEED 1

/* Tunables, set by the agent between open and load. */
const volatile __u32 sy_cfg_features = SY_FEAT_V4_IN_V6;

static __always_inline __u8 sy_sock_proto(const struct bpf_sock_addr *ctx)
{
	return (__u8)ctx->protocol;
}

/* A 64-bit finaliser (xor-shift-multiply): spreads socket cookies over the table. */
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
 * Where in the Maglev table a new flow lands. TCP: a random slot per connect().
 * UDP: a slot derived from the socket cookie and the service, so every datagram
 * one socket sends to a Service (sendmsg on an unconnected socket is translated
 * per datagram) reaches the same backend, as a conntrack 5-tuple entry keeps it
 * with kube-proxy; different sockets still spread over the backends.
 */
static __always_inline __u32 sy_flow_hash(__u64 cookie, __u8 proto, __u32 svc_id)
{
	if (proto == IPPROTO_UDP)
		return sy_mix64(cookie ^ ((__u64)svc_id << 32));
	return bpf_get_prandom_u32();
}

/*
 * Choose a backend for one new connection or datagram destination: the sticky
 * one while sessionAffinity holds, otherwise the slot `hash` picks in the
 * service's Maglev table (weights are encoded in how many slots a backend owns).
 */
static __always_inline int sy_pick_backend(const struct sy_svc_val *svc,
					   __u64 client, __u32 hash,
					   struct sy_backend **out)
{
	struct sy_affinity_key akey = {};
	struct sy_affinity_val aval = {};
	struct sy_svc_stats *st;
	struct sy_backend *be;
	__u32 svc_id = svc->svc_id;
	__u64 now = 0;
	void *table;
	__u32 slot, *bid, *m;

	st = sy_svc_stats_of(svc_id);
	if (svc->backend_count == 0) {
		sy_count_drop(SY_DROP_NO_BACKEND);
		if (st)
			st->refused += 1;
		return -ECONNREFUSED;
	}

	if (svc->flags & SY_SVC_F_AFFINITY) {
		struct sy_affinity_val *cur;

		akey.client = client;
		akey.svc_id = svc_id;
		now = bpf_ktime_get_ns();
		cur = bpf_map_lookup_elem(&sy_affinity, &akey);
		if (cur && now - cur->last_used_ns <=
				   (__u64)svc->affinity_timeout * 1000000000ULL) {
			be = bpf_map_lookup_elem(&sy_backend, &cur->backend_id);
			/* A backend that left the service has lost its id: pick anew. */
			if (be) {
				cur->last_used_ns = now;
				goto found;
			}
		}
	}

	table = bpf_map_lookup_elem(&sy_maglev, &svc_id);
	if (!table) {
		sy_count_drop(SY_DROP_NO_MAGLEV);
		if (st)
			st->refused += 1;
		return -EHOSTUNREACH;
	}
	slot = SY_MAGLEV_SIZE_SLOT;
	m = bpf_map_lookup_elem(table, &slot);
	if (!m || *m == 0) {
		sy_count_drop(SY_DROP_NO_MAGLEV);
		return -EHOSTUNREACH;
	}
	slot = 1 + hash % *m;
	bid = bpf_map_lookup_elem(table, &slot);
	if (!bid) {
		sy_count_drop(SY_DROP_NO_MAGLEV);
		return -EHOSTUNREACH;
	}
	be = bpf_map_lookup_elem(&sy_backend, bid);
	if (!be) {
		sy_count_drop(SY_DROP_BACKEND_MISSING);
		return -EHOSTUNREACH;
	}
	if (svc->flags & SY_SVC_F_AFFINITY) {
		aval.last_used_ns = now;
		aval.backend_id = *bid;
		bpf_map_update_elem(&sy_affinity, &akey, &aval, BPF_ANY);
	}
found:
	if (st)
		st->translations += 1;
	*out = be;
	return 0;
}

/* IPv4 frontend translation on addr/port in place. */
static __always_inline int sock4_xlate_fwd(void *ctx, __u32 *addr, __u32 *port,
					   __u8 proto)
{
	struct sy_sock_revnat4_key rkey = {};
	struct sy_sock_revnat4_val rval = {};
	struct sy_svc4_key key = {};
	struct sy_backend *be;
	struct sy_svc_val *svc;
	int ret;

	key.addr = *addr;
	key.port = (__be16)*port;
	key.proto = proto;
	key.scope = SY_SCOPE_INTERNAL;
	svc = bpf_map_lookup_elem(&sy_svc4, &key);
	if (!svc)
		return 0;

	rkey.cookie = bpf_get_socket_cookie(ctx);
	ret = sy_pick_backend(svc, bpf_get_netns_cookie(ctx),
			      sy_flow_hash(rkey.cookie, proto, svc->svc_id), &be);
	if (ret < 0)
		return ret;
	if (be->family != 4) {
		sy_count_drop(SY_DROP_FAMILY);
		return -EHOSTUNREACH;
	}

	rkey.addr = be->addr[0];
	rkey.port = be->port;
	rval.addr = key.addr;
	rval.port = key.port;
	rval.svc_id = svc->svc_id;
	if (bpf_map_update_elem(&sy_sock_revnat4, &rkey, &rval, BPF_ANY) < 0)
		sy_count_drop(SY_DROP_REVNAT_UPDATE);

	*addr = be->addr[0];
	*port = be->port;
	return 1;
}

/* Backend → frontend for replies and getpeername (IPv4); 1 if rewritten. */
static __always_inline int sock4_xlate_rev(void *ctx, __u32 *addr, __u32 *port)
{
	struct sy_sock_revnat4_key rkey = {};
	struct sy_sock_revnat4_val *rval;

	rkey.cookie = bpf_get_socket_cookie(ctx);
	rkey.addr = *addr;
	rkey.port = (__be16)*port;
	rval = bpf_map_lookup_elem(&sy_sock_revnat4, &rkey);
	if (!rval)
		return 0;
	*addr = rval->addr;
	*port = rval->port;
	return 1;
}

static __always_inline int sy_is_v4_mapped(const __u32 *a)
{
	return (sy_cfg_features & SY_FEAT_V4_IN_V6) && a[0] == 0 && a[1] == 0 &&
	       a[2] == bpf_htonl(0x0000ffff);
}

static __always_inline int sock6_xlate_fwd(void *ctx, __u32 *addr, __u32 *port,
					   __u8 proto)
{
	struct sy_sock_revnat6_key rkey = {};
	struct sy_sock_revnat6_val rval = {};
	struct sy_svc6_key key = {};
	struct sy_backend *be;
	struct sy_svc_val *svc;
	int ret;

	if (sy_is_v4_mapped(addr))
		return sock4_xlate_fwd(ctx, &addr[3], port, proto);

	__builtin_memcpy(key.addr, addr, 16);
	key.port = (__be16)*port;
	key.proto = proto;
	key.scope = SY_SCOPE_INTERNAL;
	svc = bpf_map_lookup_elem(&sy_svc6, &key);
	if (!svc)
		return 0;

	rkey.cookie = bpf_get_socket_cookie(ctx);
	ret = sy_pick_backend(svc, bpf_get_netns_cookie(ctx),
			      sy_flow_hash(rkey.cookie, proto, svc->svc_id), &be);
	if (ret < 0)
		return ret;
	if (be->family != 6) {
		sy_count_drop(SY_DROP_FAMILY);
		return -EHOSTUNREACH;
	}

	__builtin_memcpy(rkey.addr, be->addr, 16);
	rkey.port = be->port;
	__builtin_memcpy(rval.addr, key.addr, 16);
	rval.port = key.port;
	rval.svc_id = svc->svc_id;
	if (bpf_map_update_elem(&sy_sock_revnat6, &rkey, &rval, BPF_ANY) < 0)
		sy_count_drop(SY_DROP_REVNAT_UPDATE);

	__builtin_memcpy(addr, be->addr, 16);
	*port = be->port;
	return 1;
}

static __always_inline int sock6_xlate_rev(void *ctx, __u32 *addr, __u32 *port)
{
	struct sy_sock_revnat6_key rkey = {};
	struct sy_sock_revnat6_val *rval;

	if (sy_is_v4_mapped(addr))
		return sock4_xlate_rev(ctx, &addr[3], port);

	rkey.cookie = bpf_get_socket_cookie(ctx);
	__builtin_memcpy(rkey.addr, addr, 16);
	rkey.port = (__be16)*port;
	rval = bpf_map_lookup_elem(&sy_sock_revnat6, &rkey);
	if (!rval)
		return 0;
	__builtin_memcpy(addr, rval->addr, 16);
	*port = rval->port;
	return 1;
}

/*
 * The context fields must be read and written with 4-byte accesses, so the
 * hooks copy them to the stack, let the core work there, and write back.
 */
static __always_inline int sy_verdict(int ret)
{
	if (ret < 0) {
		/* Without this the caller would see EPERM, not "connection refused". */
		bpf_set_retval(ret);
		return SYS_REJECT;
	}
	return SYS_PROCEED;
}

static __always_inline int sock4_fwd_hook(struct bpf_sock_addr *ctx)
{
	__u32 addr = ctx->user_ip4, port = ctx->user_port;
	int ret = sock4_xlate_fwd(ctx, &addr, &port, sy_sock_proto(ctx));

	if (ret > 0) {
		ctx->user_ip4 = addr;
		ctx->user_port = port;
	}
	return sy_verdict(ret);
}

static __always_inline int sock4_rev_hook(struct bpf_sock_addr *ctx)
{
	__u32 addr = ctx->user_ip4, port = ctx->user_port;

	if (sock4_xlate_rev(ctx, &addr, &port) > 0) {
		ctx->user_ip4 = addr;
		ctx->user_port = port;
	}
	return SYS_PROCEED;
}

static __always_inline int sock6_fwd_hook(struct bpf_sock_addr *ctx)
{
	__u32 addr[4], port = ctx->user_port;
	int ret;

	addr[0] = ctx->user_ip6[0];
	addr[1] = ctx->user_ip6[1];
	addr[2] = ctx->user_ip6[2];
	addr[3] = ctx->user_ip6[3];
	ret = sock6_xlate_fwd(ctx, addr, &port, sy_sock_proto(ctx));
	if (ret > 0) {
		ctx->user_ip6[0] = addr[0];
		ctx->user_ip6[1] = addr[1];
		ctx->user_ip6[2] = addr[2];
		ctx->user_ip6[3] = addr[3];
		ctx->user_port = port;
	}
	return sy_verdict(ret);
}

static __always_inline int sock6_rev_hook(struct bpf_sock_addr *ctx)
{
	__u32 addr[4], port = ctx->user_port;

	addr[0] = ctx->user_ip6[0];
	addr[1] = ctx->user_ip6[1];
	addr[2] = ctx->user_ip6[2];
	addr[3] = ctx->user_ip6[3];
	if (sock6_xlate_rev(ctx, addr, &port) > 0) {
		ctx->user_ip6[0] = addr[0];
		ctx->user_ip6[1] = addr[1];
		ctx->user_ip6[2] = addr[2];
		ctx->user_ip6[3] = addr[3];
		ctx->user_port = port;
	}
	return SYS_PROCEED;
}

SEC("cgroup/connect4")
int sy_connect4(struct bpf_sock_addr *ctx) { return sock4_fwd_hook(ctx); }

SEC("cgroup/sendmsg4")
int sy_sendmsg4(struct bpf_sock_addr *ctx) { return sock4_fwd_hook(ctx); }

SEC("cgroup/recvmsg4")
int sy_recvmsg4(struct bpf_sock_addr *ctx) { return sock4_rev_hook(ctx); }

SEC("cgroup/getpeername4")
int sy_getpeername4(struct bpf_sock_addr *ctx) { return sock4_rev_hook(ctx); }

SEC("cgroup/connect6")
int sy_connect6(struct bpf_sock_addr *ctx) { return sock6_fwd_hook(ctx); }

SEC("cgroup/sendmsg6")
int sy_sendmsg6(struct bpf_sock_addr *ctx) { return sock6_fwd_hook(ctx); }

SEC("cgroup/recvmsg6")
int sy_recvmsg6(struct bpf_sock_addr *ctx) { return sock6_rev_hook(ctx); }

SEC("cgroup/getpeername6")
int sy_getpeername6(struct bpf_sock_addr *ctx) { return sock6_rev_hook(ctx); }

char LICENSE[] SEC("license") = "Dual BSD/GPL";
