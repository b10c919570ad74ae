/** The reconciler's maps in memory (BpfMap.inMemory, MemoryPool): its unit tests run without root. */
import { BpfMap, u32Codec } from '../../src/bpf/map.js';
import { MapType } from '../../src/bpf/constants.js';
import { MemoryPool } from '../../src/dataplane/pool.js';
import type { ReconcilerMaps } from '../../src/dataplane/reconciler.js';
import { affinityKeyCodec, affinityValCodec, backendCodec, beStatsCodec, svc4KeyCodec, svc6KeyCodec, svcStatsCodec, svcValCodec } from '../../src/dataplane/layout.js';

export function memoryMaps(o: { maxServices?: number; maxBackends?: number; svcMapEntries?: number } = {}): ReconcilerMaps & { pool: MemoryPool } {
  const maxServices = o.maxServices ?? 1024;
  const maxBackends = o.maxBackends ?? 4096;
  return {
    svc4: BpfMap.inMemory(svc4KeyCodec, svcValCodec, { type: MapType.HASH, maxEntries: o.svcMapEntries ?? maxServices, name: 'sy_svc4' }),
    svc6: BpfMap.inMemory(svc6KeyCodec, svcValCodec, { type: MapType.HASH, maxEntries: maxServices, name: 'sy_svc6' }),
    backends: BpfMap.inMemory(u32Codec, backendCodec, { type: MapType.HASH, maxEntries: maxBackends, name: 'sy_backend' }),
    affinity: BpfMap.inMemory(affinityKeyCodec, affinityValCodec, { type: MapType.LRU_HASH, maxEntries: 1024, name: 'sy_affinity' }),
    svcStats: BpfMap.inMemory(u32Codec, svcStatsCodec, { type: MapType.PERCPU_ARRAY, maxEntries: maxServices, name: 'sy_svc_stats' }),
    beStats: BpfMap.inMemory(u32Codec, beStatsCodec, { type: MapType.PERCPU_HASH, maxEntries: maxBackends, name: 'sy_be_stats' }),
    poolOuter: BpfMap.inMemory(u32Codec, u32Codec, { type: MapType.ARRAY_OF_MAPS, maxEntries: 1, name: 'sy_mg_pool' }),
    pool: new MemoryPool(),
    opts: { maxServices, maxBackends },
  };
}
