// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * North-south load balancing on the node's devices (tc ingress + egress).
 *
 * Ingress translates packets that arrive for an external frontend (NodePort
 * on a node address, a LoadBalancer ingress IP, an externalIP) into packets
 * for a backend and lets them continue up the stack, which routes them to a
 * local pod or forwards them to another node. Egress translates the replies
 * back. ICMP errors that quote a translated packet are translated too, so
 * that path MTU discovery and port-unreachable work through the translation.
 *
 * Backend choice: Maglev over a hash of the flow that does not depend on the
 * node (no per-node seed, and the destination address is left out so that a
 * NodePort flow hashes the same on every node address), so every node picks
 * the same backend for the same flow. The choice is remembered per flow in
 * sy_ct4/6 (LRU), so a change of the backend set does not move an
 * established flow.
 *
 * A flow to a backend on another node must come back through this node: the
 * program sets the masquerade mark (sy_cfg_masq_mark) and a fixed iptables
 * rule in nat POSTROUTING masquerades marked packets. That is why translated
 * packets go up the stack (TC_ACT_OK) rather than being redirected.
 *
 * What the parser does not understand is passed on untouched and counted
 * (sy_tc_stats): non-IP frames, truncated headers, fragments, IPv6 routing /
 * fragment / AH / ESP headers, protocols other than TCP and UDP. IPv4 options
 * and IPv6 hop-by-hop / destination options are walked.
 *
 * Verdicts: TC_ACT_UNSPEC when the packet is none of our business (the next
 * program on the hook decides), TC_ACT_OK after a translation, TC_ACT_SHOT
 * for a drop (each drop has a counter).
 */
#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "sy_common.h"
#include "sy_maps.h"
#include "tc_maps.h"
#include "lib/pkt.h"
#include "lib/csum.h"
#include "lib/conntrack.h"
#include "lib/lb.h"

/* Tunables, set by the agent between open and load (flow timeouts: lib/conntrack.h). */
const volatile __u32 sy_cfg_masq_mark = 0x1000;   /* skb->mark bit for the masquerade rule */

/* ------------------------------------------------------------ selection */

/* A node-independent hash of the flow (client address and port, frontend port, protocol). */
static __always_inline __u32 sy_pkt_hash(const struct sy_pkt *p)
{
	__u32 h = 0x5779;

	h = sy_mix32(h, bpf_ntohl(p->saddr[0]));
	if (p->family == 6) {
		h = sy_mix32(h, bpf_ntohl(p->saddr[1]));
		h = sy_mix32(h, bpf_ntohl(p->saddr[2]));
		h = sy_mix32(h, bpf_ntohl(p->saddr[3]));
	}
	h = sy_mix32(h, ((__u32)bpf_ntohs(p->sport) << 16) | bpf_ntohs(p->dport));
	h = sy_mix32(h, p->proto);
	return sy_fmix32(h);
}

/* sessionAffinity: ClientIP on the tc path: the client is its source address. */
static __always_inline __u64 sy_client_of(const struct sy_pkt *p)
{
	if (p->family == 4)
		return p->saddr[0];
	return (((__u64)p->saddr[0] << 32) | p->saddr[1]) ^ (((__u64)p->saddr[2] << 32) | p->saddr[3]);
}

/*
 * Chooses a backend for a new external flow (lib/lb.h), or says why not:
 * returns 0 and fills *bid / *out, or the drop counter to bump.
 */
static __always_inline int sy_tc_pick(const struct sy_svc_val *svc, const struct sy_ext_val *ext,
				      const struct sy_pkt *p, __u32 *bid, struct sy_backend **out)
{
	int err = sy_lb_pick(svc, sy_client_of(p), sy_pkt_hash(p), bid, out);

	if (err == SY_PICK_NO_BACKEND)
		return (ext && (ext->flags & SY_EXT_F_LOCAL)) ? SY_TC_DROP_NO_LOCAL : SY_TC_DROP_NO_BACKEND;
	if (err)
		return SY_TC_DROP_NO_TABLE;
	if ((*out)->family != p->family)
		return SY_TC_DROP_FAMILY;
	return 0;
}

