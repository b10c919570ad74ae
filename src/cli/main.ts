/**
 * `switchyard` command line: agent, prepare, cleanup, and the inspection commands (the lab and the
 * benchmarks are the harness's: harness/cli.ts, `switchyard-lab`).
 */
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { Agent } from '../agent/agent.js';
import { DEFAULT_HEALTH_TIMEOUT_MS, HealthTracker } from '../agent/health.js';
import { ListenError, openListeners, type ListenerSpec } from '../agent/listen.js';
import { agentMetrics, datapathMetrics } from '../agent/metrics.js';
import { buildApp } from '../api/server.js';
import { SocketLbDatapath, cleanupDatapath, DEFAULTS } from '../dataplane/datapath.js';
import { SocketReaper } from '../dataplane/reaper.js';
import { Reconciler } from '../dataplane/reconciler.js';
import { DEFAULT_MAGLEV_SIZE, MAGLEV_PRIMES, isValidTableSize } from '../maglev/index.js';
import { FileParseError, FileSource } from '../source/file.js';
import { KubeSource } from '../source/kube.js';
import { inCluster, loadApiConfig } from '../source/apiconfig.js';
import type { Source } from '../source/types.js';
import { findCgroup2Root, resolveCgroup2 } from '../util/sys.js';
import { packageVersion } from '../util/version.js';
import { FLOW_OPTIONS } from './options.js';
import { DEFAULT_MAP_SIZE_RATIO, describeSizing, memTotalBytes, sizeMaps } from '../dataplane/sizing.js';
import { prepareNode } from '../agent/prepare.js';
import { listenMetrics } from '../agent/metrics-server.js';
import { datapathMaps } from '../read/maps.js';
import { resolveNames } from '../read/entries.js';
import { PinnedNames } from '../dataplane/names.js';
import { probeFeatures } from '../dataplane/features.js';
import { native } from '../bpf/native.js';
import { DEFAULT_API_ADDR, driftCommand, mapsCommand, statusCommand } from './read.js';
import { unlinkSync } from 'node:fs';
import { migrations } from '../dataplane/migrate.js';
import { DEFAULT_MASQ_MARK, TcDatapath, cleanupTcFilters, type TcAttachMode } from '../dataplane/tc.js';
import { DEFAULT_MASQ_PORTS, removeMasqRules, type IptablesMode } from '../dataplane/iptables.js';
import { HealthCheckServers, ProxyHealthServer, agentProxyHealth } from '../agent/healthcheck.js';
import { NorthSouth } from '../agent/northsouth.js';
import { registerMigrationMetrics, registerTcMetrics } from '../agent/metrics.js';
import { LogRing, ringLogger } from '../agent/logring.js';
import { explainCommand, snapshotCommand, statsCommand, traceCommand } from './diagnose.js';
import { StatsSampler } from '../diagnose/stats.js';
import { HeapReclaimer, lastResortGc } from '../agent/heap.js';

