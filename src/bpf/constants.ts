/** UAPI numbers used by switchyard (include/uapi/linux/bpf.h). */

export const BPF_ANY = 0;
export const BPF_NOEXIST = 1;
export const BPF_EXIST = 2;

export const MapType = {
  HASH: 1,
  ARRAY: 2,
  PERCPU_HASH: 5,
  PERCPU_ARRAY: 6,
  LRU_HASH: 9,
  LRU_PERCPU_HASH: 10,
  LPM_TRIE: 11,
  ARRAY_OF_MAPS: 12,
  HASH_OF_MAPS: 13,
  SK_STORAGE: 24,
} as const;

export const BPF_F_NO_PREALLOC = 1 << 0;
export const BPF_F_MMAPABLE = 1 << 10;
export const BPF_F_INNER_MAP = 1 << 12;

export const AttachType = {
  CGROUP_INET4_CONNECT: 10,
  CGROUP_INET6_CONNECT: 11,
  CGROUP_UDP4_SENDMSG: 14,
  CGROUP_UDP6_SENDMSG: 15,
  CGROUP_UDP4_RECVMSG: 19,
  CGROUP_UDP6_RECVMSG: 20,
  CGROUP_INET4_GETPEERNAME: 29,
  CGROUP_INET6_GETPEERNAME: 30,
  TCX_INGRESS: 46,
  TCX_EGRESS: 47,
} as const;

export const LinkType = { CGROUP: 3, TCX: 11 } as const;

export function attachTypeName(t: number): string {
  for (const [k, v] of Object.entries(AttachType)) if (v === t) return k.toLowerCase();
  return `attach_type_${t}`;
}

export function mapTypeName(t: number): string {
  for (const [k, v] of Object.entries(MapType)) if (v === t) return k.toLowerCase();
  return `map_type_${t}`;
}