/* Per-service and per-backend packet and byte counters of translated client → backend packets. */
static __always_inline void sy_count_pkt(__u32 svc_id, __u32 backend_id, const struct __sk_buff *skb)
{
	struct sy_svc_stats *st = sy_svc_stats_of(svc_id);
	struct sy_be_stats *bst = sy_be_stats_of(backend_id);

	if (st) {
		st->packets += 1;
		st->bytes += skb->len;
	}
	if (bst) {
		bst->packets += 1;
		bst->bytes += skb->len;
	}
}

/* A backend's first answer to a new TCP flow is a reset: it refused the connection. */
static __always_inline void sy_count_refused(const struct sy_pkt *p, __u16 flags, __u32 backend_id)
{
	struct sy_be_stats *bst;

	if (p->proto != IPPROTO_TCP || !(p->tcp_flags & SY_TCP_RST) || (flags & SY_CT_F_REPLIED))
		return;
	bst = sy_be_stats_of(backend_id);
	if (bst)
		bst->refused += 1;
}

/* ------------------------------------------------------------ IPv4 */

static __always_inline int sy_src_allowed4(const struct sy_svc4_key *fe, __be32 src)
{
	struct sy_src_range4_key k = {
		.prefixlen = 64 + 32,
		.fe_addr = fe->addr,
		.fe_port = fe->port,
		.proto = fe->proto,
		.src = src,
	};

	return bpf_map_lookup_elem(&sy_src_range4, &k) != NULL;
}

/* Client → frontend becomes client → backend. */
static __always_inline int sy_fwd4(struct __sk_buff *skb, struct sy_pkt *p)
{
	struct sy_ct4_key k = {
		.saddr = p->saddr[0], .daddr = p->daddr[0], .sport = p->sport, .dport = p->dport,
		.proto = p->proto, .dir = SY_CT_FWD,
	};
	struct sy_ct4_val *ct;
	__u64 now = bpf_ktime_get_ns();
	__be32 be_addr;
	__be16 be_port;
	__u16 flags;
	__u32 svc_id, be_id;
	__u32 csum_off = sy_l4_csum_off(p);
	__u64 l4f = sy_l4_flags(p);

	ct = bpf_map_lookup_elem(&sy_ct4, &k);
	if (ct && sy_ct_usable(ct->flags, ct->last_seen_ns, ct->backend_id, &ct->addr, ct->port, p, now)) {
		struct sy_ct4_key rk = {
			.saddr = ct->addr, .daddr = p->saddr[0], .sport = ct->port, .dport = p->sport,
			.proto = p->proto, .dir = SY_CT_REV,
		};

		be_addr = ct->addr;
		be_port = ct->port;
		flags = sy_flow_state(ct->flags, p);
		ct->flags = flags;
		ct->last_seen_ns = now;
		svc_id = ct->svc_id;
		be_id = ct->backend_id;
		/*
		 * The reverse entry was evicted (LRU): rebuild it, or the replies go
		 * out untranslated. Not for a closed flow: its reverse entry was
		 * dropped because the client's port now talks to the backend directly.
		 */
		if (!sy_ct_closed(flags) && !bpf_map_lookup_elem(&sy_ct4, &rk)) {
			struct sy_ct4_val rv = {
				.addr = p->daddr[0], .port = p->dport, .flags = flags, .svc_id = svc_id,
				.backend_id = ct->backend_id, .last_seen_ns = now,
			};

			if (bpf_map_update_elem(&sy_ct4, &rk, &rv, BPF_NOEXIST) == 0)
				sy_tc_count(SY_TC_CT_REV_REBUILT);
		}
	} else {
		struct sy_svc4_key sk = { .addr = p->daddr[0], .port = p->dport, .proto = p->proto,
					  .scope = SY_SCOPE_EXTERNAL };
		struct sy_ct4_key rk = {};
		struct sy_ct4_val fv = {}, rv = {};
		struct sy_svc_val *svc;
		struct sy_ext_val *ext;
		struct sy_backend *be;
		__u32 bid = 0;
		int why;

		svc = bpf_map_lookup_elem(&sy_svc4, &sk);
		if (!svc || sy_not_ours(skb, p))
			return TC_ACT_UNSPEC;
		if (ct && sy_pure_syn(p))
			sy_tc_count(SY_TC_FLOW_REUSED);
		ext = bpf_map_lookup_elem(&sy_ext4, &sk);
		if (ext && (ext->flags & SY_EXT_F_SRC_RANGES) && !sy_src_allowed4(&sk, p->saddr[0])) {
			sy_tc_count(SY_TC_DROP_SRC_RANGE);
			return TC_ACT_SHOT;
		}
		why = sy_tc_pick(svc, ext, p, &bid, &be);
		if (why) {
			sy_tc_count(why);
			return TC_ACT_SHOT;
		}
		be_addr = be->addr[0];
		be_port = be->port;
		flags = (be->flags & SY_BE_F_LOCAL) ? 0 : SY_CT_F_MASQ;
		if (ext && (ext->flags & SY_EXT_F_LOCAL))
			flags |= SY_CT_F_LOCAL;
		if (p->proto == IPPROTO_TCP)
			flags = sy_tcp_state(flags, p->tcp_flags, 0);

		rk.saddr = be_addr;
		rk.daddr = p->saddr[0];
		rk.sport = be_port;
		rk.dport = p->sport;
		rk.proto = p->proto;
		rk.dir = SY_CT_REV;
		rv.addr = p->daddr[0];
		rv.port = p->dport;
		rv.flags = flags;
		rv.svc_id = svc->svc_id;
		rv.backend_id = bid;
		rv.last_seen_ns = now;
		fv = rv;
		fv.addr = be_addr;
		fv.port = be_port;
		/* Reverse first: a reply must never find a flow it cannot translate. */
		if (bpf_map_update_elem(&sy_ct4, &rk, &rv, BPF_ANY) < 0 ||
		    bpf_map_update_elem(&sy_ct4, &k, &fv, BPF_ANY) < 0)
			sy_tc_count(SY_TC_CT_FULL);
		sy_tc_count(SY_TC_NEW_FLOW);
		svc_id = svc->svc_id;
		be_id = bid;
	}

	if (sy_store_addr4(skb, p->l3_off + SY_IPV4_DADDR_OFF, p->l3_off + SY_IP_CSUM_OFF, csum_off, l4f,
			   p->daddr[0], be_addr) < 0 ||
	    sy_store_port(skb, p->l4_off + 2, csum_off, l4f, p->dport, be_port) < 0)
		return TC_ACT_SHOT;
	if (flags & SY_CT_F_MASQ)
		skb->mark |= sy_cfg_masq_mark;
	sy_count_pkt(svc_id, be_id, skb);
	sy_tc_count(SY_TC_XLATE_FWD);
	return TC_ACT_OK;
}