const HELP = `switchyard: eBPF Service load balancing for Kubernetes nodes

Usage:
  switchyard agent   --node-name N --source file:PATH [options]
  switchyard agent   --node-name N --kubeconfig FILE | --apiserver URL [--token-file F --ca-file F] [options]
  switchyard prepare [--bpffs DIR] [--cgroup PATH]      (the DaemonSet's privileged init container: mounts bpffs,
                     cgroup v2 where the host has none, and sets the network sysctls)
  switchyard cleanup [--cgroup PATH] [--bpf-root DIR]   (in the agent's network namespace: also tc and iptables)
  switchyard status  [--api-addr HOST:PORT | --api-socket PATH | --bpf-root DIR] [-o table|json|yaml]
  switchyard maps    services|backends|maglev SVC|flows|affinity [--api-addr HOST:PORT | --api-socket PATH | --bpf-root DIR]
                     [-o table|wide|json|yaml] [--namespace NS] [--service NAME] [--backend ID|ADDR[:PORT]]
                     [--raw] [--full] [--limit N] [--continue TOKEN]
  switchyard drift   [--api-addr HOST:PORT] [-o table|json|yaml]      (exit 1 when the maps drifted)
  switchyard explain [NAMESPACE/NAME[:PORT]] [--probe] [--from ADDR] [--problems] [-o table|json|yaml]
                     [--api-addr HOST:PORT | --api-socket PATH | --bpf-root DIR [--source file:PATH | --kubeconfig FILE]
                      [--node-name N] [--cgroup PATH]]
                     (why a Service works or not on this node, ending in a verdict; exit 1 when it names a problem;
                      without a Service: every Service's verdict)
  switchyard trace   --to ADDR:PORT [--from ADDR[:PORT]] [--proto tcp|udp] [--node-client] [--cookie N]
                     [-o table|json|yaml] [--api-addr HOST:PORT | --api-socket PATH | --bpf-root DIR]
                     (which frontend, which backend the programs pick for this flow on this node, and what then)
  switchyard stats   [--namespace NS] [--service NAME] [--rate [--interval SEC]] [-o table|json|yaml]
                     [--api-addr HOST:PORT | --api-socket PATH | --bpf-root DIR]
                     (per Service port and backend: connections, refused, packets, bytes, share; ipvsadm -Ln --stats/--rate)
  switchyard snapshot [-o FILE|-] [--api-addr HOST:PORT | --api-socket PATH | --bpf-root DIR [--source … --node-name N]]
                     (one .tar.gz for an incident: status, maps, stats, drift, explain of every Service with a problem,
                      metrics, recent logs, kernel and programs, conntrack count/max, switchyard's iptables rules)

Agent options (each also from the environment as SWITCHYARD_<NAME>, e.g. SWITCHYARD_NODE_NAME):
  --node-name N           this node's name (Node object, local endpoints)          [required]
  --source SRC            file:PATH (YAML file or directory of Services/EndpointSlices/Nodes)
                          or kube (the Kubernetes API)      [kube when --kubeconfig/--apiserver is given or in a pod]
  --kubeconfig FILE       kubeconfig for the Kubernetes API
  --apiserver URL         direct API server address (https://HOST:PORT), so the agent does not depend on
                          the kubernetes Service VIP it programs; with --kubeconfig, overrides its server
  --token-file F          bearer token for --apiserver          [in a pod: the service-account token]
  --ca-file F             CA bundle for --apiserver             [in a pod: the service-account CA]
  --watch-stall-timeout S restart a watch that saw no event or bookmark for S seconds   [150]
  --cgroup PATH           cgroup v2 directory to attach the socket hooks to; a hybrid host's /sys/fs/cgroup
                          (holding unified/) also works                            [cgroup v2 root, found in /proc/self/mountinfo]
  --bpf-root DIR          bpffs directory for this agent's pins                    [/sys/fs/bpf/switchyard]
  --api-addr HOST:PORT    REST API, readiness and metrics                          [${DEFAULT_API_ADDR}]
  --api-socket PATH       serve the REST API on this unix socket too
  --healthz-addr HOST:PORT  kube-proxy's health endpoint (/healthz, /livez) for load balancers;
                          "off" disables it                                        [0.0.0.0:10256]
  --metrics-addr HOST:PORT  Prometheus /metrics alone on this address (also on the API) [off]
  --devices LIST          devices for the tc path (NodePort, LoadBalancer, externalIPs), comma
                          separated; "none" disables the tc path                   [devices holding a node address]
  --tc-attach MODE        auto | tcx | clsact                                      [auto: TCX where the kernel has it]
  --tc-conntrack-lookup M auto | off: ask the kernel's conntrack before taking a packet that cannot start a flow [auto: when the kernel has bpf_skb_ct_lookup]
  --masquerade-bit B      skb->mark bit asking for masquerade (a single bit)       [0x1000]
  --masquerade-ports R    source ports of masqueraded flows (above the NodePort range) [32768-65535]
  --node-port-range R     the cluster's NodePort range, reserved for the node's own local ports [30000-32767]
  --iptables-mode M       auto | nft | legacy                                      [auto: whichever the host uses]
  --skip-sysctls          leave ip_forward / send_redirects alone
  --map-dynamic-size-ratio R  share of the node's memory for the preallocated tables below (flows,
                          reverse translations, affinity); 0 = the fixed sizes in brackets [${DEFAULT_MAP_SIZE_RATIO}]
  --ct-entries N          flow entries of the tc path per family (two per flow)    [from memory; ${DEFAULTS.ctEntries}]
  --revnat-entries N      reverse translations of UDP sockets, per family             [from memory; ${DEFAULTS.revnatEntries}]
  --affinity-entries N    sessionAffinity entries                                  [from memory; ${DEFAULTS.affinityEntries}]
  --udp-socket-destroy on|off  destroy connected UDP sockets whose backend left every Service   [on]
  --maglev-table-size M   Maglev table size, a prime in ${MAGLEV_PRIMES[0]}…${MAGLEV_PRIMES[MAGLEV_PRIMES.length - 1]}   [${DEFAULT_MAGLEV_SIZE}]
  --maglev-fixed          every table has exactly M slots; default sizes each table from its
                          backend count (>= 100 slots per backend) with M as the upper bound
  --max-services N        capacity of the service maps                             [${DEFAULTS.maxServices}]
  --bpf-objects DIR       directory of sock_lb.o, tc_lb.o, sock_destroy.o        [the package's bpf/]
  --max-backends N        capacity of the backend map                              [${DEFAULTS.maxBackends}]
  --service-proxy-name S  only handle Services labelled service.kubernetes.io/service-proxy-name=S
  --resync-interval SEC   compare the maps with the desired state and repair drift every SEC s; 0 = off   [60]
  --health-timeout SEC    /healthz, /readyz and --healthz-addr answer 503 once a change has waited SEC s
                          for a successful sync (kube-proxy: 2 × its sync period)              [60]
  --metrics-service-cap N per-Service-port counter series at most; the rest sum under service="_other"    [1000]
  --metrics-backend-cap N per-backend counter series at most; the rest sum under backend="_other"         [1000]
  --stats-interval SEC    while /v1/stats is asked for, sample the counters every SEC s for its rates;     [10]
                          0 = off
  --heap-growth PCT       let the JavaScript heap grow to (1 + PCT/100) × what is live before
                          a full collection (V8's own choice is up to 4×: ~1 GiB resident at
                          10,000 Services under churn for ~270 MiB live)                   [20]
  --heap-reclaim MIB      once resident memory has grown by MIB since the last time and no change
                          came for 5 s, one memory-reducing full collection gives the freed heap
                          back (first sync, relists, bursts); 0 = off                      [64]
  --log-level L           pino level                                               [info]

Inspection (maps, status, drift) asks the agent's API at --api-addr [${DEFAULT_API_ADDR}] or --api-socket; with --bpf-root
it reads the pinned maps directly instead (root; no agent needed). SVC for maglev: namespace/name[:port]
or a svc id. flows and affinity are paginated: every page is fetched unless --limit is given.
`;

