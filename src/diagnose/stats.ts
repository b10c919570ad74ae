/**
 * Per-Service-port and per-backend statistics, `ipvsadm -Ln --stats/--rate`
 * for switchyard: for each Service port its frontends, totals (connections
 * translated, connections refused for want of a backend, tc-path packets and
 * bytes) and every backend's counters (sy_be_stats) with its Maglev share,
 * plus a skew hint when a backend gets far more than its share.
 *
 * Rates: the agent samples the counters every few seconds (StatsSampler);
 * a request computes per-second rates between the newest sample at least a
 * second old and now. Without an agent, `switchyard stats --rate` reads
 * twice, --interval apart.
 */
import type { InspectMaps } from '../read/maps.js';
import { runSteps, runStepsAsync } from '../util/steps.js';
import { hostPort, listServices, listServicesAsync, u64, type Filter, type Names, type ServiceEntry } from '../read/entries.js';

export interface Counters4 {
  connections: number;
  refused: number;
  packets: number;
  bytes: number;
}

export interface BackendStat extends Counters4 {
  id: number;
  address: string | null;
  port: number | null;
  node: string | null;
  state: string;
  /** The backend's share of the Maglev table of the port's widest frontend (what it should get). */
  share: number;
  /** Per second over the sampling window; absent without a window. */
  rates?: Counters4;
}

export interface PortStat {
  namespace: string | null;
  service: string | null;
  portName: string | null;
  protocol: string;
  frontends: string[];
  /** Summed over the frontends: connections translated, refused for want of a backend, tc packets and bytes. */
  totals: Counters4;
  rates?: Counters4;
  backends: BackendStat[];
  /** Set when one backend gets far more than its share. */
  skew: string | null;
}

export interface StatsReport {
  /** When the counters were read (ISO). */
  at: string;
  /** Seconds the rates are computed over; null when there are no rates. */
  rateWindowSec: number | null;
  items: PortStat[];
}

/** Counters needed to judge skew at all (below, chance alone moves shares a lot). */
export const SKEW_MIN_SAMPLES = 100;

/**
 * A backend gets "far more than its share" when its part of the port's
 * connections (or, with none, packets) exceeds its table share by at least
 * max(its share, 25 points): 3 backends, 33 % each → flagged from 67 %;
 * 10 backends → from 35 %. At 100 samples that is more than 5 standard
 * deviations away from chance.
 */
export function skewOf(backends: { address: string | null; port: number | null; share: number; connections: number; packets: number }[], affinity: boolean): string | null {
  const byConn = backends.reduce((a, b) => a + b.connections, 0);
  const byPkt = backends.reduce((a, b) => a + b.packets, 0);
  const [total, key, what] = byConn >= SKEW_MIN_SAMPLES ? [byConn, 'connections', 'connections'] as const : [byPkt, 'packets', 'packets'] as const;
  if (total < SKEW_MIN_SAMPLES || backends.length < 2) return null;
  let worst: { b: (typeof backends)[number]; part: number } | undefined;
  for (const b of backends) {
    const part = b[key] / total;
    if (part - b.share >= Math.max(b.share, 0.25) && (!worst || part - b.share > worst.part - worst.b.share)) worst = { b, part };
  }
  if (!worst) return null;
  const who = worst.b.address === null ? '(missing)' : hostPort(worst.b.address, worst.b.port ?? 0);
  const why = affinity
    ? 'sessionAffinity keeps each client on one backend, so a few busy clients explain it'
    : 'few clients, long-lived connections or one busy client can explain it; so can a stale table (see explain)';
  return `${who} got ${(worst.part * 100).toFixed(0)}% of ${total} ${what}, its table share is ${(worst.b.share * 100).toFixed(0)}%: ${why}`;
}

const zero = (): Counters4 => ({ connections: 0, refused: 0, packets: 0, bytes: 0 });

/** The raw counters, by svc id and by backend id: what the sampler keeps (cheap: no Maglev table is read). */
export interface RawCounters {
  at: number;
  svc: Map<number, Counters4>;
  be: Map<number, Counters4>;
}

