// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Destroys connected UDP sockets whose peer is a backend that left every
 * Service, so that the application sees an error (ECONNABORTED) and
 * reconnects through its Service again, instead of sending into the void.
 *
 * A socket iterator (iter/udp) walks the UDP sockets of the network namespace
 * the iterator was opened in; the agent opens one in every namespace on the
 * node (pods and the host). A socket is destroyed only when
 *   - it is connected (a peer fixed by connect()),
 *   - the socket hooks translated it (its cookie and peer are in
 *     sy_sock_revnat4/6; a socket that dialled a pod address itself is left
 *     alone),
 *   - and {the frontend its reverse entry names, its peer} is in
 *     sy_sock_stale, filled by the agent just before the walk with the
 *     backends that left each UDP frontend (a pod that is still a backend of
 *     the frontend keeps its sockets, whatever other Services do).
 * Each destroyed socket is reported to the reader as a struct sy_reaped.
 *
 * bpf_sock_destroy() is a kfunc of Linux 6.5; on older kernels this object
 * does not load and the agent says so (connected sockets then keep their
 * address until the application reconnects, as with kube-proxy before it
 * flushes conntrack).
 *
 * Only UAPI headers are used: the few kernel types read here are declared
 * with preserve_access_index, and libbpf relocates the field offsets against
 * the running kernel's BTF (CO-RE).
 */
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "sy_common.h"
#include "sy_maps.h"

#define SY_AF_INET 2
#define SY_AF_INET6 10
#define SY_TCP_ESTABLISHED 1 /* a connected UDP socket's state */

struct in6_addr___sy {
	__u32 s6_addr32[4];
};

struct sock_common {
	unsigned short skc_family;
	volatile unsigned char skc_state;
	__be32 skc_daddr;
	__be16 skc_dport;
	struct in6_addr___sy skc_v6_daddr;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

struct udp_sock;

struct bpf_iter_meta {
	void *seq;
	__u64 session_id;
	__u64 seq_num;
} __attribute__((preserve_access_index));

struct bpf_iter__udp {
	struct bpf_iter_meta *meta;
	struct udp_sock *udp_sk;
	__u32 uid;
	int bucket;
} __attribute__((preserve_access_index));

extern int bpf_sock_destroy(struct sock_common *sk) __ksym;

/* A backend that left a frontend (or whose frontend went): its sockets must go. 24 bytes. */
struct sy_stale_key {
	__u32 svc_id;  /* the frontend, as the socket's reverse translation names it */
	__u32 addr[4]; /* network order; IPv4 in addr[0], rest zero */
	__be16 port;
	__u8 proto;    /* IPPROTO_UDP */
	__u8 family;   /* 4 or 6 */
};

/* One destroyed socket, as the reader of the iterator gets it. 32 bytes. */
struct sy_reaped {
	__u64 cookie;
	__u32 addr[4];
	__be16 port;
	__u8 family;
	__u8 pad;
	__s32 err; /* bpf_sock_destroy()'s result */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sy_stale_key);
	__type(value, __u32);
} sy_sock_stale SEC(".maps");

/* Destroys one socket and reports it (a function of its own: the record's layout is in the BTF). */
static __noinline int sy_reap(struct bpf_iter_meta *meta, struct sock *sk, struct sy_reaped *out)
{
	out->err = bpf_sock_destroy((struct sock_common *)sk);
	return bpf_seq_write(meta->seq, out, sizeof(*out));
}

SEC("iter/udp")
int sy_reap_udp(struct bpf_iter__udp *ctx)
{
	struct sock *sk = (struct sock *)ctx->udp_sk;
	struct sy_stale_key key = {};
	struct sy_reaped out = {};
	__u16 family;
	__u64 cookie;

	if (!sk)
		return 0;
	if (sk->__sk_common.skc_state != SY_TCP_ESTABLISHED)
		return 0;
	family = sk->__sk_common.skc_family;
	key.proto = IPPROTO_UDP;
	key.port = sk->__sk_common.skc_dport;
	if (family == SY_AF_INET) {
		key.family = 4;
		key.addr[0] = sk->__sk_common.skc_daddr;
	} else if (family == SY_AF_INET6) {
		key.addr[0] = sk->__sk_common.skc_v6_daddr.s6_addr32[0];
		key.addr[1] = sk->__sk_common.skc_v6_daddr.s6_addr32[1];
		key.addr[2] = sk->__sk_common.skc_v6_daddr.s6_addr32[2];
		key.addr[3] = sk->__sk_common.skc_v6_daddr.s6_addr32[3];
		key.family = 6;
		/* A dual-stack socket connected to an IPv4 backend (::ffff:a.b.c.d). */
		if (key.addr[0] == 0 && key.addr[1] == 0 && key.addr[2] == bpf_htonl(0x0000ffff)) {
			key.family = 4;
			key.addr[0] = key.addr[3];
			key.addr[2] = 0;
			key.addr[3] = 0;
		}
	} else {
		return 0;
	}
	/* Translated by the socket hooks? Then its reverse entry names the frontend. */
	cookie = bpf_get_socket_cookie(sk);
	if (key.family == 4) {
		struct sy_sock_revnat4_key rk = { .cookie = cookie, .addr = key.addr[0], .port = key.port };
		struct sy_sock_revnat4_val *rv = bpf_map_lookup_elem(&sy_sock_revnat4, &rk);

		if (!rv)
			return 0;
		key.svc_id = rv->svc_id;
	} else {
		struct sy_sock_revnat6_key rk = { .cookie = cookie, .port = key.port };
		struct sy_sock_revnat6_val *rv;

		__builtin_memcpy(rk.addr, key.addr, 16);
		rv = bpf_map_lookup_elem(&sy_sock_revnat6, &rk);
		if (!rv)
			return 0;
		key.svc_id = rv->svc_id;
	}
	if (!bpf_map_lookup_elem(&sy_sock_stale, &key))
		return 0;

	out.cookie = cookie;
	__builtin_memcpy(out.addr, key.addr, 16);
	out.port = key.port;
	out.family = key.family;
	sy_reap(ctx->meta, sk, &out);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