/* Backend → client becomes frontend → client. */
static __always_inline int sy_rev4(struct __sk_buff *skb, struct sy_pkt *p)
{
	struct sy_ct4_key k = {
		.saddr = p->saddr[0], .daddr = p->daddr[0], .sport = p->sport, .dport = p->dport,
		.proto = p->proto, .dir = SY_CT_REV,
	};
	struct sy_ct4_key fk = {};
	struct sy_ct4_val *rv, *fv, *st;
	__u32 csum_off = sy_l4_csum_off(p);
	__u64 l4f = sy_l4_flags(p);
	__u64 now = bpf_ktime_get_ns();
	__be32 fe_addr;
	__be16 fe_port;

	rv = bpf_map_lookup_elem(&sy_ct4, &k);
	if (!rv)
		return TC_ACT_UNSPEC;
	fe_addr = rv->addr;
	fe_port = rv->port;
	fk.saddr = p->daddr[0];
	fk.daddr = fe_addr;
	fk.sport = p->dport;
	fk.dport = fe_port;
	fk.proto = p->proto;
	fk.dir = SY_CT_FWD;
	fv = bpf_map_lookup_elem(&sy_ct4, &fk);
	/* The forward entry holds the flow's state; without it (evicted), the reverse entry's. */
	st = fv ? fv : rv;
	if (sy_rev_stale(st->flags, st->last_seen_ns, p, now)) {
		bpf_map_delete_elem(&sy_ct4, &k);
		sy_tc_count(SY_TC_REV_STALE);
		return TC_ACT_UNSPEC;
	}
	rv->last_seen_ns = now;
	if (fv) {
		__u16 flags = fv->flags | SY_CT_F_REPLIED;

		sy_count_refused(p, fv->flags, fv->backend_id);

		if (p->proto == IPPROTO_TCP)
			flags = sy_tcp_state(flags, p->tcp_flags, 1);
		fv->flags = flags;
		fv->last_seen_ns = now;
	}
	if (sy_store_addr4(skb, p->l3_off + SY_IPV4_SADDR_OFF, p->l3_off + SY_IP_CSUM_OFF, csum_off, l4f,
			   p->saddr[0], fe_addr) < 0 ||
	    sy_store_port(skb, p->l4_off, csum_off, l4f, p->sport, fe_port) < 0)
		return TC_ACT_SHOT;
	sy_tc_count(SY_TC_XLATE_REV);
	return TC_ACT_OK;
}