/** The counters of every frontend and backend, read a slice at a time (yields between slices). */
function* rawCounterSteps(maps: InspectMaps, out: RawCounters): Generator<void> {
  const key = Buffer.alloc(4);
  const sum = (m: { cpus: number; value: { size: number } }, raw: Buffer | undefined): Counters4 => {
    const slot = Math.ceil(m.value.size / 8) * 8;
    const t = [0, 0, 0, 0];
    if (raw) for (let i = 0; i < m.cpus; i++) for (let f = 0; f < 4; f++) t[f] += u64(raw, i * slot + f * 8);
    return { connections: t[0], refused: t[1], packets: t[2], bytes: t[3] };
  };
  for (const map of [maps.svc4, maps.svc6]) {
    for (const slice of map.dumpSlices(256)) {
      for (const { value } of slice) {
        const id = value.readUInt32LE(0);
        key.writeUInt32LE(id);
        out.svc.set(id, sum(maps.svcStats, maps.svcStats.lookupRaw(key)));
      }
      yield;
    }
  }
  const m = maps.beStats;
  if (!m) return;
  for (const slice of m.dumpSlices(512)) {
    for (const { key: k, value } of slice) out.be.set(k.readUInt32LE(0), sum(m, value));
    yield;
  }
}

export function readRawCounters(maps: InspectMaps, now: number = Date.now()): RawCounters {
  const out: RawCounters = { at: now, svc: new Map(), be: new Map() };
  runSteps(rawCounterSteps(maps, out));
  return out;
}

/**
 * readRawCounters() a slice at a time, the event loop running in between
 * (the sampler's read at 10,000 Services × 10 endpoints was 0.4 s in one go).
 */
export async function readRawCountersAsync(maps: InspectMaps, now: number = Date.now()): Promise<RawCounters> {
  const out: RawCounters = { at: now, svc: new Map(), be: new Map() };
  await runStepsAsync(rawCounterSteps(maps, out));
  return out;
}

function add(a: Counters4, b: Counters4): void {
  a.connections += b.connections;
  a.refused += b.refused;
  a.packets += b.packets;
  a.bytes += b.bytes;
}

/** Per-second change from `before` to `now`; a counter that went down was reset (an id reused): it counts from 0. */
function rate(now: Counters4, before: Counters4 | undefined, sec: number): Counters4 {
  const d = (x: number, y: number | undefined) => (x - (y !== undefined && y <= x ? y : 0)) / sec;
  return { connections: d(now.connections, before?.connections), refused: d(now.refused, before?.refused), packets: d(now.packets, before?.packets), bytes: d(now.bytes, before?.bytes) };
}

/**
 * The counters per Service port (the frontends' tables tell which backends a
 * port has and their shares), with rates against `before` when given.
 */
export function readStats(
  maps: InspectMaps,
  names: Names,
  filter: Filter = {},
  before?: RawCounters,
  raw: RawCounters = readRawCounters(maps),
  services: ServiceEntry[] = listServices(maps, names, filter),
): StatsReport {
  const byPort = new Map<string, typeof services>();
  for (const s of services) {
    const k = s.service === null ? `#${s.svcId}` : `${s.namespace}/${s.service}:${s.portName}/${s.protocol}`;
    const e = byPort.get(k);
    if (e) e.push(s);
    else byPort.set(k, [s]);
  }
  const sec = before ? (raw.at - before.at) / 1000 : 0;
  const withRates = before !== undefined && sec > 0;
  const items: PortStat[] = [];
  for (const fe of byPort.values()) {
    const totals = zero();
    const totalRates = zero();
    for (const s of fe) {
      const c = raw.svc.get(s.svcId) ?? zero();
      add(totals, c);
      if (withRates) add(totalRates, rate(c, before.svc.get(s.svcId), sec));
    }
    // Expected shares from the frontend with the most backends (the Cluster set).
    const widest = [...fe].sort((a, b) => b.backends.length - a.backends.length)[0];
    const share = new Map(widest.backends.map((b) => [b.id, widest.maglevSize ? b.slots / widest.maglevSize : 0]));
    const seen = new Map<number, BackendStat>();
    for (const s of fe) {
      for (const b of s.backends) {
        if (seen.has(b.id)) continue;
        const c = raw.be.get(b.id) ?? zero();
        seen.set(b.id, {
          id: b.id, address: b.address, port: b.port, node: b.node, state: b.state, share: share.get(b.id) ?? 0, ...c,
          ...(withRates ? { rates: rate(c, before.be.get(b.id), sec) } : {}),
        });
      }
    }
    const backends = [...seen.values()].sort((a, b) => a.id - b.id);
    const first = fe[0];
    items.push({
      namespace: first.namespace,
      service: first.service,
      portName: first.portName,
      protocol: first.protocol,
      frontends: fe.map((s) => `${hostPort(s.address, s.port)}/${s.protocol} ${s.scope}`),
      totals,
      ...(withRates ? { rates: totalRates } : {}),
      backends,
      skew: skewOf(backends, fe.some((s) => s.affinityTimeoutSec > 0)),
    });
  }
  return { at: new Date(raw.at).toISOString(), rateWindowSec: withRates ? Math.round(sec * 10) / 10 : null, items };
}

