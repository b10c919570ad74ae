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
#include "lib/lb.h"

#define SYS_REJECT 0
#define SYS_PROCEED 1

/* Tunables, set by the agent between open and load. */
const volatile __u32 sy_cfg_features = SY_FEAT_V4_IN_V6;

static __always_inline __u8 sy_sock_proto(const struct bpf_sock_addr *ctx)
{
	return (__u8)ctx->protocol;
}

/*
 * Where in the Maglev table a new flow lands. TCP: a random slot per connect().
 * UDP: a slot derived from the socket cookie and the service, so every datagram
 * one socket sends to a Service (sendmsg on an unconnected socket is translated
 * per datagram) reaches the same backend, as a conntrack 5-tuple entry keeps it
 * with kube-proxy; different sockets still spread over the backends.
 */
static __always_inline __u32 sy_sock_hash(__u64 cookie, __u8 proto, __u32 svc_id)
{
	if (proto == IPPROTO_UDP)
		return sy_mix64(cookie ^ ((__u64)svc_id << 32));
	return bpf_get_prandom_u32();
}

/*
 * The backend of one connect() or datagram destination (lib/lb.h), or the
 * errno the application gets: ECONNREFUSED when the Service has no backend
 * (as kube-proxy's REJECT rule), EHOSTUNREACH for a transient inconsistency.
 */
static __always_inline int sy_sock_pick(void *ctx, const struct sy_svc_val *svc, __u64 cookie,
					__u8 proto, __u8 family, struct sy_backend **out)
{
	__u32 bid;
	int err = sy_lb_pick(svc, bpf_get_netns_cookie(ctx), sy_sock_hash(cookie, proto, svc->svc_id),
			     &bid, out);

	if (err == SY_PICK_NO_BACKEND) {
		sy_count_drop(SY_DROP_NO_BACKEND);
		return -ECONNREFUSED;
	}
	if (err) {
		sy_count_drop(err == SY_PICK_NO_TABLE ? SY_DROP_NO_MAGLEV : SY_DROP_BACKEND_MISSING);
		return -EHOSTUNREACH;
	}
	if ((*out)->family != family) {
		sy_count_drop(SY_DROP_FAMILY);
		return -EHOSTUNREACH;
	}
	return 0;
}

/*
 * Reverse translations: a TCP socket has one peer, recorded in its own storage
 * (sy_tcp_peer, freed with the socket); UDP sockets, which may send to many
 * frontends, have {cookie, backend} entries in the LRU maps sy_sock_revnat4/6.
 * TCP connects, far more numerous, thus never evict what UDP replies need
 * (recvmsg would show the backend's address, and a resolver drops such an
 * answer), nor each other's records.
 */
static __always_inline void sy_tcp_peer_set(struct bpf_sock_addr *ctx, const __u32 *be_addr,
					    __be16 be_port, const __u32 *fe_addr, __be16 fe_port,
					    __u32 svc_id, int words)
{
	struct bpf_sock *sk = ctx->sk;
	struct sy_tcp_peer *p;
	int i;

	if (!sk) {
		sy_count_drop(SY_DROP_REVNAT_UPDATE);
		return;
	}
	p = bpf_sk_storage_get(&sy_tcp_peer, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!p) {
		sy_count_drop(SY_DROP_REVNAT_UPDATE);
		return;
	}
	for (i = 0; i < 4; i++) {
		p->be_addr[i] = i < words ? be_addr[i] : 0;
		p->fe_addr[i] = i < words ? fe_addr[i] : 0;
	}
	p->be_port = be_port;
	p->fe_port = fe_port;
	p->svc_id = svc_id;
}

/*
 * The frontend of a TCP socket whose peer is the backend it was translated to;
 * 0 when it has no record or one for another peer (a socket that connected
 * again, elsewhere, after a failed attempt).
 */
