/**
 * JSON schemas of the REST API: request validation (400 with a message on a
 * bad parameter), fast serialisation, and the OpenAPI document.
 */
import { PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX } from '../read/tables.js';

const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;
const bool = { type: 'boolean' } as const;
const nstr = { type: ['string', 'null'] } as const;
const nint = { type: ['integer', 'null'] } as const;

export const errorSchema = {
  type: 'object',
  properties: { statusCode: int, error: str, message: str },
} as const;

const raw = { type: 'object', properties: { key: str, value: str }, description: 'map key and value bytes, hex' } as const;

const names = {
  namespace: { ...nstr, description: 'Service namespace (null: no name recorded for this id)' },
  service: { ...nstr, description: 'Service name' },
  portName: { ...nstr, description: "the Service port's name ('' for an unnamed port)" },
} as const;

const filterProps = {
  namespace: { type: 'string', minLength: 1, maxLength: 63, description: 'only entries of Services in this namespace' },
  service: { type: 'string', minLength: 1, maxLength: 63, description: 'only entries of Services with this name' },
} as const;

const backendFilter = {
  backend: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[0-9a-fA-F.:\\[\\]]+$', description: 'backend id, address, or address:port ([v6]:port)' },
} as const;

const rawQ = { raw: { type: 'boolean', default: false, description: 'add the raw key and value bytes (hex)' } } as const;

export const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { ...filterProps, ...backendFilter, ...rawQ },
} as const;

export const pageQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    ...filterProps,
    ...backendFilter,
    ...rawQ,
    limit: { type: 'integer', minimum: 1, maximum: PAGE_LIMIT_MAX, default: PAGE_LIMIT_DEFAULT, description: `page size (at most ${PAGE_LIMIT_MAX})` },
    continue: { type: 'string', minLength: 1, maxLength: 512, pattern: '^[A-Za-z0-9_-]+$', description: 'token from the previous page' },
  },
} as const;

export const noQuery = { type: 'object', additionalProperties: false, properties: {} } as const;

const serviceItem = {
  type: 'object',
  properties: {
    svcId: int,
    ...names,
    type: { ...nstr, description: 'ClusterIP, NodePort, LoadBalancer or ExternalIP' },
    scope: { type: 'string', enum: ['internal', 'external'] },
    family: int,
    address: str,
    port: int,
    protocol: str,
    flags: { type: 'array', items: str },
    affinityTimeoutSec: int,
    backendCount: int,
    maglevSize: int,
    backends: {
      type: 'array',
      items: {
        type: 'object',
        properties: { id: int, address: nstr, port: nint, node: nstr, state: { type: 'string', enum: ['ready', 'terminating', 'missing'] }, local: bool, slots: int },
      },
    },
    counters: { type: 'object', properties: { translations: int, refused: int, packets: int, bytes: int } },
    raw,
  },
} as const;

export const servicesResponse = {
  type: 'object',
  properties: { items: { type: 'array', items: serviceItem }, continue: { type: ['string', 'null'], description: 'pass as ?continue= for the next page; null on the last page' } },
} as const;

const backendItem = {
  type: 'object',
  properties: {
    id: int, address: str, port: int, protocol: str, family: int, ...names, node: nstr,
    state: { type: 'string', enum: ['ready', 'terminating'] }, local: bool,
    counters: {
      type: 'object',
      description: 'sy_be_stats summed over CPUs: connections (and datagram destinations, new external flows); tc path: refused (the backend reset a new TCP flow), packets and bytes client → backend',
      properties: { connections: int, refused: int, packets: int, bytes: int },
    },
    raw,
  },
} as const;

export const backendsResponse = {
  type: 'object',
  properties: { items: { type: 'array', items: backendItem }, continue: { type: ['string', 'null'], description: 'pass as ?continue= for the next page; null on the last page' } },
} as const;

export const maglevParams = {
  type: 'object',
  required: ['svc'],
  properties: {
    svc: { type: 'string', minLength: 1, maxLength: 160, description: 'a svc id, or namespace/name[:port-name] (URL-encoded: default%2Fweb%3Ahttp)' },
  },
} as const;

export const maglevQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { full: { type: 'boolean', default: false, description: 'include the whole table (backend id per slot)' } },
} as const;

export const maglevResponse = {
  type: 'object',
  properties: {
    items: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          svcId: int, ...names, address: str, port: int, protocol: str, scope: str,
          m: { type: 'integer', description: 'table size M (0: no backend, no table)' },
          backends: { type: 'array', items: { type: 'object', properties: { id: int, address: nstr, port: nint, slots: int, share: { type: 'number' } } } },
          table: { type: 'array', items: int },
        },
      },
    },
  },
} as const;

const pageOf = <const I>(item: I) =>
  ({
    type: 'object',
    properties: {
      items: { type: 'array', items: item },
      continue: { ...nstr, description: 'pass as ?continue= for the next page; null on the last page' },
      note: str,
    },
  }) as const;

