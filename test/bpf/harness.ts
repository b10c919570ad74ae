/**
 * Loads the real objects under a throw-away bpffs directory, programs the
 * maps through the real reconciler and external programmer, and runs the
 * tc programs on crafted packets with BPF_PROG_TEST_RUN.
 */
import { existsSync, rmSync } from 'node:fs';
import { native } from '../../src/bpf/native.js';
import { SocketLbDatapath, cleanupDatapath } from '../../src/dataplane/datapath.js';
import { Reconciler } from '../../src/dataplane/reconciler.js';
import { TcDatapath, type TcOptions } from '../../src/dataplane/tc.js';
import { ExternalProgrammer } from '../../src/dataplane/external.js';
import type { Backend, Frontend, FrontendType } from '../../src/model/types.js';
import { findCgroup2Root } from '../../src/util/sys.js';
import { parseFrame, type ParsedPacket } from './packets.js';

export const TC_ACT_OK = 0;
export const TC_ACT_SHOT = 2;
export const TC_ACT_UNSPEC = -1;
/** sizeof(struct __sk_buff) since Linux 5.16 (hwtstamp); mark is at offset 8. */
const SKB_CTX_SIZE = 192;

/** Fails the run with a clear message when BPF_PROG_TEST_RUN cannot work here. */
export function requireBpf(): void {
  const missing: string[] = [];
  if (process.getuid?.() !== 0) missing.push('root (BPF_PROG_TEST_RUN and pinning need CAP_BPF/CAP_NET_ADMIN; run the tests as root)');
  try {
    native();
  } catch (e) {
    missing.push((e as Error).message);
  }
  if (missing.length) throw new Error(`BPF tests cannot run here; missing: ${missing.join('; ')}`);
}

export function backend(addr: string, port: number, local: boolean, protocol: 'TCP' | 'UDP' = 'TCP', nodeName = local ? 'n1' : 'n2'): Backend {
  return {
    addr, family: addr.includes(':') ? 6 : 4, port, protocol, nodeName,
    ready: true, serving: true, terminating: false, local, weight: 1,
  };
}

export interface FeOpts {
  type?: FrontendType;
  protocol?: 'TCP' | 'UDP';
  local?: boolean;
  sourceRanges?: string[];
  affinity?: number;
  name?: string;
}

export function external(addr: string, port: number, backends: Backend[], o: FeOpts = {}): Frontend {
  const protocol = o.protocol ?? 'TCP';
  const fe: Frontend = {
    servicePort: { namespace: 'default', name: o.name ?? `svc-${addr}-${port}`, port: 'p', protocol },
    type: o.type ?? 'NodePort',
    family: addr.includes(':') ? 6 : 4,
    addr,
    port,
    protocol,
    scope: 'external',
    backends,
    affinityTimeoutSec: o.affinity ?? 0,
    externalPolicyLocal: o.local ?? false,
  };
  if (o.sourceRanges) fe.sourceRanges = o.sourceRanges;
  return fe;
}

export interface RunResult {
  verdict: number;
  out: Buffer;
  /** The output read as IP (throws for frames that are not). */
  readonly pkt: ParsedPacket;
  mark: number;
}

/** One node's datapath: the socket object (creates the pins), the tc object, the programmers. */
export class TcHarness {
  readonly sock: SocketLbDatapath;
  readonly tc: TcDatapath;
  readonly rec: Reconciler;
  readonly ext: ExternalProgrammer;

  constructor(readonly bpfRoot: string, tcOpts: Partial<TcOptions> = {}) {
    if (existsSync(bpfRoot)) cleanupDatapath(bpfRoot);
    this.sock = SocketLbDatapath.load({ bpfRoot, cgroupPath: findCgroup2Root(), ctEntries: 4096, maxServices: 1024, maxBackends: 4096, affinityEntries: 1024, revnatEntries: 1024 });
    this.tc = TcDatapath.load({ bpfRoot, ctEntries: 4096, maxServices: 1024, maxBackends: 4096, affinityEntries: 1024, revnatEntries: 1024, ...tcOpts });
    this.rec = new Reconciler(this.sock);
    this.ext = new ExternalProgrammer(this.tc);
  }

  apply(frontends: Frontend[]): void {
    const served = this.ext.prepare(frontends);
    const r = this.rec.apply(served);
    if (r.errors.length) throw new Error(`reconciler: ${JSON.stringify(r.errors)}`);
    const e = this.ext.finish();
    if (e.errors.length) throw new Error(`external: ${e.errors.join('; ')}`);
  }

  run(direction: 'ingress' | 'egress', frame: Buffer, mark = 0): RunResult {
    const prog = this.tc.program(direction === 'ingress' ? 'sy_tc_ingress' : 'sy_tc_egress');
    // struct __sk_buff in and out (the kernel wants all of it back out); only mark is set.
    const ctx = Buffer.alloc(SKB_CTX_SIZE);
    ctx.writeUInt32LE(mark >>> 0, 8);
    const r = native().progTestRun(prog.fd, frame, 1, frame.length + 256, ctx);
    const verdict = r.retval | 0;
    return {
      verdict,
      out: r.data,
      get pkt() {
        return parseFrame(r.data);
      },
      mark: r.ctx ? r.ctx.readUInt32LE(8) : 0,
    };
  }

  counters(): Record<string, bigint> {
    return this.tc.counters();
  }

  close(): void {
    this.tc.close();
    this.sock.close();
    cleanupDatapath(this.bpfRoot);
    rmSync(this.bpfRoot, { recursive: true, force: true });
  }
}