/*
 * An ICMPv4 error quotes the packet it is about. On egress the quoted packet
 * went client → backend (the error goes to the client): it must read
 * client → frontend, and the error's source, when it is the backend, becomes
 * the frontend. On ingress the quoted packet went frontend → client (the
 * error goes to the backend): it must read backend → client, and the error's
 * destination, when it is the frontend, becomes the backend.
 *
 * Checksums: the quoted IP header keeps a valid checksum, so its sum inside
 * the ICMP message does not change; the quoted port and the quoted L4
 * checksum do change it, and are applied to the ICMP checksum.
 */
static __always_inline int sy_icmp4(struct __sk_buff *skb, struct sy_pkt *p, int egress)
{
	struct iphdr in;
	__u32 in_off = p->l4_off + 8, in_l4, icmp_csum = p->l4_off + SY_ICMP_CSUM_OFF;
	__be16 ports[2];
	struct sy_ct4_key k = {};
	struct sy_ct4_val *v;
	__be32 old_addr, new_addr;
	__be16 old_port, new_port;
	__u32 addr_off, port_off, csum_field;

	if (bpf_skb_load_bytes(skb, in_off, &in, sizeof(in)) < 0)
		return SY_TC_PASS_TRUNCATED;
	if (in.version != 4 || in.ihl < 5)
		return SY_TC_PASS_MALFORMED;
	if (in.frag_off & bpf_htons(0x1fff))
		return SY_TC_PASS_FRAGMENT;
	if (in.protocol != IPPROTO_TCP && in.protocol != IPPROTO_UDP)
		return SY_TC_PASS_OTHER_L4;
	in_l4 = in_off + in.ihl * 4;
	if (bpf_skb_load_bytes(skb, in_l4, ports, sizeof(ports)) < 0)
		return SY_TC_PASS_TRUNCATED;

	k.saddr = in.daddr;
	k.daddr = in.saddr;
	k.sport = ports[1];
	k.dport = ports[0];
	k.proto = in.protocol;
	k.dir = egress ? SY_CT_REV : SY_CT_FWD;
	v = bpf_map_lookup_elem(&sy_ct4, &k);
	if (!v)
		return SY_PARSED; /* not about a translated flow */

	if (egress) {
		/* quoted: client → backend; destination becomes the frontend */
		old_addr = in.daddr;
		old_port = ports[1];
		addr_off = in_off + SY_IPV4_DADDR_OFF;
		port_off = in_l4 + 2;
	} else {
		/* quoted: frontend → client; source becomes the backend */
		old_addr = in.saddr;
		old_port = ports[0];
		addr_off = in_off + SY_IPV4_SADDR_OFF;
		port_off = in_l4;
	}
	new_addr = v->addr;
	new_port = v->port;

	/* The quoted L4 checksum, when the quote reaches it. */
	csum_field = in_l4 + (in.protocol == IPPROTO_TCP ? SY_TCP_CSUM_OFF : SY_UDP_CSUM_OFF);
	if (csum_field + 2 <= skb->len) {
		__u16 old_csum, new_csum;
		__u32 op = old_port, np = new_port;
		__s64 d;

		if (bpf_skb_load_bytes(skb, csum_field, &old_csum, 2) < 0)
			return SY_TC_PASS_TRUNCATED;
		if (!(in.protocol == IPPROTO_UDP && old_csum == 0)) {
			d = bpf_csum_diff(&old_addr, 4, &new_addr, 4, (__u16)~old_csum);
			d = bpf_csum_diff(&op, 4, &np, 4, d);
			new_csum = ~sy_csum_fold(d);
			if (in.protocol == IPPROTO_UDP && new_csum == 0)
				new_csum = 0xffff;
			if (bpf_l4_csum_replace(skb, icmp_csum, old_csum, new_csum, 2) < 0 ||
			    bpf_skb_store_bytes(skb, csum_field, &new_csum, 2, 0) < 0)
				return SY_TC_PASS_TRUNCATED;
		}
	}
	if (bpf_l4_csum_replace(skb, icmp_csum, old_port, new_port, 2) < 0 ||
	    bpf_skb_store_bytes(skb, port_off, &new_port, 2, 0) < 0)
		return SY_TC_PASS_TRUNCATED;
	if (bpf_l3_csum_replace(skb, in_off + SY_IP_CSUM_OFF, old_addr, new_addr, 4) < 0 ||
	    bpf_skb_store_bytes(skb, addr_off, &new_addr, 4, 0) < 0)
		return SY_TC_PASS_TRUNCATED;

	/* The outer header: the error's source (egress) or destination (ingress). */
	if (egress && p->saddr[0] == old_addr) {
		if (sy_store_addr4(skb, p->l3_off + SY_IPV4_SADDR_OFF, p->l3_off + SY_IP_CSUM_OFF, 0, 0,
				   old_addr, new_addr) < 0)
			return SY_TC_PASS_TRUNCATED;
	} else if (!egress && p->daddr[0] == old_addr) {
		if (sy_store_addr4(skb, p->l3_off + SY_IPV4_DADDR_OFF, p->l3_off + SY_IP_CSUM_OFF, 0, 0,
				   old_addr, new_addr) < 0)
			return SY_TC_PASS_TRUNCATED;
	}
	if (!egress && (v->flags & SY_CT_F_MASQ))
		skb->mark |= sy_cfg_masq_mark;
	sy_tc_count(egress ? SY_TC_ICMP_REV : SY_TC_ICMP_FWD);
	return TC_ACT_OK;
}