const agentOptions = {
  'node-name': { type: 'string' },
  source: { type: 'string' },
  kubeconfig: { type: 'string' },
  apiserver: { type: 'string' },
  'token-file': { type: 'string' },
  'ca-file': { type: 'string' },
  'watch-stall-timeout': { type: 'string' },
  cgroup: { type: 'string' },
  'bpf-root': { type: 'string' },
  'api-addr': { type: 'string' },
  'api-socket': { type: 'string' },
  'healthz-addr': { type: 'string' },
  'metrics-addr': { type: 'string' },
  bpffs: { type: 'string' },
  devices: { type: 'string' },
  'tc-attach': { type: 'string' },
  'tc-conntrack-lookup': { type: 'string' },
  'masquerade-bit': { type: 'string' },
  'masquerade-ports': { type: 'string' },
  'node-port-range': { type: 'string' },
  'iptables-mode': { type: 'string' },
  'skip-sysctls': { type: 'boolean' },
  'ct-entries': { type: 'string' },
  'revnat-entries': { type: 'string' },
  'affinity-entries': { type: 'string' },
  'map-dynamic-size-ratio': { type: 'string' },
  'udp-socket-destroy': { type: 'string' },
  'maglev-table-size': { type: 'string' },
  'maglev-fixed': { type: 'boolean' },
  'max-services': { type: 'string' },
  'bpf-objects': { type: 'string' },
  'max-backends': { type: 'string' },
  'service-proxy-name': { type: 'string' },
  'log-level': { type: 'string' },
  'resync-interval': { type: 'string' },
  'health-timeout': { type: 'string' },
  'metrics-service-cap': { type: 'string' },
  'metrics-backend-cap': { type: 'string' },
  'stats-interval': { type: 'string' },
  'heap-growth': { type: 'string' },
  'heap-reclaim': { type: 'string' },
  rate: { type: 'boolean' },
  interval: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
  service: { type: 'string' },
  backend: { type: 'string' },
  limit: { type: 'string' },
  continue: { type: 'string' },
  raw: { type: 'boolean' },
  full: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  output: { type: 'string', short: 'o' },
  prefix: { type: 'string' },
  ...FLOW_OPTIONS,
  problems: { type: 'boolean' },
} as const;

