/**
 * JSON schemas of the REST API: request validation (400 with a message on a
 * bad parameter), fast serialisation, and the OpenAPI document.
 */
import { PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX } from '../dataplane/tables.js';

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

export const servicesResponse = { type: 'object', properties: { items: { type: 'array', items: serviceItem } } } as const;

const backendItem = {
  type: 'object',
  properties: {
    id: int, address: str, port: int, protocol: str, family: int, ...names, node: nstr,
    state: { type: 'string', enum: ['ready', 'terminating'] }, local: bool, raw,
  },
} as const;

export const backendsResponse = { type: 'object', properties: { items: { type: 'array', items: backendItem } } } as const;

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

const pageOf = (item: object) =>
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
  properties: { name: str, type: str, keySize: int, valueSize: int, capacity: int, entries: { ...nint, description: 'null for arrays (always full)' } },
} as const;

const count3 = { type: 'object', properties: { backends: int, tables: int, services: int } } as const;

export const statusResponse = {
  type: 'object',
  properties: {
    node: str,
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
    rejected: {
      type: 'array',
      items: { type: 'object', properties: { kind: str, namespace: str, name: str, reason: str } },
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
        iptables: { type: 'object', properties: { mode: str, why: str, rules: int } },
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
      },
    },
  },
} as const;