/**
 * The agent's sampler: while someone asks for stats, reads the raw counters
 * every `intervalMs` and keeps the last two reads, so a request gets rates
 * over a window of one to two intervals (the newest sample at least a second
 * old). It samples on demand: the first request after a quiet spell takes a
 * sample, waits a second and answers with rates over that second; after
 * `idleMs` without a request it stops and lets its samples go (at 100,000
 * backends two samples are ~30 MiB of heap, held for nobody).
 */
export class StatsSampler {
  private samples: RawCounters[] = [];
  private timer?: NodeJS.Timeout;
  private enabled = false;
  private lastDemand = 0;
  /** Requests waiting for their first window (the sampler does not stop under them). */
  private waiting = 0;

  constructor(
    private readonly maps: InspectMaps,
    readonly intervalMs: number,
    private readonly now: () => number = Date.now,
    readonly idleMs: number = 600_000,
  ) {}

  /** Allows sampling (nothing is read until a request asks). */
  start(): void {
    this.enabled = this.intervalMs > 0;
  }

  stop(): void {
    this.enabled = false;
    this.pause();
  }

  /** True while samples are being taken (someone asked within idleMs). */
  get active(): boolean {
    return this.timer !== undefined;
  }

  private pause(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.samples = [];
  }

  private demand(): void {
    this.lastDemand = this.now();
    if (this.timer || !this.enabled) return;
    this.timer = setInterval(() => {
      if (this.waiting === 0 && this.now() - this.lastDemand > this.idleMs) this.pause();
      else void this.sample();
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Takes a sample, a slice at a time (never holding the event loop long); a sample still running is not doubled. */
  sample(): Promise<void> {
    this.running ??= readRawCountersAsync(this.maps, this.now())
      .then((r) => {
        this.samples.push(r);
        // Keep the newest sample at least a second older than this one (and nothing older than it).
        while (this.samples.length > 2 && r.at - this.samples[1].at >= 1000) this.samples.shift();
      })
      .catch(() => {
        /* the maps could not be read now; the next sample tries again */
      })
      .finally(() => (this.running = undefined));
    return this.running;
  }
  private running?: Promise<void>;

  /** The sample to compute rates against at time `t`: the newest at least a second old. */
  base(t: number = this.now()): RawCounters | undefined {
    return [...this.samples].reverse().find((s) => t - s.at >= 1000);
  }

  /** Counters now, with rates against the last sample; a first request waits for a one-second window. */
  async report(names: Names, filter: Filter = {}): Promise<StatsReport> {
    if (this.enabled) {
      this.demand();
      if (!this.base()) {
        this.waiting++;
        try {
          if (!this.samples.length) await this.sample();
          const newest = this.samples[this.samples.length - 1];
          // Timers may fire a millisecond early against the wall clock: wait until the window is there.
          for (let i = 0; newest && !this.base() && i < 50; i++) await new Promise((r) => setTimeout(r, Math.max(5, newest.at + 1000 - this.now())));
        } finally {
          this.waiting--;
          this.lastDemand = this.now();
        }
      }
    }
    const t = this.now();
    const raw = await readRawCountersAsync(this.maps, t);
    return readStats(this.maps, names, filter, this.base(t), raw, await listServicesAsync(this.maps, names, filter));
  }
}

/** Rates between two reports of the same ports (the CLI's --rate: two reads, --interval apart). */
export function ratesBetween(now: StatsReport, before: StatsReport): StatsReport {
  const sec = (Date.parse(now.at) - Date.parse(before.at)) / 1000;
  if (!(sec > 0)) return now;
  const key = (p: PortStat) => `${p.namespace}/${p.service}:${p.portName}/${p.protocol}`;
  const old = new Map(before.items.map((p) => [key(p), p]));
  return {
    at: now.at,
    rateWindowSec: Math.round(sec * 10) / 10,
    items: now.items.map((p) => {
      const o = old.get(key(p));
      const ob = new Map((o?.backends ?? []).map((b) => [b.id, b]));
      return { ...p, rates: rate(p.totals, o?.totals, sec), backends: p.backends.map((b) => ({ ...b, rates: rate(b, ob.get(b.id), sec) })) };
    }),
  };
}
