/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Packet parsing for the tc path: Ethernet, IPv4 (options walked), IPv6
 * (hop-by-hop and destination options walked), TCP, UDP and ICMP errors.
 * What cannot be parsed returns the sy_tc_counter to bump; SY_PARSED means
 * the packet is described in struct sy_pkt.
 */
#ifndef SY_LIB_PKT_H
#define SY_LIB_PKT_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../sy_common.h"
#include "../tc_maps.h"

#define SY_ETH_HLEN 14
#define SY_IP_CSUM_OFF 10
#define SY_IPV4_SADDR_OFF 12
#define SY_IPV4_DADDR_OFF 16
#define SY_IPV6_SADDR_OFF 8
#define SY_IPV6_DADDR_OFF 24
#define SY_TCP_CSUM_OFF 16
#define SY_UDP_CSUM_OFF 6
#define SY_ICMP_CSUM_OFF 2

#define SY_TCP_FIN 0x01
#define SY_TCP_SYN 0x02
#define SY_TCP_RST 0x04
#define SY_TCP_ACK 0x10

#define SY_IPPROTO_ICMPV6 58
#define SY_NEXTHDR_HOP 0
#define SY_NEXTHDR_ROUTING 43
#define SY_NEXTHDR_FRAGMENT 44
#define SY_NEXTHDR_DEST 60
#define SY_IPV6_MAX_EXT 4

#define SY_PARSED (-1)

/* One parsed packet: addresses in network order (IPv4 in word 0). */
struct sy_pkt {
	__u32 saddr[4];
	__u32 daddr[4];
	__be16 sport;
	__be16 dport;
	__u8 family;    /* 4 or 6 */
	__u8 proto;     /* TCP, UDP, ICMP or ICMPv6 */
	__u8 tcp_flags;
	__u8 icmp_type;
	__u32 l3_off;
	__u32 l4_off;
};


static __always_inline int sy_parse_l4(struct __sk_buff *skb, struct sy_pkt *p)
{
	if (p->proto == IPPROTO_TCP) {
		__u8 th[14];

		if (bpf_skb_load_bytes(skb, p->l4_off, th, sizeof(th)) < 0)
			return SY_TC_PASS_TRUNCATED;
		if ((th[12] >> 4) < 5)
			return SY_TC_PASS_MALFORMED;
		__builtin_memcpy(&p->sport, &th[0], 2);
		__builtin_memcpy(&p->dport, &th[2], 2);
		p->tcp_flags = th[13];
		return SY_PARSED;
	}
	if (p->proto == IPPROTO_UDP) {
		__be16 ports[2];

		/* The whole 8-byte header must be there, not only the ports. */
		if (bpf_skb_load_bytes(skb, p->l4_off, ports, sizeof(ports)) < 0 ||
		    p->l4_off + 8 > skb->len)
			return SY_TC_PASS_TRUNCATED;
		p->sport = ports[0];
		p->dport = ports[1];
		return SY_PARSED;
	}
	if ((p->family == 4 && p->proto == IPPROTO_ICMP) ||
	    (p->family == 6 && p->proto == SY_IPPROTO_ICMPV6)) {
		__u8 type;

		if (bpf_skb_load_bytes(skb, p->l4_off, &type, 1) < 0)
			return SY_TC_PASS_TRUNCATED;
		p->icmp_type = type;
		return SY_PARSED;
	}
	return SY_TC_PASS_OTHER_L4;
}