/** The options each command takes: any other given on the command line is an error, not ignored. */
const AGENT_ONLY = Object.keys(agentOptions).filter(
  (k) => !['rate', 'interval', 'namespace', 'service', 'backend', 'limit', 'continue', 'raw', 'full', 'output', 'prefix', 'probe', 'from', 'to', 'proto', 'node-client', 'cookie', 'problems'].includes(k),
);
const ADDRESS = ['api-addr', 'api-socket', 'bpf-root', 'output', 'help'];
const SOURCE = ['source', 'kubeconfig', 'apiserver', 'token-file', 'ca-file', 'node-name', 'cgroup', 'service-proxy-name'];
const COMMAND_OPTIONS: Record<string, readonly string[]> = {
  agent: AGENT_ONLY,
  prepare: ['bpffs', 'cgroup', 'node-port-range', 'help'],
  cleanup: ['bpf-root', 'cgroup', 'help'],
  status: ADDRESS,
  maps: [...ADDRESS, 'namespace', 'service', 'backend', 'raw', 'full', 'limit', 'continue'],
  drift: ADDRESS,
  explain: [...ADDRESS, ...SOURCE, 'probe', 'from', 'problems'],
  trace: [...ADDRESS, ...SOURCE, 'to', 'from', 'proto', 'node-client', 'cookie'],
  stats: [...ADDRESS, 'namespace', 'service', 'rate', 'interval'],
  snapshot: [...ADDRESS, ...SOURCE],
};

/** The options given on the command line that `cmd` does not take. */
export function foreignOptions(cmd: string, given: Record<string, unknown>): string[] {
  const allowed = COMMAND_OPTIONS[cmd];
  if (!allowed) return [];
  return Object.keys(given).filter((k) => given[k] !== undefined && !allowed.includes(k));
}

type Opts = { [K in keyof typeof agentOptions]?: (typeof agentOptions)[K]['type'] extends 'boolean' ? boolean : string };

function fromEnv(values: Opts, skip: string[] = []): Opts {
  const out: Record<string, unknown> = { ...values };
  for (const k of Object.keys(agentOptions)) {
    if (skip.includes(k)) continue;
    const env = process.env[`SWITCHYARD_${k.toUpperCase().replace(/-/g, '_')}`];
    if (out[k] === undefined && env !== undefined) out[k] = agentOptions[k as keyof typeof agentOptions].type === 'boolean' ? env === 'true' || env === '1' : env;
  }
  return out as Opts;
}