/* ------------------------------------------------------------ IPv6 */

static __always_inline int sy_src_allowed6(const struct sy_svc6_key *fe, const __u32 *src)
{
	struct sy_src_range6_key k = {
		.prefixlen = 160 + 128,
		.fe_port = fe->port,
		.proto = fe->proto,
	};

	__builtin_memcpy(k.fe_addr, fe->addr, 16);
	__builtin_memcpy(k.src, src, 16);
	return bpf_map_lookup_elem(&sy_src_range6, &k) != NULL;
}

static __always_inline int sy_fwd6(struct __sk_buff *skb, struct sy_pkt *p)
{
	struct sy_ct6_key k = { .sport = p->sport, .dport = p->dport, .proto = p->proto, .dir = SY_CT_FWD };
	struct sy_ct6_val *ct;
	__u64 now = bpf_ktime_get_ns();
	__u32 be_addr[4];
	__be16 be_port;
	__u16 flags;
	__u32 svc_id, be_id;
	__u32 csum_off = sy_l4_csum_off(p);
	__u64 l4f = sy_l4_flags(p);

	__builtin_memcpy(k.saddr, p->saddr, 16);
	__builtin_memcpy(k.daddr, p->daddr, 16);
	ct = bpf_map_lookup_elem(&sy_ct6, &k);
	if (ct && sy_ct_usable(ct->flags, ct->last_seen_ns, ct->backend_id, ct->addr, ct->port, p, now)) {
		struct sy_ct6_key rk = { .sport = ct->port, .dport = p->sport, .proto = p->proto, .dir = SY_CT_REV };

		__builtin_memcpy(be_addr, ct->addr, 16);
		be_port = ct->port;
		flags = sy_flow_state(ct->flags, p);
		ct->flags = flags;
		ct->last_seen_ns = now;
		svc_id = ct->svc_id;
		be_id = ct->backend_id;
		__builtin_memcpy(rk.saddr, be_addr, 16);
		__builtin_memcpy(rk.daddr, p->saddr, 16);
		if (!sy_ct_closed(flags) && !bpf_map_lookup_elem(&sy_ct6, &rk)) {
			struct sy_ct6_val rv = {
				.port = p->dport, .flags = flags, .svc_id = svc_id, .backend_id = ct->backend_id,
				.last_seen_ns = now,
			};

			__builtin_memcpy(rv.addr, p->daddr, 16);
			if (bpf_map_update_elem(&sy_ct6, &rk, &rv, BPF_NOEXIST) == 0)
				sy_tc_count(SY_TC_CT_REV_REBUILT);
		}
	} else {
		struct sy_svc6_key sk = { .port = p->dport, .proto = p->proto, .scope = SY_SCOPE_EXTERNAL };
		struct sy_ct6_key rk = {};
		struct sy_ct6_val fv = {}, rv = {};
		struct sy_svc_val *svc;
		struct sy_ext_val *ext;
		struct sy_backend *be;
		__u32 bid = 0;
		int why;

		__builtin_memcpy(sk.addr, p->daddr, 16);
		svc = bpf_map_lookup_elem(&sy_svc6, &sk);
		if (!svc || sy_not_ours(skb, p))
			return TC_ACT_UNSPEC;
		if (ct && sy_pure_syn(p))
			sy_tc_count(SY_TC_FLOW_REUSED);
		ext = bpf_map_lookup_elem(&sy_ext6, &sk);
		if (ext && (ext->flags & SY_EXT_F_SRC_RANGES) && !sy_src_allowed6(&sk, p->saddr)) {
			sy_tc_count(SY_TC_DROP_SRC_RANGE);
			return TC_ACT_SHOT;
		}
		why = sy_tc_pick(svc, ext, p, &bid, &be);
		if (why) {
			sy_tc_count(why);
			return TC_ACT_SHOT;
		}
		__builtin_memcpy(be_addr, be->addr, 16);
		be_port = be->port;
		flags = (be->flags & SY_BE_F_LOCAL) ? 0 : SY_CT_F_MASQ;
		if (ext && (ext->flags & SY_EXT_F_LOCAL))
			flags |= SY_CT_F_LOCAL;
		if (p->proto == IPPROTO_TCP)
			flags = sy_tcp_state(flags, p->tcp_flags, 0);

		__builtin_memcpy(rk.saddr, be_addr, 16);
		__builtin_memcpy(rk.daddr, p->saddr, 16);
		rk.sport = be_port;
		rk.dport = p->sport;
		rk.proto = p->proto;
		rk.dir = SY_CT_REV;
		__builtin_memcpy(rv.addr, p->daddr, 16);
		rv.port = p->dport;
		rv.flags = flags;
		rv.svc_id = svc->svc_id;
		rv.backend_id = bid;
		rv.last_seen_ns = now;
		fv = rv;
		__builtin_memcpy(fv.addr, be_addr, 16);
		fv.port = be_port;
		if (bpf_map_update_elem(&sy_ct6, &rk, &rv, BPF_ANY) < 0 ||
		    bpf_map_update_elem(&sy_ct6, &k, &fv, BPF_ANY) < 0)
			sy_tc_count(SY_TC_CT_FULL);
		sy_tc_count(SY_TC_NEW_FLOW);
		svc_id = svc->svc_id;
		be_id = bid;
	}

	if (sy_store_addr6(skb, p->l3_off + SY_IPV6_DADDR_OFF, csum_off, l4f, p->daddr, be_addr) < 0 ||
	    sy_store_port(skb, p->l4_off + 2, csum_off, l4f, p->dport, be_port) < 0)
		return TC_ACT_SHOT;
	if (flags & SY_CT_F_MASQ)
		skb->mark |= sy_cfg_masq_mark;
	sy_count_pkt(svc_id, be_id, skb);
	sy_tc_count(SY_TC_XLATE_FWD);
	return TC_ACT_OK;
}

