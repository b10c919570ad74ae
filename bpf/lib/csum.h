/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Incremental checksum updates for rewritten addresses and ports (IPv4
 * header, TCP/UDP pseudo header, UDP's "zero means none").
 */
#ifndef SY_LIB_CSUM_H
#define SY_LIB_CSUM_H

#include "pkt.h"

static __always_inline __u16 sy_csum_fold(__s64 c)
{
	__u32 s = (__u32)c;

	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)s;
}

/* Rewrites 4 bytes of IPv4 address, fixing the IP header checksum and, when
 * l4_csum_off is non-zero, the L4 checksum (the address is in its pseudo header). */
static __always_inline int sy_store_addr4(struct __sk_buff *skb, __u32 off, __u32 ip_csum_off,
					  __u32 l4_csum_off, __u64 l4_flags, __be32 old, __be32 new)
{
	if (l4_csum_off &&
	    bpf_l4_csum_replace(skb, l4_csum_off, old, new, BPF_F_PSEUDO_HDR | sizeof(new) | l4_flags) < 0)
		return -1;
	if (bpf_l3_csum_replace(skb, ip_csum_off, old, new, sizeof(new)) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, off, &new, sizeof(new), 0);
}

/* IPv6 addresses are only covered by the L4 checksum (pseudo header). */
static __always_inline int sy_store_addr6(struct __sk_buff *skb, __u32 off, __u32 l4_csum_off,
					  __u64 l4_flags, __u32 *old, __u32 *new)
{
	__s64 diff = bpf_csum_diff(old, 16, new, 16, 0);

	if (bpf_l4_csum_replace(skb, l4_csum_off, 0, diff, BPF_F_PSEUDO_HDR | l4_flags) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, off, new, 16, 0);
}

static __always_inline int sy_store_port(struct __sk_buff *skb, __u32 off, __u32 l4_csum_off,
					 __u64 l4_flags, __be16 old, __be16 new)
{
	if (bpf_l4_csum_replace(skb, l4_csum_off, old, new, sizeof(new) | l4_flags) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, off, &new, sizeof(new), 0);
}

static __always_inline __u32 sy_l4_csum_off(const struct sy_pkt *p)
{
	return p->l4_off + (p->proto == IPPROTO_TCP ? SY_TCP_CSUM_OFF : SY_UDP_CSUM_OFF);
}

/*
 * UDP: a computed checksum of 0 must be sent as 0xffff (0 means "no checksum",
 * which IPv6 does not allow at all), and an IPv4 datagram sent without one
 * (0) keeps 0. BPF_F_MARK_MANGLED_0 does both, for either family.
 */
static __always_inline __u64 sy_l4_flags(const struct sy_pkt *p)
{
	return p->proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
}

#endif
