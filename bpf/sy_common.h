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

/* Value of sy_svc4 / sy_svc6. 16 bytes. */
struct sy_svc_val {
	__u32 svc_id;           /* index into sy_maglev and sy_svc_stats */
	__u16 backend_count;    /* usable backends; 0 = refuse */
	__u16 flags;            /* SY_SVC_F_* */
	__u32 affinity_timeout; /* seconds; used when SY_SVC_F_AFFINITY */
	__u32 pad;
};

/*
 * A Maglev table is an array of M + 1 u32: slot 0 holds M, slots 1..M hold
 * backend ids. Keeping M inside the table makes a table swap atomic even when
 * the new table has another size than the old one.
 */
#define SY_MAGLEV_SIZE_SLOT 0

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
	__u64 translations; /* connects/sendmsgs sent to a backend */
	__u64 refused;      /* refused with ECONNREFUSED (no backend) */
};

#endif /* SY_COMMON_H */