static __always_inline int sy_rev6(struct __sk_buff *skb, struct sy_pkt *p)
{
	struct sy_ct6_key k = { .sport = p->sport, .dport = p->dport, .proto = p->proto, .dir = SY_CT_REV };
	struct sy_ct6_key fk = {};
	struct sy_ct6_val *rv, *fv, *st;
	__u32 csum_off = sy_l4_csum_off(p);
	__u64 l4f = sy_l4_flags(p);
	__u64 now = bpf_ktime_get_ns();
	__u32 fe_addr[4];
	__be16 fe_port;

	__builtin_memcpy(k.saddr, p->saddr, 16);
	__builtin_memcpy(k.daddr, p->daddr, 16);
	rv = bpf_map_lookup_elem(&sy_ct6, &k);
	if (!rv)
		return TC_ACT_UNSPEC;
	__builtin_memcpy(fe_addr, rv->addr, 16);
	fe_port = rv->port;
	__builtin_memcpy(fk.saddr, p->daddr, 16);
	__builtin_memcpy(fk.daddr, fe_addr, 16);
	fk.sport = p->dport;
	fk.dport = fe_port;
	fk.proto = p->proto;
	fk.dir = SY_CT_FWD;
	fv = bpf_map_lookup_elem(&sy_ct6, &fk);
	st = fv ? fv : rv;
	if (sy_rev_stale(st->flags, st->last_seen_ns, p, now)) {
		bpf_map_delete_elem(&sy_ct6, &k);
		sy_tc_count(SY_TC_REV_STALE);
		return TC_ACT_UNSPEC;
	}
	rv->last_seen_ns = now;
	if (fv) {
		__u16 flags = fv->flags | SY_CT_F_REPLIED;

		sy_count_refused(p, fv->flags, fv->backend_id);

		if (p->proto == IPPROTO_TCP)
			flags = sy_tcp_state(flags, p->tcp_flags, 1);
		fv->flags = flags;
		fv->last_seen_ns = now;
	}
	if (sy_store_addr6(skb, p->l3_off + SY_IPV6_SADDR_OFF, csum_off, l4f, p->saddr, fe_addr) < 0 ||
	    sy_store_port(skb, p->l4_off, csum_off, l4f, p->sport, fe_port) < 0)
		return TC_ACT_SHOT;
	sy_tc_count(SY_TC_XLATE_REV);
	return TC_ACT_OK;
}

