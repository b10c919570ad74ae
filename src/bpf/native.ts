/**
 * Typed view of the native addon (native/src/addon.cc). Everything here is a
 * direct libbpf / bpf(2) call; the classes in this folder add validation.
 */
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface NativeProgram {
  name: string;
  section: string;
  fd: number;
  type: number;
  expectedAttachType: number;
}

export interface NativeMapDesc {
  name: string;
  fd: number;
  type: number;
  keySize: number;
  valueSize: number;
  maxEntries: number;
  flags: number;
  internal: boolean;
  pinPath: string | null;
}

/** A BTF type as a tree (native/src/addon.cc DescribeType): typedefs resolved, enums as ints. */
export interface BtfType {
  kind: 'int' | 'struct' | 'union' | 'array' | 'ptr' | 'other';
  size: number;
  members?: { name: string; offset: number; bits: number; type: BtfType | null }[];
  elem?: BtfType | null;
  count?: number;
}

/** A map's key and value types (null when it declares none), and a map of maps' inner definition. */
export interface MapBtf {
  key: BtfType | null;
  value: BtfType | null;
  inner?: { type: number; keySize: number; valueSize: number; flags: number } | null;
}

export interface NativeBpfObject {
  setMapMaxEntries(name: string, n: number): void;
  setGlobal(name: string, value: Buffer): void;
  load(): void;
  programs(): NativeProgram[];
  maps(): NativeMapDesc[];
  /** The key and value types the object declares for a map (from its BTF). */
  mapBtf(name: string): MapBtf;
  close(): void;
}

export interface MapInfo {
  id: number;
  type: number;
  keySize: number;
  valueSize: number;
  maxEntries: number;
  flags: number;
  name: string;
  /** The BTF the map was created with (0: none), and its key and value type ids in it. */
  btfId: number;
  btfKeyTypeId: number;
  btfValueTypeId: number;
}

export interface LinkInfo {
  id: number;
  progId: number;
  type: number;
  cgroupId?: bigint;
  attachType?: number;
  /** TCX links: the device. */
  ifindex?: number;
}

export interface BtfStruct {
  size: number;
  members: { name: string; offset: number; size: number }[];
}

export interface NativeAddon {
  BpfObject: new (path: string, pinRoot: string | null) => NativeBpfObject;
  close(fd: number): void;
  /** glibc malloc_trim(0): returns the free pages of every malloc arena to the kernel; true when some were. */
  mallocTrim(): boolean;
  objPin(fd: number, path: string): void;
  objGet(path: string): number;
  linkCreateCgroup(progFd: number, cgroupPath: string, attachType: number): number;
  linkCreateTcx(progFd: number, ifindex: number, attachType: number): number;
  /** Link of an iterator program (BPF_TRACE_ITER). */
  linkCreateIter(progFd: number): number;
  /** Opens an iterator of the link, inside netnsPath when given (in a thread of its own), and reads it to the end. */
  iterRead(linkFd: number, netnsPath: string | null): Buffer;
  ifIndex(name: string): number;
  tcAttach(ifindex: number, egress: boolean, progFd: number, handle: number, priority: number): number;
  tcDetach(ifindex: number, egress: boolean, handle: number, priority: number): boolean;
  tcQuery(ifindex: number, egress: boolean, handle: number, priority: number): number | null;
  linkUpdate(linkFd: number, progFd: number): void;
  linkDetach(linkFd: number): void;
  linkInfo(fd: number): LinkInfo;
  progInfo(fd: number): { id: number; type: number; name: string; runCount: bigint };
  mapInfo(fd: number): MapInfo;
  mapGetFdById(id: number): number;
  mapCreate(type: number, keySize: number, valueSize: number, maxEntries: number, flags: number, name: string): number;
  mapLookup(fd: number, key: Buffer, valueSize: number): Buffer | null;
  mapUpdate(fd: number, key: Buffer, value: Buffer, flags: number): void;
  mapDelete(fd: number, key: Buffer): boolean;
  mapDump(fd: number, keySize: number, valueSize: number): { keys: Buffer; values: Buffer; count: number };
  /** Up to `max` entries from `cursor` (null: the start); cursor null in the answer once the map is exhausted. */
  mapDumpBatch(fd: number, keySize: number, valueSize: number, cursor: Buffer | null, max: number): { keys: Buffer; values: Buffer; count: number; cursor: Buffer | null };
  mapUpdateBatch(fd: number, keys: Buffer, values: Buffer, count: number, flags: number): number;
  mapDeleteBatch(fd: number, keys: Buffer, count: number): number;
  /** One update per entry, past failures: how many were written, already there (BPF_NOEXIST), failed (full, …). */
  mapUpdateEach(fd: number, keys: Buffer, values: Buffer, count: number, flags: number): { written: number; exist: number; failed: number };
  /** Copies into / out of the value area of a BPF_F_MMAPABLE array (element stride: value size rounded up to 8). */
  mapMmapWrite(fd: number, data: Buffer, offset: number): void;
  mapMmapRead(fd: number, length: number, offset: number): Buffer;
  progTestRun(fd: number, data: Buffer, repeat: number, outSize: number, ctxIn?: Buffer): { retval: number; data: Buffer; durationNs: number; ctx?: Buffer };
  numPossibleCpus(): number;
  btfStructs(objPath: string, names: string[]): Record<string, BtfStruct>;
  /** A map's key and value types from the BTF the kernel holds (btfId of mapInfo). */
  btfLayout(btfId: number, keyTypeId: number, valueTypeId: number): MapBtf;
  libbpfVersion: string;
}

/** Repository root (this file is at dist/src/bpf/native.js or src/bpf/native.ts). */
export const repoRoot = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    dir = dirname(dir);
  }
  throw new Error('switchyard: cannot find the package root');
})();

let cached: NativeAddon | undefined;

export function native(): NativeAddon {
  if (cached) return cached;
  const path = join(repoRoot, 'native', 'build', 'Release', 'switchyard_bpf.node');
  if (!existsSync(path)) {
    throw new Error(`switchyard: native addon not built (${path} missing); run "npm run build"`);
  }
  cached = createRequire(import.meta.url)(path) as NativeAddon;
  return cached;
}

/** Error thrown by the addon: a libbpf / bpf(2) failure with its errno. */
export interface BpfError extends Error {
  errno: number;
  code: string;
  syscall: string;
}

export function isBpfError(e: unknown, code?: string): e is BpfError {
  return e instanceof Error && typeof (e as BpfError).errno === 'number' && (code === undefined || (e as BpfError).code === code);
}
