/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Per-flow state of the tc path: lifetimes by protocol and TCP state, when a
 * remembered flow may keep its backend, and which packets belong to the
 * node's own sockets rather than to a flow.
 */
#ifndef SY_LIB_CONNTRACK_H
#define SY_LIB_CONNTRACK_H

#include "pkt.h"

static __always_inline int sy_pure_syn(const struct sy_pkt *p)
{
	return p->proto == IPPROTO_TCP &&
	       (p->tcp_flags & (SY_TCP_SYN | SY_TCP_ACK | SY_TCP_RST)) == SY_TCP_SYN;
}

/* RST seen, or FIN both ways. */
static __always_inline int sy_ct_closed(__u16 flags)
{
	return (flags & SY_CT_F_RST) || ((flags & SY_CT_F_FIN_FWD) && (flags & SY_CT_F_FIN_REV));
}

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
	else if (sy_ct_closed(flags))
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
 * A forward packet's effect on a flow it may use. A pure SYN on a flow that
 * was answered and never seen to close is a new connection on reused ports
 * (the old one ended without a FIN or RST passing here): it keeps the
 * backend but starts with a fresh state, so that the old connection's FIN or
 * reply flags do not close or age the new one.
 */
static __always_inline __u16 sy_flow_state(__u16 flags, const struct sy_pkt *p)
{
	if (p->proto != IPPROTO_TCP)
		return flags;
	if (sy_pure_syn(p) && (flags & SY_CT_F_REPLIED)) {
		flags &= SY_CT_F_MASQ | SY_CT_F_LOCAL;
		sy_tc_count(SY_TC_FLOW_REUSED);
	}
	return sy_tcp_state(flags, p->tcp_flags, 0);
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
	if (sy_pure_syn(p) && sy_ct_closed(flags))
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

/* The packet's own tuple, as the socket and conntrack lookups take it; returns its length. */
static __always_inline __u32 sy_fill_tuple(struct bpf_sock_tuple *t, const struct sy_pkt *p)
{
	if (p->family == 4) {
		t->ipv4.saddr = p->saddr[0];
		t->ipv4.daddr = p->daddr[0];
		t->ipv4.sport = p->sport;
		t->ipv4.dport = p->dport;
		return sizeof(t->ipv4);
	}
	__builtin_memcpy(t->ipv6.saddr, p->saddr, 16);
	__builtin_memcpy(t->ipv6.daddr, p->daddr, 16);
	t->ipv6.sport = p->sport;
	t->ipv6.dport = p->dport;
	return sizeof(t->ipv6);
}

/*
 * A packet with no usable flow for a frontend port that belongs to one of the
 * node's own connections (the node dialled out from a port that is also a
 * NodePort, and this is the peer's answer) is not ours: it goes to the
 * node's socket untouched. TCP: any socket but a listener matching the full
 * tuple (a SYN_SENT socket is already hashed); UDP: a connected socket.
 */
static __always_inline int sy_local_socket(struct __sk_buff *skb, const struct sy_pkt *p)
{
	struct bpf_sock_tuple t = {};
	__u32 len = sy_fill_tuple(&t, p);
	struct bpf_sock *sk;
	int own = 0;

	if (p->proto == IPPROTO_TCP) {
		sk = bpf_skc_lookup_tcp(skb, &t, len, BPF_F_CURRENT_NETNS, 0);
		if (sk) {
			own = sk->state != BPF_TCP_LISTEN;
			bpf_sk_release(sk);
		}
	} else {
		sk = bpf_sk_lookup_udp(skb, &t, len, BPF_F_CURRENT_NETNS, 0);
		if (sk) {
			own = sk->state == BPF_TCP_ESTABLISHED; /* a connected UDP socket */
			bpf_sk_release(sk);
		}
	}
	if (own)
		sy_tc_count(SY_TC_PASS_LOCAL_SOCKET);
	return own;
}

/*
 * The kernel's connection tracking (netfilter), asked through the
 * bpf_skb_ct_lookup kfunc (Linux >= 5.18). tc ingress runs before netfilter,
 * so what it finds was made by earlier packets: when the packet's tuple is
 * the REPLY tuple of a conntrack entry, another connection owns it (typically
 * a pod's connection masqueraded to nodeIP:port, the port drawn from a range
 * that holds the NodePorts, as MASQUERADE --random-fully does) and this is
 * its peer's answer. switchyard's own flows never match: their conntrack
 * entries are made after the translation, keyed by the backend's address.
 *
 * Built without it (-DSY_NO_KERNEL_CT: tc_lb_noct.o, loaded when the kernel
 * has no such kfunc), the answer is always "unknown": a TCP segment that is
 * not a pure SYN never starts nor adopts a flow, and UDP is protected only by
 * the local socket check.
 */
#ifndef SY_NO_KERNEL_CT
struct nf_conn {
	int opaque; /* never read: only passed back to bpf_ct_release */
};

/* The 12-byte layout every kernel with the kfunc accepts (later ones add zones). */
struct bpf_ct_opts {
	__s32 netns_id;
	__s32 error;
	__u8 l4proto;
	__u8 dir;
	__u8 reserved[2];
};

extern struct nf_conn *bpf_skb_ct_lookup(struct __sk_buff *skb, struct bpf_sock_tuple *tuple, __u32 tuple_len,
					 struct bpf_ct_opts *opts, __u32 opts_len) __ksym;
extern void bpf_ct_release(struct nf_conn *ct) __ksym;

#define SY_IP_CT_DIR_REPLY 1
#endif

static __always_inline int sy_conntrack_reply(struct __sk_buff *skb, const struct sy_pkt *p)
{
#ifdef SY_NO_KERNEL_CT
	return 0;
#else
	struct bpf_sock_tuple t = {};
	struct bpf_ct_opts opts = { .netns_id = BPF_F_CURRENT_NETNS, .l4proto = p->proto };
	__u32 len = sy_fill_tuple(&t, p);
	struct nf_conn *ct;
	int reply;

	ct = bpf_skb_ct_lookup(skb, &t, len, &opts, sizeof(opts));
	if (!ct)
		return 0;
	reply = opts.dir == SY_IP_CT_DIR_REPLY;
	bpf_ct_release(ct);
	return reply;
#endif
}

/*
 * The ownership rule (docs/north-south.md, "What the tc path owns"), for a
 * packet to an external frontend with no usable flow entry; returns 1 when
 * the packet is not ours (passed untouched, counted):
 *
 * - a pure TCP SYN starts a flow;
 * - a TCP packet with SYN or RST that is not a pure SYN (a SYN-ACK, a reset)
 *   never does: it answers somebody else's connection;
 * - any other packet (TCP mid-stream, UDP) is somebody else's when the
 *   kernel's conntrack holds its tuple as a reply, or a node's socket owns
 *   it; otherwise a UDP datagram starts a flow and a TCP segment is adopted
 *   (without conntrack, tc_lb_noct.o: never adopted).
 */
static __always_inline int sy_not_ours(struct __sk_buff *skb, const struct sy_pkt *p)
{
	if (p->proto == IPPROTO_TCP) {
		if (sy_pure_syn(p))
			return 0;
#ifdef SY_NO_KERNEL_CT
		/* Without conntrack a mid-stream segment may be a foreign NAT's: never adopted. */
		sy_tc_count(SY_TC_PASS_NO_START);
		return 1;
#endif
		if (p->tcp_flags & (SY_TCP_SYN | SY_TCP_RST)) {
			sy_tc_count(SY_TC_PASS_NO_START);
			return 1;
		}
	}
	if (sy_conntrack_reply(skb, p)) {
		sy_tc_count(SY_TC_PASS_CONNTRACK);
		return 1;
	}
	if (sy_local_socket(skb, p))
		return 1;
	if (p->proto == IPPROTO_TCP)
		sy_tc_count(SY_TC_FLOW_ADOPTED);
	return 0;
}

/*
 * Whether a reply that found a reverse entry still belongs to that flow. It
 * does not when the flow idled past its lifetime, when the flow was reset
 * (nothing legitimate follows a RST), or when a SYN-ACK comes after the flow
 * closed with FIN both ways: the client reused its port for a connection of
 * its own, straight to the backend, and the reply is that connection's.
 * `flags` and `last_seen` are the flow's state before this packet.
 */
static __always_inline int sy_rev_stale(__u16 flags, __u64 last_seen, const struct sy_pkt *p, __u64 now)
{
	if (now - last_seen > sy_ct_lifetime_ns(flags, p->proto))
		return 1;
	if (p->proto != IPPROTO_TCP)
		return 0;
	if (flags & SY_CT_F_RST)
		return 1;
	return sy_ct_closed(flags) && (p->tcp_flags & SY_TCP_SYN);
}

#endif
