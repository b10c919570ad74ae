/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Layouts shared by every switchyard BPF program and mirrored, field by field,
 * in src/dataplane/layout.ts. A test compares the two against this object's BTF,
 * and the agent refuses to start on a mismatch. Padding is explicit so that
 * user space and the kernel agree on every byte (hash keys are compared raw).
 */
#ifndef SY_COMMON_H
#define SY_COMMON_H

#include <linux/types.h>

#define SY_SCOPE_EXTERNAL 0 /* traffic arriving on a node device (tc path) */
#define SY_SCOPE_INTERNAL 1 /* in-cluster clients (socket hooks) */

/* sy_svc_val.flags */
#define SY_SVC_F_AFFINITY  (1 << 0) /* sessionAffinity: ClientIP */
#define SY_SVC_F_NODEPORT  (1 << 1)
#define SY_SVC_F_EXTERNAL  (1 << 2) /* LoadBalancer ingress or externalIP */

/* sy_backend.flags */
#define SY_BE_F_LOCAL       (1 << 0) /* runs on this node */
#define SY_BE_F_TERMINATING (1 << 1) /* serving but terminating (fallback set) */

/* Feature switches, set through sy_cfg_features before load. */
#define SY_FEAT_V4_IN_V6 (1 << 0) /* translate ::ffff:a.b.c.d on AF_INET6 sockets */

/* Drop / refusal reasons: index into sy_drops. */
enum sy_drop_reason {
	SY_DROP_NO_BACKEND = 0,     /* service has no usable backend: ECONNREFUSED */
	SY_DROP_NO_MAGLEV = 1,      /* service entry without a Maglev table (transient) */
	SY_DROP_BACKEND_MISSING = 2,/* table slot names a backend id not in sy_backend */
	SY_DROP_REVNAT_UPDATE = 3,  /* could not record the reverse translation */
	SY_DROP_FAMILY = 4,         /* backend of the wrong address family */
	SY_DROP__MAX = 8,
};

/* sy_svc4: frontend address → service entry. 8 bytes. */
struct sy_svc4_key {
	__be32 addr;  /* frontend IPv4 address */
	__be16 port;  /* frontend port */
	__u8 proto;   /* IPPROTO_TCP / IPPROTO_UDP */
	__u8 scope;   /* SY_SCOPE_* */
};

/* sy_svc6: IPv6 twin of sy_svc4_key. 20 bytes. */
struct sy_svc6_key {
	__u32 addr[4]; /* frontend IPv6 address, network order */
	__be16 port;
	__u8 proto;
	__u8 scope;
};

/*
 * Value of sy_svc4 / sy_svc6. 24 bytes. The entry names its Maglev table:
 * M slots starting at slot table_off of the shared table pool (sy_mg_pool).
 * Offset and size travel in one hash-map value, which the kernel replaces as
 * a whole, so a reader never pairs a new offset with an old size; a new
 * table is written into free pool slots before the entry that names it.
 */
struct sy_svc_val {
	__u32 svc_id;           /* index into sy_svc_stats; key of sy_affinity */
	__u16 backend_count;    /* usable backends; 0 = refuse */
	__u16 flags;            /* SY_SVC_F_* */
#ifdef SY_LAYOUT_NEXT
	__u32 next_epoch;       /* test build only: moves every member below (docs/operations.md, Upgrading) */
#endif
	__u32 affinity_timeout; /* seconds; used when SY_SVC_F_AFFINITY */
	__u32 table_m;          /* Maglev table size M; 0 = no table */
	__u32 table_off;        /* first slot of the table in the pool */
	__u32 pad;
};

/*
 * The Maglev table pool: one BPF_F_MMAPABLE array whose elements are chunks
 * of SY_MG_CHUNK backend ids; slot s lives in element s / SY_MG_CHUNK at
 * index s % SY_MG_CHUNK. Every table is a run of M consecutive slots.
 */
#define SY_MG_CHUNK 16
struct sy_mg_chunk {
	__u32 ids[SY_MG_CHUNK];
};

/* sy_backend: backend id → where to send. 24 bytes. */
struct sy_backend {
	__u32 addr[4]; /* network order; IPv4 in addr[0], rest zero */
	__be16 port;
	__u8 proto;
	__u8 family;   /* 4 or 6 */
	__u16 flags;   /* SY_BE_F_* */
	__u16 pad;
};

/* sy_sock_revnat4: {socket, backend} → the frontend the application dialled. 16 bytes. */
struct sy_sock_revnat4_key {
	__u64 cookie; /* bpf_get_socket_cookie() */
	__be32 addr;  /* backend address */
	__be16 port;  /* backend port */
	__u16 pad;
};