static __always_inline int sy_parse4(struct __sk_buff *skb, struct sy_pkt *p)
{
	struct iphdr ip;
	__u32 hlen;

	if (bpf_skb_load_bytes(skb, p->l3_off, &ip, sizeof(ip)) < 0)
		return SY_TC_PASS_TRUNCATED;
	if (ip.version != 4 || ip.ihl < 5)
		return SY_TC_PASS_MALFORMED;
	hlen = ip.ihl * 4;
	if (bpf_ntohs(ip.tot_len) < hlen || p->l3_off + bpf_ntohs(ip.tot_len) > skb->len)
		return SY_TC_PASS_TRUNCATED;
	/* MF set or a non-zero offset: ports are in the first fragment only. */
	if (ip.frag_off & bpf_htons(0x3fff))
		return SY_TC_PASS_FRAGMENT;
	if (hlen > sizeof(ip))
		sy_tc_count(SY_TC_IP_OPTIONS);
	p->family = 4;
	p->proto = ip.protocol;
	p->saddr[0] = ip.saddr;
	p->daddr[0] = ip.daddr;
	p->l4_off = p->l3_off + hlen;
	return sy_parse_l4(skb, p);
}

static __always_inline int sy_parse6(struct __sk_buff *skb, struct sy_pkt *p)
{
	struct ipv6hdr ip6;
	__u32 off;
	__u8 nexthdr;

	if (bpf_skb_load_bytes(skb, p->l3_off, &ip6, sizeof(ip6)) < 0)
		return SY_TC_PASS_TRUNCATED;
	if (ip6.version != 6)
		return SY_TC_PASS_MALFORMED;
	if (p->l3_off + sizeof(ip6) + bpf_ntohs(ip6.payload_len) > skb->len)
		return SY_TC_PASS_TRUNCATED;
	off = p->l3_off + sizeof(ip6);
	nexthdr = ip6.nexthdr;
	/*
	 * Hop-by-hop and destination options do not change where the packet
	 * goes or what its pseudo header holds: skip them. A routing header
	 * would (the destination is not final), fragments have no ports in
	 * general, AH would break: those are passed.
	 */
#pragma unroll
	for (int i = 0; i < SY_IPV6_MAX_EXT; i++) {
		__u8 ext[2];

		if (nexthdr != SY_NEXTHDR_HOP && nexthdr != SY_NEXTHDR_DEST)
			break;
		if (bpf_skb_load_bytes(skb, off, ext, sizeof(ext)) < 0)
			return SY_TC_PASS_TRUNCATED;
		nexthdr = ext[0];
		off += (ext[1] + 1) * 8;
	}
	if (nexthdr == SY_NEXTHDR_FRAGMENT)
		return SY_TC_PASS_FRAGMENT;
	if (nexthdr == SY_NEXTHDR_HOP || nexthdr == SY_NEXTHDR_DEST || nexthdr == SY_NEXTHDR_ROUTING ||
	    nexthdr == IPPROTO_AH || nexthdr == IPPROTO_ESP)
		return SY_TC_PASS_IPV6_EXT;
	p->family = 6;
	p->proto = nexthdr;
	__builtin_memcpy(p->saddr, &ip6.saddr, 16);
	__builtin_memcpy(p->daddr, &ip6.daddr, 16);
	p->l4_off = off;
	return sy_parse_l4(skb, p);
}

static __always_inline int sy_parse(struct __sk_buff *skb, struct sy_pkt *p)
{
	__be16 proto;

	if (bpf_skb_load_bytes(skb, 12, &proto, sizeof(proto)) < 0)
		return SY_TC_PASS_TRUNCATED;
	p->l3_off = SY_ETH_HLEN;
	if (proto == bpf_htons(ETH_P_IP))
		return sy_parse4(skb, p);
	if (proto == bpf_htons(ETH_P_IPV6))
		return sy_parse6(skb, p);
	return SY_TC_PASS_NON_IP;
}

static __always_inline int sy_is_icmp_error(const struct sy_pkt *p)
{
	if (p->family == 4)
		return p->proto == IPPROTO_ICMP &&
		       (p->icmp_type == 3 /* unreachable */ || p->icmp_type == 11 /* time exceeded */ ||
			p->icmp_type == 12 /* parameter problem */);
	return p->proto == SY_IPPROTO_ICMPV6 && p->icmp_type >= 1 && p->icmp_type <= 4;
}

#endif