function intOpt(v: string | undefined, name: string, def: number): number {
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, got ${JSON.stringify(v)}`);
  return n;
}

function splitAddr(a: string): { host: string; port: number } {
  const i = a.lastIndexOf(':');
  const port = Number(a.slice(i + 1));
  if (i < 0 || !Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`bad address ${JSON.stringify(a)}: want HOST:PORT`);
  return { host: a.slice(0, i).replace(/^\[|\]$/g, ''), port };
}

/**
 * Every agent flag parsed and checked, before anything touches the node: a bad
 * flag is an error naming it, never a half-started agent (no pin made, no
 * hook attached). Unit-tested without root (test/unit/agent-config.test.ts).
 */
export function agentConfig(o: Opts, runningInCluster: () => boolean = inCluster) {
  if (!o['node-name']) throw new Error('--node-name is required (see --help)');
  const nodeName = o['node-name'];
  const heapGrowth = intOpt(o['heap-growth'], 'heap-growth', 20);
  const heapReclaimMiB = o['heap-reclaim'] === undefined ? 64 : Number(o['heap-reclaim']);
  if (!Number.isInteger(heapReclaimMiB) || heapReclaimMiB < 0) throw new Error(`--heap-reclaim must be MiB, an integer >= 0, got ${JSON.stringify(o['heap-reclaim'])}`);
  const sourceKind = o.source ?? (o.kubeconfig || o.apiserver || runningInCluster() ? 'kube' : undefined);
  if (!sourceKind || !(sourceKind.startsWith('file:') || sourceKind === 'kube')) throw new Error('--source file:PATH, --source kube, --kubeconfig or --apiserver is required (see --help)');
  const stallSec = intOpt(o['watch-stall-timeout'], 'watch-stall-timeout', 150);
  const maglevSize = intOpt(o['maglev-table-size'], 'maglev-table-size', DEFAULT_MAGLEV_SIZE);
  if (!isValidTableSize(maglevSize)) throw new Error(`--maglev-table-size must be one of ${MAGLEV_PRIMES.join(', ')}`);
  const bpfRoot = o['bpf-root'] ?? '/sys/fs/bpf/switchyard';
  const api = splitAddr(o['api-addr'] ?? DEFAULT_API_ADDR);
  const healthzAddr = o['healthz-addr'] ?? '0.0.0.0:10256';
  const healthz = healthzAddr === 'off' ? undefined : splitAddr(healthzAddr);
  const tcOff = o.devices === 'none';
  const devices = o.devices === undefined || tcOff ? undefined : o.devices.split(',').map((d) => d.trim()).filter(Boolean);
  const attachMode = (o['tc-attach'] ?? 'auto') as TcAttachMode;
  if (!['auto', 'tcx', 'clsact'].includes(attachMode)) throw new Error('--tc-attach must be auto, tcx or clsact');
  const iptablesMode = (o['iptables-mode'] ?? 'auto') as 'auto' | IptablesMode;
  if (!['auto', 'nft', 'legacy'].includes(iptablesMode)) throw new Error('--iptables-mode must be auto, nft or legacy');
  const masqMark = o['masquerade-bit'] === undefined ? DEFAULT_MASQ_MARK : Number(o['masquerade-bit']);
  if (!Number.isInteger(masqMark) || masqMark <= 0 || masqMark > 0xffffffff || (masqMark & (masqMark - 1)) !== 0) {
    throw new Error(`--masquerade-bit must be a single bit such as 0x1000, got ${JSON.stringify(o['masquerade-bit'])}`);
  }
  const masqPorts = o['masquerade-ports'] ?? DEFAULT_MASQ_PORTS;
  if (!/^\d+-\d+$/.test(masqPorts)) throw new Error('--masquerade-ports must be a range such as 32768-65535');
  const nodePortRange = o['node-port-range'] ?? '30000-32767';
  const npr = /^(\d+)-(\d+)$/.exec(nodePortRange);
  if (!npr || Number(npr[1]) < 1 || Number(npr[1]) > Number(npr[2]) || Number(npr[2]) > 65535) {
    throw new Error(`--node-port-range must be a port range such as 30000-32767, got ${JSON.stringify(nodePortRange)}`);
  }
  const ratio = o['map-dynamic-size-ratio'] === undefined ? DEFAULT_MAP_SIZE_RATIO : Number(o['map-dynamic-size-ratio']);
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 0.5) throw new Error(`--map-dynamic-size-ratio must be a share of the node's memory, 0 to 0.5, got ${JSON.stringify(o['map-dynamic-size-ratio'])}`);
  const flag = (k: 'ct-entries' | 'revnat-entries' | 'affinity-entries') => (o[k] === undefined ? undefined : intOpt(o[k], k, 0));
  const mapSizing = sizeMaps({
    ratio,
    memTotalBytes: ratio > 0 ? memTotalBytes() : 0,
    flags: { ctEntries: flag('ct-entries'), revnatEntries: flag('revnat-entries'), affinityEntries: flag('affinity-entries') },
    defaults: DEFAULTS,
  });
  const sizes = {
    maxServices: intOpt(o['max-services'], 'max-services', DEFAULTS.maxServices),
    maxBackends: intOpt(o['max-backends'], 'max-backends', DEFAULTS.maxBackends),
    ...mapSizing.sizes,
  };
  const udpDestroy = o['udp-socket-destroy'] ?? 'on';
  if (udpDestroy !== 'on' && udpDestroy !== 'off') throw new Error(`--udp-socket-destroy must be on or off, got ${JSON.stringify(udpDestroy)}`);
  const ctLookup = o['tc-conntrack-lookup'] ?? 'auto';
  if (ctLookup !== 'auto' && ctLookup !== 'off') throw new Error(`--tc-conntrack-lookup must be auto or off, got ${JSON.stringify(ctLookup)}`);
  const resyncSec = o['resync-interval'] === undefined ? 60 : Number(o['resync-interval']);
  if (!Number.isFinite(resyncSec) || resyncSec < 0) throw new Error(`--resync-interval must be a number of seconds >= 0, got ${JSON.stringify(o['resync-interval'])}`);
  const healthTimeoutSec = o['health-timeout'] === undefined ? DEFAULT_HEALTH_TIMEOUT_MS / 1000 : Number(o['health-timeout']);
  if (!Number.isFinite(healthTimeoutSec) || healthTimeoutSec <= 0) throw new Error(`--health-timeout must be a number of seconds > 0, got ${JSON.stringify(o['health-timeout'])}`);
  const statsSec = o['stats-interval'] === undefined ? 10 : Number(o['stats-interval']);
  if (!Number.isFinite(statsSec) || statsSec < 0) throw new Error(`--stats-interval must be a number of seconds >= 0, got ${JSON.stringify(o['stats-interval'])}`);
  const metricsAddr = o['metrics-addr'] && o['metrics-addr'] !== 'off' ? splitAddr(o['metrics-addr']) : undefined;
  const serviceCap = intOpt(o['metrics-service-cap'], 'metrics-service-cap', 1000);
  const backendCap = intOpt(o['metrics-backend-cap'], 'metrics-backend-cap', 1000);
  return {
    nodeName, heapGrowth, heapReclaimMiB, sourceKind, stallSec, maglevSize, bpfRoot, api, healthzAddr, healthz, tcOff, devices, attachMode, iptablesMode,
    masqMark, masqPorts, nodePortRange, sizes, mapSizing, udpDestroy: udpDestroy as 'on' | 'off', objDir: o['bpf-objects'], ctLookup: ctLookup as 'auto' | 'off',
    resyncSec, healthTimeoutSec, statsSec, metricsAddr, serviceCap, backendCap,
  };
}