/* 12 bytes. */
struct sy_sock_revnat4_val {
	__be32 addr;  /* frontend address */
	__be16 port;  /* frontend port */
	__u16 pad;
	__u32 svc_id;
};

/* 32 bytes. */
struct sy_sock_revnat6_key {
	__u64 cookie;
	__u32 addr[4];
	__be16 port;
	__u16 pad;
	__u32 pad2;
};

/* 24 bytes. */
struct sy_sock_revnat6_val {
	__u32 addr[4];
	__be16 port;
	__u16 pad;
	__u32 svc_id;
};

/*
 * sy_tcp_peer: kept with a TCP socket the hooks translated (socket local
 * storage): the backend it was sent to and the frontend it dialled, for
 * getpeername. 40 bytes. IPv4 addresses in addr[0], the rest zero.
 */
struct sy_tcp_peer {
	__u32 be_addr[4]; /* backend: the socket's real peer */
	__u32 fe_addr[4]; /* frontend: what getpeername shows */
	__be16 be_port;
	__be16 fe_port;
	__u32 svc_id;
};

/* sy_affinity: {client netns, service} → the backend it stuck to. 16 bytes. */
struct sy_affinity_key {
	__u64 client; /* bpf_get_netns_cookie(): one client = one network namespace */
	__u32 svc_id;
	__u32 pad;
};

/* 16 bytes. */
struct sy_affinity_val {
	__u64 last_used_ns; /* bpf_ktime_get_ns() of the last connection */
	__u32 backend_id;
	__u32 pad;
};

/* sy_svc_stats: per-CPU counters per service id. 16 bytes. */
struct sy_svc_stats {
	__u64 translations; /* connects/sendmsgs/new external flows sent to a backend */
	__u64 refused;      /* refused with ECONNREFUSED / dropped for want of a backend */
	__u64 packets;      /* tc path: client → backend packets translated */
	__u64 bytes;        /* tc path: their bytes (skb->len) */
};

/*
 * sy_be_stats: per-CPU counters per backend id. The agent creates an entry
 * (zeroed) with each backend and deletes it with the backend; the programs
 * only look up and add. 32 bytes.
 */
struct sy_be_stats {
	__u64 connections; /* connects/sendmsgs/new external flows sent to this backend */
	__u64 refused;     /* tc path: new TCP flows the backend answered with a reset */
	__u64 packets;     /* tc path: client → backend packets translated */
	__u64 bytes;       /* tc path: their bytes (skb->len) */
};

/* ------------------------------------------------------------------ tc path */

/* sy_ext4 / sy_ext6 value flags: what the tc path needs beyond sy_svc_val. */
#define SY_EXT_F_LOCAL      (1 << 0) /* externalTrafficPolicy: Local (no backend → drop) */
#define SY_EXT_F_SRC_RANGES (1 << 1) /* loadBalancerSourceRanges: consult sy_src_range4/6 */

/* Value of sy_ext4 / sy_ext6 (key: the frontend's sy_svc4_key / sy_svc6_key, scope external). 8 bytes. */
struct sy_ext_val {
	__u16 flags; /* SY_EXT_F_* */
	__u16 pad;
	__u32 pad2;
};

/*
 * sy_src_range4: LPM trie over {frontend, source prefix}. The frontend part is
 * always matched in full (prefixlen = 64 + source prefix length), so one trie
 * serves every Service. 16 bytes.
 */
struct sy_src_range4_key {
	__u32 prefixlen; /* 64 + source prefix length */
	__be32 fe_addr;  /* frontend (LoadBalancer ingress IP) */
	__be16 fe_port;
	__u8 proto;
	__u8 pad;
	__be32 src;      /* source prefix */
};

/* IPv6 twin: prefixlen = 160 + source prefix length. 40 bytes. */
struct sy_src_range6_key {
	__u32 prefixlen;
	__u32 fe_addr[4];
	__be16 fe_port;
	__u8 proto;
	__u8 pad;
	__u32 src[4];
};

/*
 * Per-flow state of the tc path (sy_ct4 / sy_ct6, LRU). Every translated flow
 * has two entries:
 *   SY_CT_FWD  {client → frontend}  as seen on ingress → backend, state, timers
 *   SY_CT_REV  {backend → client}   as seen on egress  → the frontend to restore
 * The forward entry is authoritative for the flow's state; the reverse one
 * only says how to translate a reply back (and leads to the forward entry).
 */
#define SY_CT_FWD 0
#define SY_CT_REV 1

