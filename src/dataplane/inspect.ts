/**
 * Decoded views of what the kernel's maps hold (not of what the control plane
 * believes): each entry read back from the maps, explained with the
 * reconciler's metadata where it has some.
 */
import { servicePortKey } from '../model/types.js';
import type { SocketLbDatapath } from './datapath.js';
import type { Reconciler } from './reconciler.js';
import { BE_F_LOCAL, BE_F_TERMINATING, SCOPE_INTERNAL, SVC_F_AFFINITY, protoName, svc4KeyCodec, svc6KeyCodec, svcValCodec } from './layout.js';

export interface ServiceEntry {
  service: string;
  type: string;
  address: string;
  port: number;
  protocol: string;
  scope: 'internal' | 'external';
  svcId: number;
  backendCount: number;
  flags: number;
  affinityTimeoutSec: number;
  maglevSize: number;
  backends: { id: number; address: string; port: number; slots: number }[];
  counters: { translations: number; refused: number };
}

export function dumpServices(dp: SocketLbDatapath, rec: Reconciler): ServiceEntry[] {
  const meta = rec.frontendMeta();
  const backends = new Map(dp.backends.entries());
  const out: ServiceEntry[] = [];
  for (const family of [4, 6] as const) {
    const map = family === 4 ? dp.svc4 : dp.svc6;
    const codec = family === 4 ? svc4KeyCodec : svc6KeyCodec;
    for (const { key, value } of map.dumpRaw()) {
      const k = codec.decode(key);
      const v = svcValCodec.decode(value);
      const m = meta.get(v.svcId);
      const slots = new Map<number, number>();
      let maglevSize = 0;
      const table = dp.openMaglevTable(v.svcId);
      if (table) {
        try {
          const t = dp.readMaglevTable(table);
          maglevSize = t[0];
          for (let i = 1; i < t.length; i++) slots.set(t[i], (slots.get(t[i]) ?? 0) + 1);
        } finally {
          table.close();
        }
      }
      const stats = dp.svcStats.lookupPerCpu(v.svcId) ?? [];
      out.push({
        service: m ? servicePortKey(m.servicePort) : '(unknown)',
        type: m?.type ?? '(unknown)',
        address: k.addr,
        port: k.port,
        protocol: protoName(k.proto),
        scope: k.scope === SCOPE_INTERNAL ? 'internal' : 'external',
        svcId: v.svcId,
        backendCount: v.backendCount,
        flags: v.flags,
        affinityTimeoutSec: v.flags & SVC_F_AFFINITY ? v.affinityTimeout : 0,
        maglevSize,
        backends: [...slots]
          .map(([id, n]) => ({ id, address: backends.get(id)?.addr ?? '?', port: backends.get(id)?.port ?? 0, slots: n }))
          .sort((a, b) => a.id - b.id),
        counters: {
          translations: Number(stats.reduce((a, s) => a + s.translations, 0n)),
          refused: Number(stats.reduce((a, s) => a + s.refused, 0n)),
        },
      });
    }
  }
  return out.sort((a, b) => a.service.localeCompare(b.service) || a.address.localeCompare(b.address) || a.port - b.port);
}

export function dumpBackends(dp: SocketLbDatapath, rec: Reconciler) {
  const meta = rec.backendInfo();
  return dp.backends
    .entries()
    .map(([id, b]) => ({
      id,
      address: b.addr,
      port: b.port,
      protocol: protoName(b.proto),
      service: meta.get(id)?.servicePort ?? '(unknown)',
      node: meta.get(id)?.nodeName ?? '',
      state: b.flags & BE_F_TERMINATING ? 'terminating' : 'ready',
      local: (b.flags & BE_F_LOCAL) !== 0,
    }))
    .sort((a, b) => a.id - b.id);
}