export const affinityResponse = pageOf({
  type: 'object',
  properties: {
    client: { type: 'string', description: 'network namespace cookie of the client' },
    svcId: int, ...names, backendId: int, backend: nstr, idleSec: { type: 'number' }, expired: bool, raw,
  },
});

export const flowsResponse = pageOf({
  type: 'object',
  properties: {
    map: str,
    fields: { type: 'object', additionalProperties: { type: ['string', 'integer'] }, description: 'key and value fields by their C names' },
    svcId: nint, ...names, backendId: nint, backend: nstr, raw,
  },
});

export const driftResponse = {
  type: 'object',
  properties: {
    inSync: bool,
    items: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          map: str,
          key: str,
          service: { type: 'string', description: 'the Service port the entry belongs to, when known' },
          expected: {},
          actual: {},
          kind: { type: 'string', enum: ['missing', 'unexpected', 'differs'] },
        },
      },
    },
  },
} as const;

const mapStat = {
  type: 'object',
  properties: { name: str, type: str, keySize: int, valueSize: int, capacity: int, entries: { ...nint, description: 'null for arrays (always full)' }, full: { type: 'boolean', description: 'at capacity: a hash map refuses new entries, an LRU table evicts the least recently used' } },
} as const;

const count3 = { type: 'object', properties: { backends: int, tables: int, services: int } } as const;

/** /v1/status?maps=false: everything but the map occupancy, whose count walks every entry of every map (pollers of the sync state want this). */
export const statusQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    maps: { type: 'boolean', default: true, description: 'count the entries of every pinned map (a walk of every entry: at 50,000 Services ~0.2 s of CPU); false leaves maps out' },
  },
} as const;

export const statusResponse = {
  type: 'object',
  properties: {
    node: str,
    version: { type: 'string', description: "the agent's version (its package.json)" },
    ready: bool,
    bpfRoot: str,
    attached: {
      type: 'array',
      description: 'hooks this agent attached (how: created, or updated in a pinned link)',
      items: { type: 'object', properties: { program: str, attachType: str, linkId: int, progId: int, how: str } },
    },
    links: {
      type: 'array',
      description: 'links pinned under bpfRoot/links, as the kernel reports them now',
      items: { type: 'object', properties: { pin: str, linkId: int, progId: int, attachType: nstr } },
    },
    kernel: {
      type: 'object',
      properties: {
        kernel: str, libbpf: str, vmlinuxBtf: bool, batchOps: bool, innerMapVarSize: bool, bpfStats: bool, possibleCpus: int,
      },
    },
    maps: { type: 'array', items: mapStat },
    source: {
      type: 'object',
      properties: {
        kind: str, appliedVersion: str, lastSnapshotAt: str,
        resources: {
          type: 'array',
          description: 'Kubernetes API source: list+watch state per resource',
          items: {
            type: 'object',
            properties: { resource: str, synced: bool, resourceVersion: str, objects: int, watching: bool, lastError: str, lastErrorAt: str },
          },
        },
        parseErrors: {
          type: 'array',
          description: 'file source: files that are not valid YAML; the last good state stays applied until they are fixed',
          items: { type: 'object', properties: { file: str, line: int, column: int, message: str } },
        },
      },
    },
    lastSync: {
      type: 'object',
      properties: {
        at: str, durationMs: { type: 'number' }, frontends: int, backends: int, written: count3, deleted: count3,
        model: { type: 'string', enum: ['delta', 'full'], description: 'delta: only the Services the source said changed were recomputed and compared; full: every Service' },
        changedServices: { ...int, description: 'with model delta: how many Services were looked at' },
        errors: { type: 'array', items: { type: 'object', properties: { frontend: str, servicePort: str, reason: str } } },
      },
    },
    resync: {
      type: 'object',
      properties: {
        intervalSec: { type: 'number' }, lastAt: str, lastRepaired: int, runs: int,
      },
    },
    socketReaper: {
      type: 'object',
      description: 'destruction of connected UDP sockets whose backend left every Service (bpf/sock_destroy.c)',
      properties: {
        enabled: bool,
        unavailable: str,
        last: { type: 'object', properties: { at: str, backends: int, namespaces: int, destroyed: int, failed: int, ms: { type: 'number' } } },
      },
    },
    notProgrammed: {
      type: 'object',
      description: 'entries the last sync could not write (a full map, ENOMEM, ids exhausted): retried with backoff until they are; health turns 503 after --health-timeout',
      properties: { count: int, entries: { type: 'array', items: { type: 'object', properties: { frontend: str, servicePort: str, reason: str } } } },
    },
    rejected: {
      type: 'array',
      items: { type: 'object', properties: { kind: str, namespace: str, name: str, reason: str } },
    },
    mapMigrations: {
      type: 'array',
      description: 'pinned maps this agent migrated at start because a new build changed their layout or new flags their size (docs/operations.md, Upgrading); not ready until each has finishedAt',
      items: {
        type: 'object',
        properties: {
          map: str, role: { type: 'string', enum: ['desired', 'state', 'counters', 'sockets', 'retired'] }, reasons: { type: 'array', items: str },
          fromEntries: int, toEntries: int, copied: int, dropped: int, refreshed: int, late: int, converted: bool,
          startedAt: str, finishedAt: str, durationMs: { type: 'number' },
        },
      },
    },
    mapSizing: {
      type: 'object',
      description: "how the preallocated tables were sized: a share (ratio) of the node's memory, within floors and caps, unless a flag gave the size (source per table)",
      properties: {
        ratio: { type: 'number' }, memTotalBytes: int, budgetBytes: int, bytes: int,
        sizes: { type: 'object', properties: { ctEntries: int, revnatEntries: int, affinityEntries: int } },
        source: { type: 'object', properties: { ctEntries: str, revnatEntries: str, affinityEntries: str } },
      },
    },
    health: {
      type: 'object',
      description: 'what /healthz and /readyz answer: healthy unless a change waited longer than --health-timeout for a successful sync or the hooks were detached',
      properties: { healthy: bool, ready: bool, reason: str, lastUpdated: str, pendingSince: str, lastError: str },
    },
    northSouth: {
      type: 'object',
      description: 'the tc path (docs/north-south.md); absent when the agent runs without it (--devices none)',
      properties: {
        devices: { type: 'array', items: str },
        attached: {
          type: 'array',
          items: { type: 'object', properties: { device: str, ifindex: int, direction: str, mode: str, progId: int, how: str } },
        },
        pendingReason: str,
        iptables: { type: 'object', properties: { mode: str, why: str, rules: int, ipv6Error: { ...str, description: 'why the IPv6 masquerade rules could not be written (the IPv4 path is attached anyway)' } } },
        sysctls: { type: 'object', additionalProperties: str },
        healthCheckPorts: { type: 'array', items: { type: 'object', properties: { port: int, service: str, localEndpoints: int } } },
        lastExternalSync: {
          type: 'object',
          properties: {
            written: { type: 'object', properties: { flags: int, ranges: int } },
            deleted: { type: 'object', properties: { flags: int, ranges: int } },
            errors: { type: 'array', items: str },
            closed: { type: 'array', items: str, description: 'external frontends not served because their entries could not be written (fail closed)' },
          },
        },
        counters: { type: 'object', description: 'sy_tc_stats by event, summed over CPUs', additionalProperties: str },
        conntrackLookup: {
          type: 'object',
          description: 'whether the tc programs ask the kernel\'s conntrack before taking a packet that cannot start a flow (bpf_skb_ct_lookup), and why not',
          properties: { enabled: bool, reason: str },
        },
      },
    },
  },
} as const;

