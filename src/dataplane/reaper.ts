/**
 * Destroys connected UDP sockets whose peer is a backend that left every
 * Service (bpf/sock_destroy.c), so that statsd, syslog or DNS clients that
 * connect() once see an error and reconnect through the Service instead of
 * sending to a pod that is gone. kube-proxy gets the same effect by flushing
 * the UDP conntrack entries of removed endpoints.
 *
 * Socket iterators walk the network namespace they are opened in, so the
 * reaper opens one in every network namespace of the node: those of every
 * process it can see in /proc (pods and the host; the DaemonSet runs with
 * hostPID), each visited once. Only sockets the socket hooks translated
 * (their cookie is in the reverse-translation map) are touched.
 *
 * Needs bpf_sock_destroy() (Linux 6.5). Elsewhere load() reports why it is
 * unavailable and the agent goes on without it.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { native, repoRoot, type NativeBpfObject } from '../bpf/native.js';
import { BpfMap, u32Codec } from '../bpf/map.js';
import { configureMapSizes, type MapSizes } from './datapath.js';
import { SOCK_DESTROY_STRUCTS, bindLayouts, decodeReaped, staleKeyCodec, type Reaped, type StaleKey } from './layout.js';

export const SOCK_DESTROY_OBJECT = join(repoRoot, 'bpf', 'sock_destroy.o');
const STALE_MAX = 4096;

export interface ReapResult {
  /** Network namespaces walked. */
  namespaces: number;
  destroyed: (Reaped & { netns: string })[];
  /** Namespaces that could not be entered (a process that exited meanwhile is not one). */
  errors: string[];
  ms: number;
}

/** One path per network namespace the agent can see: /proc/<pid>/ns/net of the first process in it. */
export function networkNamespaces(procRoot = '/proc'): Map<string, string> {
  const out = new Map<string, string>();
  let pids: string[];
  try {
    pids = readdirSync(procRoot).filter((d) => /^\d+$/.test(d));
  } catch {
    return out;
  }
  for (const pid of pids) {
    const p = join(procRoot, pid, 'ns', 'net');
    try {
      const st = statSync(p);
      const id = `${st.dev}:${st.ino}`;
      if (!out.has(id)) out.set(id, p);
    } catch {
      /* exited, or a kernel thread */
    }
  }
  return out;
}

export class SocketReaper {
  private readonly stale: BpfMap<StaleKey, number>;
  private readonly linkFd: number;

  private constructor(private readonly obj: NativeBpfObject) {
    const maps = new Map(obj.maps().map((m) => [m.name, m.fd]));
    this.stale = new BpfMap(maps.get('sy_sock_stale')!, staleKeyCodec, u32Codec);
    const prog = obj.programs().find((p) => p.name === 'sy_reap_udp');
    if (!prog) throw new Error(`${SOCK_DESTROY_OBJECT}: no program sy_reap_udp`);
    this.linkFd = native().linkCreateIter(prog.fd);
  }

  /**
   * Loads the iterator against the maps pinned under bpfRoot (the socket
   * hooks' reverse translations). Returns the reason instead when the kernel
   * cannot run it (no bpf_sock_destroy, no UDP iterator, no BTF).
   */
  static load(bpfRoot: string, sizes: MapSizes, objectPath = SOCK_DESTROY_OBJECT): SocketReaper | { unavailable: string } {
    if (!existsSync(objectPath)) return { unavailable: `${objectPath} missing; run "npm run build"` };
    const problems = bindLayouts(native().btfStructs(objectPath, SOCK_DESTROY_STRUCTS.map((s) => s.cStruct)), SOCK_DESTROY_STRUCTS);
    if (problems.length) throw new Error(`C and TypeScript layouts disagree in ${objectPath}:\n  ${problems.join('\n  ')}`);
    let obj: NativeBpfObject | undefined;
    try {
      obj = new (native().BpfObject)(objectPath, bpfRoot);
      configureMapSizes(obj, sizes);
      obj.load();
      return new SocketReaper(obj);
    } catch (e) {
      obj?.close();
      const msg = (e as Error).message;
      const why = /bpf_sock_destroy/.test(msg)
        ? 'the kernel has no bpf_sock_destroy() (Linux >= 6.5)'
        : /iter|attach/i.test(msg) ? 'the kernel has no UDP socket iterator' : 'the socket iterator did not load';
      return { unavailable: `${why}: ${msg.split('\n')[0]}` };
    }
  }

  /**
   * Destroys every translated, connected UDP socket whose peer is one of
   * `gone`, in every network namespace of the node. The list is written to the
   * map, walked, and removed again.
   */
  reap(gone: readonly StaleKey[], namespaces = networkNamespaces()): ReapResult {
    const t0 = process.hrtime.bigint();
    const res: ReapResult = { namespaces: 0, destroyed: [], errors: [], ms: 0 };
    const udp = gone.filter((g) => g.proto === 17);
    for (let i = 0; i < udp.length; i += STALE_MAX) {
      const chunk = udp.slice(i, i + STALE_MAX);
      for (const k of chunk) this.stale.update(k, 1);
      try {
        for (const path of namespaces.values()) {
          let buf: Buffer;
          try {
            buf = native().iterRead(this.linkFd, path);
          } catch (e) {
            if (existsSync(path)) res.errors.push(`${path}: ${(e as Error).message}`);
            continue;
          }
          res.namespaces++;
          for (const r of decodeReaped(buf)) res.destroyed.push({ ...r, netns: path });
        }
      } finally {
        for (const k of chunk) {
          try {
            this.stale.delete(k);
          } catch {
            /* already gone */
          }
        }
      }
    }
    res.ms = Number(process.hrtime.bigint() - t0) / 1e6;
    return res;
  }

  close(): void {
    native().close(this.linkFd);
    this.obj.close();
  }
}
