/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Per-flow state of the tc path: lifetimes by protocol and TCP state, when a
 * remembered flow may keep its backend, and which packets belong to the
 * node's own sockets rather than to a flow.
 */
#ifndef SY_LIB_CONNTRACK_H
#define SY_LIB_CONNTRACK_H

#include "pkt.h"

/* Tunables, set by the agent between open and load. */
const volatile __u32 sy_cfg_ct_tcp_sec = 21600;   /* established TCP flow idle timeout */
const volatile __u32 sy_cfg_ct_syn_sec = 60;      /* TCP flow that has not seen a reply */
const volatile __u32 sy_cfg_ct_close_sec = 10;    /* TCP flow after RST or FIN both ways */
const volatile __u32 sy_cfg_ct_udp_sec = 120;     /* UDP flow idle timeout */

/* How long a flow may stay idle, by protocol and TCP state. */
static __always_inline __u64 sy_ct_lifetime_ns(__u16 flags, __u8 proto)
{
	__u32 s;

	if (proto != IPPROTO_TCP)
		s = sy_cfg_ct_udp_sec;
	else if ((flags & SY_CT_F_RST) || ((flags & SY_CT_F_FIN_FWD) && (flags & SY_CT_F_FIN_REV)))
		s = sy_cfg_ct_close_sec;
	else if (!(flags & SY_CT_F_REPLIED))
		s = sy_cfg_ct_syn_sec;
	else
		s = sy_cfg_ct_tcp_sec;
	return (__u64)s * 1000000000ULL;
}

static __always_inline __u16 sy_tcp_state(__u16 flags, __u8 tcp_flags, int reply)
{
	if (tcp_flags & SY_TCP_RST)
		flags |= SY_CT_F_RST;
	if (tcp_flags & SY_TCP_FIN)
		flags |= reply ? SY_CT_F_FIN_REV : SY_CT_F_FIN_FWD;
	return flags;
}

/*
 * A remembered flow keeps its backend unless it timed out, or a fresh SYN
 * reuses the ports of a closed connection. Then:
 *
 * - an established TCP connection (a reply was seen) keeps the backend
 *   address and port held in its entry, whether or not the backend is still
 *   in its Service: a terminating or removed endpoint keeps the connections
 *   it has, as conntrack does for kube-proxy, for as long as the pod answers;
 * - any other flow (UDP, a TCP connection not yet answered) keeps its backend
 *   only while the backend id still names the same address and port in
 *   sy_backend: a removed backend's flows move to a current one, and a
 *   reused id never sends a flow to somebody else's address.
 */
static __always_inline int sy_ct_usable(__u16 flags, __u64 last_seen, __u32 backend_id,
					const __u32 *addr, __be16 port, const struct sy_pkt *p, __u64 now)
{
	struct sy_backend *be;

	if (now - last_seen > sy_ct_lifetime_ns(flags, p->proto))
		return 0;
	if (p->proto == IPPROTO_TCP && (p->tcp_flags & (SY_TCP_SYN | SY_TCP_ACK)) == SY_TCP_SYN &&
	    ((flags & SY_CT_F_RST) || ((flags & SY_CT_F_FIN_FWD) && (flags & SY_CT_F_FIN_REV))))
		return 0;
	if (p->proto == IPPROTO_TCP && (flags & SY_CT_F_REPLIED))
		return 1;
	be = bpf_map_lookup_elem(&sy_backend, &backend_id);
	if (!be || be->port != port || be->family != p->family || be->addr[0] != addr[0])
		return 0;
	if (p->family == 6 && (be->addr[1] != addr[1] || be->addr[2] != addr[2] || be->addr[3] != addr[3]))
		return 0;
	return 1;
}

/*
 * A packet with no usable flow for a frontend port that belongs to one of the
 * node's own connections (the node dialled out from a port that is also a
 * NodePort, and this is the peer's answer) is not ours: it goes to the
 * node's socket untouched. TCP: any socket but a listener matching the full
 * tuple (a SYN_SENT socket is already hashed); UDP: a connected socket.
 * A pure TCP SYN always opens a new flow.
 */
static __always_inline int sy_local_socket(struct __sk_buff *skb, const struct sy_pkt *p)
{
	struct bpf_sock_tuple t = {};
	__u32 len;
	int own = 0;

	if (p->proto == IPPROTO_TCP && (p->tcp_flags & (SY_TCP_SYN | SY_TCP_ACK)) == SY_TCP_SYN)
		return 0;
	if (p->family == 4) {
		t.ipv4.saddr = p->saddr[0];
		t.ipv4.daddr = p->daddr[0];
		t.ipv4.sport = p->sport;
		t.ipv4.dport = p->dport;
		len = sizeof(t.ipv4);
	} else {
		__builtin_memcpy(t.ipv6.saddr, p->saddr, 16);
		__builtin_memcpy(t.ipv6.daddr, p->daddr, 16);
		t.ipv6.sport = p->sport;
		t.ipv6.dport = p->dport;
		len = sizeof(t.ipv6);
	}
	if (p->proto == IPPROTO_TCP) {
		struct bpf_sock *sk = bpf_skc_lookup_tcp(skb, &t, len, BPF_F_CURRENT_NETNS, 0);

		if (sk) {
			own = sk->state != BPF_TCP_LISTEN;
			bpf_sk_release(sk);
		}
	} else {
		struct bpf_sock *sk = bpf_sk_lookup_udp(skb, &t, len, BPF_F_CURRENT_NETNS, 0);

		if (sk) {
			own = sk->state == BPF_TCP_ESTABLISHED; /* a connected UDP socket */
			bpf_sk_release(sk);
		}
	}
	if (own)
		sy_tc_count(SY_TC_PASS_LOCAL_SOCKET);
	return own;
}

#endif