async function runAgent(o: Opts): Promise<number> {
  const {
    nodeName, heapGrowth, heapReclaimMiB, sourceKind, stallSec, maglevSize, bpfRoot, api, healthzAddr, healthz, tcOff, devices, attachMode, iptablesMode,
    masqMark, masqPorts, nodePortRange, sizes, mapSizing, udpDestroy, objDir, ctLookup, resyncSec, healthTimeoutSec, statsSec, metricsAddr, serviceCap, backendCap,
  } = agentConfig(o);
  // Resident memory follows the heap's size, which V8 lets grow to a multiple of what is live
  // when the program allocates fast (an event storm); a bounded factor keeps it near the live size.
  if (heapGrowth > 0) setFlagsFromString(`--heap-growing-percent=${heapGrowth}`);
  if (o.cgroup !== undefined && !existsSync(o.cgroup)) throw new Error(`--cgroup ${o.cgroup} does not exist`);
  const cgroupPath = o.cgroup === undefined ? findCgroup2Root() : resolveCgroup2(o.cgroup);
  const logRing = new LogRing();
  const logger = ringLogger(logRing, { level: o['log-level'] ?? 'info', base: { node: nodeName } });
  const datapath = SocketLbDatapath.load({ bpfRoot, cgroupPath, ...sizes, ...(objDir ? { objectPath: join(objDir, 'sock_lb.o') } : {}) });
  const tc = tcOff ? undefined : TcDatapath.load({ bpfRoot, masqMark, conntrackLookup: ctLookup, objectDir: objDir, ...sizes });
  logger.info({ mapSizing }, `map sizes: ${describeSizing(mapSizing)}`);
  for (const m of migrations) logger.warn(m, `pinned map ${m.map} migrated (${m.reasons.join('; ')}): ${m.copied} entries ${m.converted ? 'converted' : 'copied'}, ${m.dropped} dropped; the old programs serve until the new ones are attached`);
  if (tc && !tc.conntrackLookup.enabled) logger.warn({ reason: tc.conntrackLookup.reason }, 'tc path without kernel conntrack lookups: replies to other NATs on NodePort ports are protected only by the TCP start rule and local sockets');
  const sizing = { size: maglevSize, auto: !o['maglev-fixed'] };
  const reconciler = new Reconciler(datapath, sizing);
  const names = PinnedNames.openForWrite(bpfRoot, datapath.opts.maxServices, datapath.opts.maxBackends);
  const registry = new Registry();
  const metrics = agentMetrics(registry);
  let source: Source;
  if (sourceKind === 'kube') {
    source = new KubeSource({
      kubeConfig: await loadApiConfig({ kubeconfig: o.kubeconfig, apiserver: o.apiserver, tokenFile: o['token-file'], caFile: o['ca-file'] }),
      nodeName,
      serviceProxyName: o['service-proxy-name'],
      logger: logger.child({ component: 'kube-source' }),
      metrics: { watchRestarts: metrics.sourceWatchRestarts, errors: metrics.sourceErrors, relists: metrics.sourceRelists },
      stallMs: stallSec * 1000,
    });
  } else {
    source = new FileSource(sourceKind.slice('file:'.length), (e) => {
      metrics.sourceErrors.inc({ resource: 'file' });
      if (e instanceof FileParseError) logger.error({ file: e.file, line: e.line, column: e.column }, `${e.message}; keeping the last good state`);
      else logger.warn({ err: e }, 'file source');
    });
  }
  // Health is recorded by the agent and read by the health check ports, :10256 and the API: made first, so none waits for another.
  const health = new HealthTracker({ timeoutMs: healthTimeoutSec * 1000, detachedHooks: () => datapath.detachedHooks() });
  const hcServers = new HealthCheckServers(() => health.serving(), logger);
  const northSouth = tc
    ? new NorthSouth({ tc, devices, attachMode, iptablesMode, masqMark, masqPorts, nodePortRange, manageSysctls: !o['skip-sysctls'], healthChecks: hcServers, logger })
    : undefined;
  const reaperOrWhy = udpDestroy === 'off' ? { unavailable: 'switched off (--udp-socket-destroy off)' } : SocketReaper.load(bpfRoot, datapath.opts, objDir ? join(objDir, 'sock_destroy.o') : undefined);
  const reaper = reaperOrWhy instanceof SocketReaper ? reaperOrWhy : undefined;
  if (!reaper) logger.warn({ reason: (reaperOrWhy as { unavailable: string }).unavailable }, 'connected UDP sockets to removed backends will not be destroyed');
  // After large applies, one memory-reducing collection gives the freed heap back (src/agent/heap.ts).
  const gc = heapReclaimMiB > 0 ? lastResortGc() : undefined;
  if (heapReclaimMiB > 0 && !gc) logger.warn('this Node.js gives no memory-reducing collection: --heap-reclaim is off');
  const heap = gc
    ? new HeapReclaimer({ gc, trim: () => native().mallocTrim(), growthBytes: heapReclaimMiB * 2 ** 20, quietMs: 5000, logger, record: (sec, freed) => { metrics.heapReclaims.inc(); metrics.heapReclaimPause.set(sec); metrics.heapReclaimedBytes.inc(freed); } })
    : undefined;
  const agent = new Agent({
    nodeName, source, datapath, reconciler, logger, metrics, serviceProxyName: o['service-proxy-name'],
    names, resyncIntervalMs: resyncSec * 1000, northSouth, health, heap,
    mapSizing, reaper, reaperUnavailable: reaper ? undefined : (reaperOrWhy as { unavailable: string }).unavailable,
  });
  const maps = datapathMaps(datapath);
  const currentNames = () => resolveNames({ reconciler: () => reconciler.namesView(), pinned: names });
  datapathMetrics(registry, {
    maps, names: currentNames,
    serviceCap,
    backendCap,
  });
  const sampler = new StatsSampler(maps, statsSec * 1000);
  if (tc) registerTcMetrics(registry, tc);
  registerMigrationMetrics(registry, () => migrations);
  const features = probeFeatures();
  const diagnose = {
    input: async () => {
      const snapshot = agent.latestSnapshot();
      const model = agent.latestDesired();
      return snapshot && { snapshot, source: `agent: ${source.describe()}`, ...(model ? { desired: model.desired, node: model.node } : {}) };
    },
    nodeName,
    serviceProxyName: o['service-proxy-name'],
    // The cheap comparison (which inner map each slot holds); explain compares this Service's tables itself.
    drift: () => agent.driftAsync({ deepTables: false }),
    notProgrammed: () => agent.notProgrammedEntries(),
    external: () => {
      const ns = northSouth?.status();
      return ns && { closed: ns.lastExternalSync?.closed, tcPending: ns.pendingReason };
    },
    fetchService: source.getService ? (ns: string, name: string) => source.getService!(ns, name) : undefined,
    cgroup: cgroupPath,
  };
  const appDeps = { agent, maps, names: currentNames, drift: () => agent.driftAsync(), registry, features, version: packageVersion(), diagnose, logs: logRing, stats: sampler };
  const apps = [buildApp(appDeps)];
  // :10256 as kube-proxy's: /healthz for load balancers (ready and healthy), /livez (healthy).
  const proxyHealth = new ProxyHealthServer(...agentProxyHealth(agent));
  // Every listener the flags ask for, or none: the agent does not run half-served.
  const listeners: ListenerSpec[] = [
    { flag: '--api-addr', address: o['api-addr'] ?? DEFAULT_API_ADDR, open: () => apps[0].listen({ host: api.host, port: api.port }), close: () => apps[0].close() },
  ];
  const apiSocket = o['api-socket'];
  if (apiSocket) {
    const app = buildApp(appDeps);
    apps.push(app);
    listeners.push({
      flag: '--api-socket', address: apiSocket,
      open: () => {
        if (existsSync(apiSocket)) unlinkSync(apiSocket);
        return app.listen({ path: apiSocket });
      },
      close: () => app.close(),
    });
  }
  if (healthz) listeners.push({ flag: '--healthz-addr', address: healthzAddr, open: () => proxyHealth.listen(healthz.host, healthz.port), close: () => proxyHealth.close() });
  let metricsServer: Awaited<ReturnType<typeof listenMetrics>> | undefined;
  if (metricsAddr) {
    listeners.push({
      flag: '--metrics-addr', address: o['metrics-addr']!,
      open: async () => (metricsServer = await listenMetrics(registry, metricsAddr.host, metricsAddr.port)),
      close: () => metricsServer?.close(),
    });
  }
  try {
    await openListeners(listeners);
  } catch (e) {
    if (!(e instanceof ListenError)) throw e;
    logger.fatal({ flag: e.flag, address: e.address, code: e.code }, e.message);
    names.close();
    tc?.close();
    reaper?.close();
    datapath.close();
    return 1;
  }
  logger.info(
    { api: `${api.host}:${api.port}`, apiSocket: o['api-socket'], healthz: healthzAddr, metrics: o['metrics-addr'] ?? 'off', cgroup: cgroupPath, bpfRoot, source: source.describe(), tc: tcOff ? 'off' : (devices ?? 'auto'), maglev: { size: maglevSize, auto: !o['maglev-fixed'] } },
    'agent started',
  );
  await agent.start();
  sampler.start();

  await new Promise<void>((resolve) => {
    const stop = (sig: string) => {
      logger.info({ signal: sig }, 'stopping; pinned programs and maps keep serving');
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  sampler.stop();
  await agent.stop();
  for (const a of apps) await a.close();
  await proxyHealth.close();
  metricsServer?.close();
  await hcServers.close();
  names.close();
  tc?.close();
  reaper?.close();
  datapath.close();
  return 0;
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  const { values, positionals } = parseArgs({ args: rest, options: agentOptions, allowPositionals: true, strict: true });
  const foreign = foreignOptions(cmd, values);
  if (foreign.length) throw new Error(`${cmd} takes no ${foreign.map((k) => `--${k}`).join(', ')} (see --help)`);
  // Inspection reads the pins only when asked on the command line: in the agent's pod the
  // environment names its --bpf-root, yet the running agent's API is the view to show.
  let o = fromEnv(values as Opts, ['status', 'maps', 'drift', 'explain', 'trace', 'stats', 'snapshot'].includes(cmd) ? ['bpf-root'] : []);
  // Inspection commands reach an agent's unix socket through the same address option.
  if (cmd !== 'agent' && o['api-socket'] && !o['api-addr']) o = { ...o, 'api-addr': `unix:${o['api-socket']}` };
  if (!cmd || cmd === 'help' || cmd === '--help' || cmd === '-h' || o.help) {
    process.stdout.write(HELP);
    return 0;
  }
  switch (cmd) {
    case 'agent':
      return runAgent(o);
    case 'prepare': {
      for (const line of prepareNode({ bpffs: o.bpffs ?? '/sys/fs/bpf', cgroup: o.cgroup, sysctls: true, nodePortRange: o['node-port-range'] ?? '30000-32767' })) console.log(`prepare: ${line}`);
      return 0;
    }
    case 'cleanup': {
      const bpfRoot = o['bpf-root'] ?? '/sys/fs/bpf/switchyard';
      const removed = cleanupDatapath(bpfRoot);
      console.log(removed.length ? `removed ${removed.length} pins under ${bpfRoot} (hooks detached)` : `nothing to clean under ${bpfRoot}`);
      for (const r of [...cleanupTcFilters(), ...removeMasqRules()]) console.log(`removed ${r}`);
      return 0;
    }
    case 'status':
      return statusCommand(o);
    case 'maps':
      return mapsCommand(positionals[0], positionals[1], o);
    case 'drift':
      return driftCommand(o);
    case 'explain':
      if (positionals.length > 1) throw new Error(`explain: one Service at a time, got ${positionals.join(' ')}`);
      return explainCommand(positionals[0], o);
    case 'snapshot':
      if (positionals.length) throw new Error(`snapshot: unexpected ${positionals.join(' ')} (give the file with -o FILE)`);
      return snapshotCommand(o);
    case 'stats':
      if (positionals.length) throw new Error(`stats: unexpected ${positionals.join(' ')} (filter with --namespace / --service)`);
      return statsCommand(o);
    case 'trace':
      if (positionals.length) throw new Error(`trace: unexpected ${positionals.join(' ')} (give --to ADDR:PORT)`);
      return traceCommand(o);
    default:
      throw new Error(`unknown command ${JSON.stringify(cmd)} (see --help)`);
  }
}
