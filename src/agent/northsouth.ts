/**
 * The agent's north-south part: everything the tc path needs besides the
 * shared service maps. Per snapshot:
 *
 *   prepare(frontends)   external flags / source ranges that are new   (before the reconciler)
 *   finish()             the ones nobody wants any more                (after it)
 *   afterApply(...)      first time: sysctls, masquerade rules, tc attach; always: health check ports
 *
 * The tc programs are attached after the first full apply, like the socket
 * hooks, so no packet meets half-programmed maps; the masquerade rules are
 * in place before the first packet can be marked.
 */
import { readFileSync } from 'node:fs';
import { applySysctls, wantedSysctls } from './sysctls.js';
import type { Logger } from 'pino';
import type { DesiredState, Frontend } from '../model/types.js';
import { ExternalProgrammer, type ExternalSyncResult } from '../dataplane/external.js';
import { detectDevices, type ConntrackLookupState, type TcAttachMode, type TcAttachment, type TcDatapath } from '../dataplane/tc.js';
import { detectIptablesMode, ensureMasqRules, type IptablesMode } from '../dataplane/iptables.js';
import type { HealthCheckServers } from './healthcheck.js';

export interface NorthSouthOptions {
  tc: TcDatapath;
  /** Devices to attach to; undefined: those holding one of the node's addresses. */
  devices?: string[];
  attachMode: TcAttachMode;
  iptablesMode: 'auto' | IptablesMode;
  masqMark: number;
  masqPorts?: string;
  /** The NodePort range, reserved for local port allocation in this namespace (ip_local_reserved_ports). */
  nodePortRange?: string;
  /** Turn on forwarding and off ICMP redirects on the devices (see docs/north-south.md). */
  manageSysctls: boolean;
  healthChecks: HealthCheckServers;
  logger: Logger;
}

export interface NorthSouthStatus {
  attached: TcAttachment[];
  devices: string[];
  pendingReason?: string;
  iptables?: { mode: IptablesMode; why: string; rules: number; ipv6Error?: string };
  sysctls: Record<string, string>;
  healthCheckPorts: { port: number; service: string; localEndpoints: number }[];
  lastExternalSync?: ExternalSyncResult;
  counters: Record<string, string>;
  conntrackLookup: ConntrackLookupState;
}

export class NorthSouth {
  readonly ext: ExternalProgrammer;
  private attached: TcAttachment[] = [];
  private devices: string[] = [];
  private pendingReason?: string = 'waiting for the first sync';
  private iptables?: { mode: IptablesMode; why: string; rules: number; ipv6Error?: string };
  private sysctls: Record<string, string> = {};
  private lastExternalSync?: ExternalSyncResult;
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly o: NorthSouthOptions) {
    this.ext = new ExternalProgrammer(o.tc);
  }

  get isAttached(): boolean {
    return this.attached.length > 0;
  }

  /** Returns the frontends to hand to the reconciler (see ExternalProgrammer.prepare: fail closed). */
  prepare(frontends: readonly Frontend[]): readonly Frontend[] {
    return this.ext.prepare(frontends);
  }

  finish(): ExternalSyncResult {
    const r = this.ext.finish();
    this.lastExternalSync = r;
    for (const e of r.errors) this.o.logger.error({ reason: e }, 'external entry not programmed');
    for (const f of r.closed) {
      this.o.logger.error({ frontend: f }, 'external frontend not served: its traffic policy or source ranges could not be programmed (fail closed; retried on the next sync)');
    }
    return r;
  }

  /** Runs after every apply; the returned promise settles when health ports are in sync. */
  afterApply(desired: DesiredState, nodeAddrs: string[]): Promise<void> {
    if (!this.isAttached) {
      try {
        this.tryAttach(nodeAddrs);
      } catch (e) {
        // The socket path keeps working; the next snapshot tries again.
        this.pendingReason = `attaching the tc path failed: ${(e as Error).message}`;
        this.o.logger.error({ err: e }, 'tc path not attached; retried on the next sync');
      }
    }
    const checks = desired.healthChecks ?? [];
    this.chain = this.chain.then(() => this.o.healthChecks.sync(checks)).catch((e) => this.o.logger.error({ err: e }, 'health check ports'));
    return this.chain;
  }

  private tryAttach(nodeAddrs: string[]): void {
    const { logger } = this.o;
    const devices = this.o.devices ?? detectDevices(nodeAddrs);
    if (devices.length === 0) {
      const reason = `no device of this network namespace holds a node address (${nodeAddrs.join(', ') || 'the Node has none'}); tc programs not attached (set --devices)`;
      if (reason !== this.pendingReason) logger.warn(reason);
      this.pendingReason = reason;
      return;
    }
    if (this.o.manageSysctls) this.applySysctls(devices);
    const det = this.o.iptablesMode === 'auto' ? detectIptablesMode() : { mode: this.o.iptablesMode, why: 'set by --iptables-mode' };
    const { rules, failed } = ensureMasqRules({ mode: det.mode, mark: this.o.masqMark, ports: this.o.masqPorts });
    this.iptables = { ...det, rules, ...(failed.length ? { ipv6Error: failed[0].error } : {}) };
    if (failed.length) logger.warn({ err: failed[0].error }, 'IPv6 masquerade rules could not be written: IPv6 NodePorts to backends on other nodes will not work; the IPv4 tc path goes on');
    logger.info({ mode: det.mode, why: det.why, rules }, 'masquerade rules in place');
    this.attached = this.o.tc.attach(devices, this.o.attachMode);
    this.devices = devices;
    this.pendingReason = undefined;
    logger.info({ attached: this.attached.map((a) => `${a.device}/${a.direction}:${a.mode}:${a.how}`) }, 'tc programs attached');
  }

  /** The node's sysctls (src/agent/sysctls.ts) for the devices served; rp_filter is reported, not changed. */
  private applySysctls(devices: string[]): void {
    for (const c of applySysctls(wantedSysctls(devices, this.o.nodePortRange), (name, err) => this.o.logger.warn({ sysctl: name, err: err.message }, 'could not set sysctl'))) {
      this.sysctls[c.name] = c.value;
    }
    for (const d of ['all', ...devices]) {
      try {
        this.sysctls[`net.ipv4.conf.${d}.rp_filter`] = readFileSync(`/proc/sys/net/ipv4/conf/${d}/rp_filter`, 'utf8').trim();
      } catch {
        /* device without ipv4 conf */
      }
    }
  }


  status(): NorthSouthStatus {
    const counters: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.o.tc.counters())) counters[k] = v.toString();
    return {
      attached: this.attached,
      devices: this.devices,
      pendingReason: this.pendingReason,
      iptables: this.iptables,
      sysctls: this.sysctls,
      healthCheckPorts: this.o.healthChecks.ports(),
      lastExternalSync: this.lastExternalSync,
      counters,
      conntrackLookup: this.o.tc.conntrackLookup,
    };
  }
}