static __always_inline int sy_tcp_peer_rev(struct bpf_sock_addr *ctx, __u32 *addr, __u32 *port,
					   int words)
{
	struct bpf_sock *sk = ctx->sk;
	struct sy_tcp_peer *p;
	int i;

	if (!sk)
		return 0;
	p = bpf_sk_storage_get(&sy_tcp_peer, sk, 0, 0);
	if (!p || p->be_port != (__be16)*port)
		return 0;
	for (i = 0; i < 4; i++)
		if (p->be_addr[i] != (i < words ? addr[i] : 0))
			return 0;
	for (i = 0; i < words; i++)
		addr[i] = p->fe_addr[i];
	*port = p->fe_port;
	return 1;
}

/* IPv4 frontend translation on addr/port in place. */
static __always_inline int sock4_xlate_fwd(struct bpf_sock_addr *ctx, __u32 *addr, __u32 *port,
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

	/* Only UDP needs the cookie (its flow hash and reverse key): TCP sockets skip the global counter. */
	rkey.cookie = proto == IPPROTO_TCP ? 0 : bpf_get_socket_cookie(ctx);
	ret = sy_sock_pick(ctx, svc, rkey.cookie, proto, 4, &be);
	if (ret < 0)
		return ret;

	if (proto == IPPROTO_TCP) {
		sy_tcp_peer_set(ctx, be->addr, be->port, &key.addr, key.port, svc->svc_id, 1);
	} else {
		rkey.addr = be->addr[0];
		rkey.port = be->port;
		rval.addr = key.addr;
		rval.port = key.port;
		rval.svc_id = svc->svc_id;
		if (bpf_map_update_elem(&sy_sock_revnat4, &rkey, &rval, BPF_ANY) < 0)
			sy_count_drop(SY_DROP_REVNAT_UPDATE);
	}

	*addr = be->addr[0];
	*port = be->port;
	return 1;
}

/* Backend → frontend for replies and getpeername (IPv4); 1 if rewritten. */
static __always_inline int sock4_xlate_rev(struct bpf_sock_addr *ctx, __u32 *addr, __u32 *port, __u8 proto)
{
	struct sy_sock_revnat4_key rkey = {};
	struct sy_sock_revnat4_val *rval;

	if (proto == IPPROTO_TCP)
		return sy_tcp_peer_rev(ctx, addr, port, 1);
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

static __always_inline int sock6_xlate_fwd(struct bpf_sock_addr *ctx, __u32 *addr, __u32 *port,
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

	/* Only UDP needs the cookie (its flow hash and reverse key): TCP sockets skip the global counter. */
	rkey.cookie = proto == IPPROTO_TCP ? 0 : bpf_get_socket_cookie(ctx);
	ret = sy_sock_pick(ctx, svc, rkey.cookie, proto, 6, &be);
	if (ret < 0)
		return ret;

	if (proto == IPPROTO_TCP) {
		sy_tcp_peer_set(ctx, be->addr, be->port, key.addr, key.port, svc->svc_id, 4);
	} else {
		__builtin_memcpy(rkey.addr, be->addr, 16);
		rkey.port = be->port;
		__builtin_memcpy(rval.addr, key.addr, 16);
		rval.port = key.port;
		rval.svc_id = svc->svc_id;
		if (bpf_map_update_elem(&sy_sock_revnat6, &rkey, &rval, BPF_ANY) < 0)
			sy_count_drop(SY_DROP_REVNAT_UPDATE);
	}

	__builtin_memcpy(addr, be->addr, 16);
	*port = be->port;
	return 1;
}

static __always_inline int sock6_xlate_rev(struct bpf_sock_addr *ctx, __u32 *addr, __u32 *port, __u8 proto)
{
	struct sy_sock_revnat6_key rkey = {};
	struct sy_sock_revnat6_val *rval;

	if (sy_is_v4_mapped(addr))
		return sock4_xlate_rev(ctx, &addr[3], port, proto);
	if (proto == IPPROTO_TCP)
		return sy_tcp_peer_rev(ctx, addr, port, 4);

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

	if (sock4_xlate_rev(ctx, &addr, &port, sy_sock_proto(ctx)) > 0) {
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
	if (sock6_xlate_rev(ctx, addr, &port, sy_sock_proto(ctx)) > 0) {
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