// ---------------------------------------------------------------- explain, trace, logs, node

const open = <const P extends object = Record<never, never>>(description: string, properties: P = {} as P) => ({ type: 'object', description, properties, additionalProperties: true }) as const;

const verdict = {
  type: 'object',
  properties: {
    code: {
      type: 'string',
      enum: [
        'ok', 'no-such-service', 'ignored', 'rejected', 'no-such-port', 'no-endpoints', 'none-ready', 'target-port-not-found',
        'endpoints-elsewhere', 'not-programmed', 'source-range-excludes-client', 'backend-not-answering', 'frontend-not-answering',
      ],
    },
    text: str,
    port: str,
  },
} as const;

export const explainListQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { problems: { type: 'boolean', default: false, description: 'only Services whose verdict is not OK' } },
} as const;

export const explainListResponse = {
  type: 'object',
  properties: {
    node: str,
    source: nstr,
    items: { type: 'array', items: { type: 'object', properties: { namespace: str, name: str, verdict } } },
  },
} as const;

export const explainParams = {
  type: 'object',
  required: ['svc'],
  properties: { svc: { type: 'string', minLength: 3, maxLength: 160, description: 'namespace/name[:port] (port name or number), URL-encoded: default%2Fweb%3Ahttp' } },
} as const;

export const explainQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    probe: { type: 'boolean', default: false, description: 'connect from this node to every backend and frontend and say which answered' },
    from: { type: 'string', minLength: 2, maxLength: 45, pattern: '^[0-9a-fA-F.:]+$', description: 'a client address to check against loadBalancerSourceRanges' },
  },
} as const;

