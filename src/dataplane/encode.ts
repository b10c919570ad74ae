/**
 * What a model frontend or backend becomes in the maps: the reconciler's keys
 * (frontend key, Maglev identity, table signature) and the map values. Pure
 * functions; the planner, the reconciler, adoption and drift all use these.
 */
import type { Backend, Frontend } from '../model/types.js';
import {
  BE_F_LOCAL, BE_F_TERMINATING, IPPROTO, SCOPE_EXTERNAL, SCOPE_INTERNAL, SVC_F_AFFINITY, SVC_F_EXTERNAL, SVC_F_NODEPORT,
  svc4KeyCodec, svc6KeyCodec, type BackendVal, type SvcVal,
} from './layout.js';

export const SCOPE_NUM = { internal: SCOPE_INTERNAL, external: SCOPE_EXTERNAL } as const;

/** The reconciler's key of a frontend: family|addr|port|proto|scope (the service map's key, as text). */
export function frontendKeyString(family: 4 | 6, addr: string, port: number, proto: number, scope: number): string {
  return `${family}|${addr}|${port}|${proto}|${scope}`;
}

export function frontendKeyOf(fe: Frontend): string {
  return frontendKeyString(fe.family, fe.addr, fe.port, IPPROTO[fe.protocol], SCOPE_NUM[fe.scope]);
}

/** A frontend key as an operator reads it: "10.96.0.1:53/UDP internal". */
export function readableKey(feKey: string): string {
  const [, addr, port, proto, scope] = feKey.split('|');
  const p = proto === '6' ? 'TCP' : proto === '17' ? 'UDP' : proto;
  return `${addr.includes(':') ? `[${addr}]` : addr}:${port}/${p} ${Number(scope) === SCOPE_INTERNAL ? 'internal' : 'external'}`;
}

/** Identity that decides a backend's Maglev permutation: the same on every node. */
export function maglevKey(b: { addr: string; port: number; protocol?: string; proto?: number }): string {
  const proto = b.protocol ? IPPROTO[b.protocol as keyof typeof IPPROTO] : b.proto;
  // join, not a template: the result is one flat string; a template's is a tree of concatenations
  // (four heap objects), and one is kept per backend (100,000 at 10,000 Services).
  return [b.addr, b.port, proto].join('|');
}

/** The service map's key of a frontend, encoded. */
export function svcKeyBuf(fe: Frontend): Buffer {
  const k = { addr: fe.addr, port: fe.port, proto: IPPROTO[fe.protocol], scope: SCOPE_NUM[fe.scope] };
  return fe.family === 4 ? svc4KeyCodec.encode(k) : svc6KeyCodec.encode(k);
}

/** The backends a frontend's table is built from: its family, weight above 0. */
export function tableBackends(fe: Frontend): Backend[] {
  return fe.backends.filter((b) => b.family === fe.family && b.weight > 0);
}

/**
 * What decides a table's content: M and each backend's identity, weight and id. Tables with the
 * same signature are equal slot for slot (Maglev is a pure function of these), so they are shared.
 * A backend id stands for its identity: ids only grow (ids.ts), so one id never names two
 * backends, and the signature holds ids and weights alone (~70 characters for 10 backends,
 * where the addresses made ~300 per table).
 */
export function tableSignature(m: number, backends: readonly Backend[], ids: readonly number[]): string {
  if (m === 0) return 'empty';
  const order = ids.map((_, i) => i).sort((a, b) => ids[a] - ids[b]);
  return [m, order.map((i) => (backends[i].weight === 1 ? String(ids[i]) : [ids[i], backends[i].weight].join('*'))).join(',')].join(':');
}

export function backendVal(b: Backend): BackendVal {
  return {
    addr: b.addr,
    port: b.port,
    proto: IPPROTO[b.protocol],
    family: b.family,
    flags: (b.local ? BE_F_LOCAL : 0) | (b.terminating ? BE_F_TERMINATING : 0),
  };
}

export function svcVal(fe: Frontend, svcId: number, backendCount: number, table?: { off: number; m: number }): SvcVal {
  return {
    svcId,
    tableM: table?.m ?? 0,
    tableOff: table?.off ?? 0,
    backendCount: Math.min(backendCount, 0xffff),
    flags:
      (fe.affinityTimeoutSec > 0 ? SVC_F_AFFINITY : 0) |
      (fe.type === 'NodePort' ? SVC_F_NODEPORT : 0) |
      (fe.type === 'LoadBalancer' || fe.type === 'ExternalIP' ? SVC_F_EXTERNAL : 0),
    affinityTimeout: fe.affinityTimeoutSec,
  };
}