/*
 * ICMPv6 errors: as sy_icmp4, but the ICMPv6 checksum covers a pseudo header
 * (the outer addresses) and the quoted IPv6 header has no checksum of its
 * own, so the quoted address change is applied to the ICMPv6 checksum too.
 */
static __always_inline int sy_icmp6(struct __sk_buff *skb, struct sy_pkt *p, int egress)
{
	struct ipv6hdr in;
	__u32 in_off = p->l4_off + 8, in_l4 = in_off + sizeof(struct ipv6hdr);
	__u32 icmp_csum = p->l4_off + SY_ICMP_CSUM_OFF;
	__be16 ports[2];
	struct sy_ct6_key k = {};
	struct sy_ct6_val *v;
	__u32 old_addr[4], new_addr[4];
	__be16 old_port, new_port;
	__u32 addr_off, port_off, csum_field;
	__s64 d;

	if (bpf_skb_load_bytes(skb, in_off, &in, sizeof(in)) < 0)
		return SY_TC_PASS_TRUNCATED;
	if (in.version != 6)
		return SY_TC_PASS_MALFORMED;
	if (in.nexthdr != IPPROTO_TCP && in.nexthdr != IPPROTO_UDP)
		return SY_TC_PASS_IPV6_EXT; /* the quote carries extension headers (or no ports) */
	if (bpf_skb_load_bytes(skb, in_l4, ports, sizeof(ports)) < 0)
		return SY_TC_PASS_TRUNCATED;

	__builtin_memcpy(k.saddr, &in.daddr, 16);
	__builtin_memcpy(k.daddr, &in.saddr, 16);
	k.sport = ports[1];
	k.dport = ports[0];
	k.proto = in.nexthdr;
	k.dir = egress ? SY_CT_REV : SY_CT_FWD;
	v = bpf_map_lookup_elem(&sy_ct6, &k);
	if (!v)
		return SY_PARSED;

	if (egress) {
		__builtin_memcpy(old_addr, &in.daddr, 16);
		old_port = ports[1];
		addr_off = in_off + SY_IPV6_DADDR_OFF;
		port_off = in_l4 + 2;
	} else {
		__builtin_memcpy(old_addr, &in.saddr, 16);
		old_port = ports[0];
		addr_off = in_off + SY_IPV6_SADDR_OFF;
		port_off = in_l4;
	}
	__builtin_memcpy(new_addr, v->addr, 16);
	new_port = v->port;

	csum_field = in_l4 + (in.nexthdr == IPPROTO_TCP ? SY_TCP_CSUM_OFF : SY_UDP_CSUM_OFF);
	if (csum_field + 2 <= skb->len) {
		__u16 old_csum, new_csum;
		__u32 op = old_port, np = new_port;

		if (bpf_skb_load_bytes(skb, csum_field, &old_csum, 2) < 0)
			return SY_TC_PASS_TRUNCATED;
		d = bpf_csum_diff(old_addr, 16, new_addr, 16, (__u16)~old_csum);
		d = bpf_csum_diff(&op, 4, &np, 4, d);
		new_csum = ~sy_csum_fold(d);
		if (in.nexthdr == IPPROTO_UDP && new_csum == 0)
			new_csum = 0xffff;
		if (bpf_l4_csum_replace(skb, icmp_csum, old_csum, new_csum, 2) < 0 ||
		    bpf_skb_store_bytes(skb, csum_field, &new_csum, 2, 0) < 0)
			return SY_TC_PASS_TRUNCATED;
	}
	if (bpf_l4_csum_replace(skb, icmp_csum, old_port, new_port, 2) < 0 ||
	    bpf_skb_store_bytes(skb, port_off, &new_port, 2, 0) < 0)
		return SY_TC_PASS_TRUNCATED;
	/* The quoted address is plain data to the ICMPv6 checksum. */
	d = bpf_csum_diff(old_addr, 16, new_addr, 16, 0);
	if (bpf_l4_csum_replace(skb, icmp_csum, 0, d, 0) < 0 ||
	    bpf_skb_store_bytes(skb, addr_off, new_addr, 16, 0) < 0)
		return SY_TC_PASS_TRUNCATED;

	if (egress && p->saddr[0] == old_addr[0] && p->saddr[1] == old_addr[1] &&
	    p->saddr[2] == old_addr[2] && p->saddr[3] == old_addr[3]) {
		if (sy_store_addr6(skb, p->l3_off + SY_IPV6_SADDR_OFF, icmp_csum, 0, old_addr, new_addr) < 0)
			return SY_TC_PASS_TRUNCATED;
	} else if (!egress && p->daddr[0] == old_addr[0] && p->daddr[1] == old_addr[1] &&
		   p->daddr[2] == old_addr[2] && p->daddr[3] == old_addr[3]) {
		if (sy_store_addr6(skb, p->l3_off + SY_IPV6_DADDR_OFF, icmp_csum, 0, old_addr, new_addr) < 0)
			return SY_TC_PASS_TRUNCATED;
	}
	if (!egress && (v->flags & SY_CT_F_MASQ))
		skb->mark |= sy_cfg_masq_mark;
	sy_tc_count(egress ? SY_TC_ICMP_REV : SY_TC_ICMP_FWD);
	return TC_ACT_OK;
}