/* sy_ct_val.flags */
#define SY_CT_F_MASQ    (1 << 0) /* backend on another node: the masquerade mark is set */
#define SY_CT_F_REPLIED (1 << 1) /* a reply was seen (TCP: past the handshake) */
#define SY_CT_F_FIN_FWD (1 << 2) /* FIN from the client */
#define SY_CT_F_FIN_REV (1 << 3) /* FIN from the backend */
#define SY_CT_F_RST     (1 << 4) /* RST either way */
#define SY_CT_F_LOCAL   (1 << 5) /* externalTrafficPolicy: Local */

/* 16 bytes. */
struct sy_ct4_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 dir; /* SY_CT_FWD / SY_CT_REV */
	__u16 pad;
};

/* 24 bytes. */
struct sy_ct4_val {
#ifdef SY_LAYOUT_NEXT
	__u64 next_created_ns;  /* test build only: moves every member (docs/operations.md, Upgrading) */
#endif
	__be32 addr;        /* FWD: backend address; REV: frontend address */
	__be16 port;        /* FWD: backend port; REV: frontend port */
	__u16 flags;        /* SY_CT_F_* */
	__u32 svc_id;
	__u32 backend_id;
	__u64 last_seen_ns; /* bpf_ktime_get_ns() of the last packet */
};

/* 40 bytes. */
struct sy_ct6_key {
	__u32 saddr[4];
	__u32 daddr[4];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 dir;
	__u16 pad;
};

/* 40 bytes. */
struct sy_ct6_val {
#ifdef SY_LAYOUT_NEXT
	__u64 next_created_ns;
#endif
	__u32 addr[4];
	__be16 port;
	__u16 flags;
	__u32 svc_id;
	__u32 backend_id;
	__u32 pad;
	__u64 last_seen_ns;
};

/* Counters of the tc path: index into sy_tc_stats. */
enum sy_tc_counter {
	SY_TC_NEW_FLOW = 0,         /* a flow got a backend */
	SY_TC_XLATE_FWD = 1,        /* packets translated client → backend */
	SY_TC_XLATE_REV = 2,        /* replies translated backend → client */
	SY_TC_ICMP_FWD = 3,         /* ICMP errors towards a backend translated */
	SY_TC_ICMP_REV = 4,         /* ICMP errors towards a client translated */
	SY_TC_PASS_NON_IP = 5,      /* not IPv4/IPv6 (ARP, VLAN tag in the frame, …) */
	SY_TC_PASS_TRUNCATED = 6,   /* headers shorter than they claim */
	SY_TC_PASS_FRAGMENT = 7,    /* IPv4/IPv6 fragments: no ports to look at */
	SY_TC_PASS_IPV6_EXT = 8,    /* IPv6 extension headers not walked (routing, AH, ESP, too many) */
	SY_TC_PASS_OTHER_L4 = 9,    /* neither TCP, UDP nor an ICMP error */
	SY_TC_IP_OPTIONS = 10,      /* IPv4 with options: handled, counted for the record */
	SY_TC_DROP_NO_BACKEND = 11, /* Cluster policy, no endpoint at all */
	SY_TC_DROP_NO_LOCAL = 12,   /* Local policy, no endpoint on this node */
	SY_TC_DROP_SRC_RANGE = 13,  /* source outside loadBalancerSourceRanges */
	SY_TC_DROP_NO_TABLE = 14,   /* service entry without table / backend (transient) */
	SY_TC_DROP_FAMILY = 15,     /* backend of the other address family */
	SY_TC_CT_FULL = 16,         /* flow state could not be stored (translated anyway) */
	SY_TC_PASS_MALFORMED = 17,  /* header fields that make no sense (IHL < 5, TCP doff < 5) */
	SY_TC_PASS_LOCAL_SOCKET = 18, /* no flow, but a node's own socket owns the tuple: passed */
	SY_TC_CT_REV_REBUILT = 19,  /* an evicted reverse entry rebuilt from its forward entry */
	SY_TC_PASS_CONNTRACK = 20,  /* no flow, and the kernel's conntrack holds the tuple as a reply: passed */
	SY_TC_PASS_NO_START = 21,   /* no flow, and a TCP SYN-ACK or RST cannot start one: passed */
	SY_TC_FLOW_REUSED = 22,     /* a SYN reused the ports of a closed or answered flow: a new connection */
	SY_TC_FLOW_ADOPTED = 23,    /* a TCP flow picked up mid-stream (evicted entry, flow moved from a node) */
	SY_TC_REV_STALE = 24,       /* a reply matched a closed or expired flow: entry dropped, passed */
	SY_TC__MAX = 32,
};

#endif /* SY_COMMON_H */