export const explainResponse = open('One Service on this node, top to bottom (docs/operations.md, "explain")', {
  service: open('the Service asked about'),
  node: open('this node: name, zone, addresses'),
  source: { ...nstr, description: 'where the objects came from; null: the maps only' },
  object: { ...open('the Service as the agent sees it'), type: ['object', 'null'] },
  ignored: { type: 'string', description: 'why the agent does not look at the Service' },
  rejected: { type: 'array', items: str },
  slices: { type: 'array', items: open('an EndpointSlice with every endpoint: conditions, node, zone, hints') },
  ports: { type: 'array', items: open('a Service port: endpoints, the frontends of this node with the backends in use and the reason for every endpoint not used, the kernel entries, per-backend counters, drift') },
  healthCheck: open('the health check node port: what the objects count and what it answers'),
  probe: { type: 'array', items: open('one connection attempt from this node: kind, target, protocol, port, result, ms') },
  from: str,
  notes: { type: 'array', items: str },
  verdict,
});

export const traceQuery = {
  type: 'object',
  additionalProperties: false,
  required: ['to'],
  properties: {
    to: { type: 'string', minLength: 3, maxLength: 60, description: 'ADDR:PORT ([v6]:PORT) the client dials' },
    from: { type: 'string', minLength: 2, maxLength: 60, description: 'the client: ADDR or ADDR:PORT ([v6]:PORT)' },
    protocol: { type: 'string', enum: ['TCP', 'UDP', 'tcp', 'udp'], default: 'TCP' },
    nodeClient: { type: 'boolean', default: false, description: 'the client runs on this node (a pod or the node itself): the socket hooks' },
    cookie: { type: 'string', pattern: '^([0-9]{1,20}|0x[0-9a-fA-F]{1,16})$', description: 'socket path, UDP: the socket cookie (decimal or 0x-hex; ss -e prints it as sk:HEX), which picks the Maglev slot' },
  },
} as const;

export const traceResponse = open('What this node does with one flow (docs/operations.md, "trace")', {
  query: open('the flow asked about'),
  path: { type: 'string', enum: ['tc', 'socket'] },
  frontend: { ...open('the matching service entry'), type: ['object', 'null'] },
  ownership: open('tc path: which packets of the flow switchyard takes (docs/north-south.md, "What the tc path owns") and the node\'s ownership counters', {
    rule: str,
    counters: { type: 'object', additionalProperties: str },
  }),
  flow: open('tc path: the flow state (sy_ct4/6)'),
  sourceRange: open('loadBalancerSourceRanges and whether the client is inside'),
  affinity: open('sessionAffinity'),
  maglev: open('hash, slot and backend id, or the candidates with their shares when the slot cannot be known'),
  backend: open('the backend picked'),
  outcome: open('forward, refuse, drop or pass, and why; masquerade or not', { action: { type: 'string', enum: ['forward', 'refuse', 'drop', 'pass'] }, text: str, counter: str, masquerade: bool }),
});

export const logsQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { limit: { type: 'integer', minimum: 1, maximum: 100000, description: 'the last N lines' } },
} as const;

export const logsResponse = {
  type: 'object',
  properties: { lines: { type: 'array', items: str }, dropped: { type: 'integer', description: 'lines no longer kept (the ring is bounded)' } },
} as const;

export const nodeResponse = open('Kernel, programs, conntrack, switchyard\'s iptables rules', {
  hostname: str,
  kernel: open('uname'),
  features: open('kernel features found'),
  links: { type: 'array', items: open('a pinned link') },
  programs: { type: ['array', 'null'], items: open('a program (bpftool)') },
  conntrack: open('nf_conntrack_count and nf_conntrack_max'),
  iptables: { type: 'array', items: open('switchyard\'s rules per iptables-save binary') },
  notes: { type: 'array', items: str },
});

// ---------------------------------------------------------------- stats

export const statsQuery = { type: 'object', additionalProperties: false, properties: { ...filterProps } } as const;

const counters4 = { type: 'object', properties: { connections: { type: 'number' }, refused: { type: 'number' }, packets: { type: 'number' }, bytes: { type: 'number' } } } as const;

export const statsResponse = {
  type: 'object',
  properties: {
    at: str,
    rateWindowSec: { type: ['number', 'null'], description: 'seconds the rates are computed over (null: no sample yet)' },
    items: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          ...names,
          protocol: str,
          frontends: { type: 'array', items: str },
          totals: { ...counters4, description: 'connections translated, refused for want of a backend, tc-path packets and bytes (summed over the frontends)' },
          rates: { ...counters4, description: 'per second' },
          backends: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                id: int, address: nstr, port: nint, node: nstr, state: str,
                share: { type: 'number', description: 'Maglev table share (what the backend should get)' },
                connections: { type: 'number' }, refused: { type: 'number', description: 'tc path: new TCP flows the backend reset' }, packets: { type: 'number' }, bytes: { type: 'number' },
                rates: counters4,
              },
            },
          },
          skew: { ...nstr, description: 'set when one backend gets far more than its share' },
        },
      },
    },
  },
} as const;