/* ------------------------------------------------------------ hooks */

static __always_inline int sy_icmp(struct __sk_buff *skb, struct sy_pkt *p, int egress)
{
	int r = p->family == 4 ? sy_icmp4(skb, p, egress) : sy_icmp6(skb, p, egress);

	if (r == SY_PARSED)
		return TC_ACT_UNSPEC;
	if (r == TC_ACT_OK)
		return TC_ACT_OK;
	/* A quote we cannot read: leave the error alone, never half-translated. */
	sy_tc_count(r);
	return TC_ACT_UNSPEC;
}

static __always_inline int sy_tc_handle(struct __sk_buff *skb, int egress)
{
	struct sy_pkt p = {};
	int r = sy_parse(skb, &p);

	if (r != SY_PARSED) {
		sy_tc_count(r);
		return TC_ACT_UNSPEC;
	}
	if (p.proto == IPPROTO_TCP || p.proto == IPPROTO_UDP) {
		if (p.family == 4)
			return egress ? sy_rev4(skb, &p) : sy_fwd4(skb, &p);
		return egress ? sy_rev6(skb, &p) : sy_fwd6(skb, &p);
	}
	if (sy_is_icmp_error(&p))
		return sy_icmp(skb, &p, egress);
	/* Echo, neighbour discovery and the like: not ours, and not worth a counter. */
	return TC_ACT_UNSPEC;
}

SEC("tc")
int sy_tc_ingress(struct __sk_buff *skb) { return sy_tc_handle(skb, 0); }

SEC("tc")
int sy_tc_egress(struct __sk_buff *skb) { return sy_tc_handle(skb, 1); }

char LICENSE[] SEC("license") = "Dual BSD/GPL";
