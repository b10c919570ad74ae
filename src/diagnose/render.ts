/**
 * The readable (table) form of explain and trace reports: one screen, top to
 * bottom in the order the debugging goes, ending in the verdict.
 */
import { hostPort } from '../read/entries.js';
import { table } from '../cli/read.js';
import type { ExplainReport, FrontendReport, PortReport } from './explain.js';
import type { TraceReport } from './trace.js';

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const yes = (b: boolean) => (b ? 'yes' : 'no');

/** 1234567 → "1.2M" (counters in tables). */
export function human(n: number): string {
  if (n < 10_000) return String(n);
  for (const [d, u] of [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']] as const) if (n >= d) return `${(n / d).toFixed(1)}${u}`;
  return String(n);
}

function indent(text: string, by = '  '): string {
  return text
    .split('\n')
    .map((l) => (l ? by + l : l))
    .join('\n');
}

function frontendLines(f: FrontendReport): string[] {
  const lines: string[] = [];
  const head = `${f.type} ${hostPort(f.address, f.port)}/${f.protocol} ${f.scope}`;
  const policy = `policy ${f.policy}${f.topology ? `, topology ${f.topology}` : ''}${f.sourceRanges.length ? `, source ranges ${f.sourceRanges.join(', ')}` : ''}`;
  lines.push(`${head}   ${policy}`);
  const be = f.backends.map((b) => `${hostPort(b.address, b.port)}${b.node ? ` (${b.node}${b.state === 'terminating' ? ', terminating' : ''})` : ''}`);
  lines.push(`  in use     ${be.length ? be.join(', ') : '(none)'}`);
  for (const u of f.unused) lines.push(`  not used   ${u.port === null ? u.address : hostPort(u.address, u.port)}${u.node ? ` (${u.node})` : ''}: ${u.reason}`);
  if (f.kernel) {
    const k = f.kernel;
    const c = k.counters;
    const traffic = f.scope === 'external' ? `, ${human(c.packets)} packets, ${human(c.bytes)} bytes` : '';
    lines.push(
      `  kernel     svc ${k.svcId}: ${k.backendCount} backend${k.backendCount === 1 ? '' : 's'}, ${k.maglevSize ? `Maglev M=${k.maglevSize}` : 'no table'}${k.flags.length ? `, ${k.flags.join(',')}` : ''}${k.affinityTimeoutSec ? `, affinity ${k.affinityTimeoutSec}s` : ''}; ${human(c.translations)} translated, ${human(c.refused)} refused${traffic}`,
    );
  } else lines.push('  kernel     (no entry)');
  for (const p of f.problems) lines.push(`  problem    ${p}`);
  return lines;
}

function portBlock(p: PortReport, kernelOnly: boolean): string {
  const lines: string[] = [];
  const target = p.targetPort !== null ? ` → targetPort ${typeof p.targetPort === 'string' ? JSON.stringify(p.targetPort) : p.targetPort}` : '';
  const np = p.nodePort ? `, nodePort ${p.nodePort}` : '';
  const states = Object.entries(p.endpointStates).map(([k, n]) => `${n} ${k}`).join(', ');
  lines.push(
    `Port ${p.name || '(unnamed)'}  ${p.port}/${p.protocol}${target}${np}   ${kernelOnly ? `${p.endpoints} backend(s) in the maps` : `${p.endpoints} endpoint${p.endpoints === 1 ? '' : 's'}${states ? ` (${states})` : ''}`}`,
  );
  for (const u of p.unused) lines.push(`  not usable ${u.port === null ? u.address : hostPort(u.address, u.port)}${u.node ? ` (${u.node})` : ''}: ${u.reason}`);
  for (const f of p.frontends) lines.push(...frontendLines(f).map((l) => `  ${l}`));
  if (p.frontends.length === 0 && !kernelOnly) lines.push('  (no frontend on this node)');
  if (p.backendCounters.length) {
    lines.push('  per backend (kernel counters):');
    lines.push(
      indent(
        table(
          p.backendCounters.map((b) => ({
            id: b.id,
            backend: b.address === null ? '(missing)' : hostPort(b.address, b.port ?? 0),
            node: b.node,
            state: b.state,
            share: pct(b.share),
            connections: human(b.connections),
            refused: human(b.refused),
            packets: human(b.packets),
            bytes: human(b.bytes),
          })),
          ['id', 'backend', 'node', 'state', 'share', 'connections', 'refused', 'packets', 'bytes'],
        ),
        '    ',
      ),
    );
  }
  for (const d of p.drift) lines.push(`  drift      ${d.kind} ${d.map} ${d.key}`);
  return lines.join('\n');
}

export function renderExplain(r: ExplainReport): string {
  const out: string[] = [];
  const sk = `${r.service.namespace}/${r.service.name}${r.service.port ? `:${r.service.port}` : ''}`;
  out.push(`Service      ${sk}   on node ${r.node.name}${r.node.zone ? ` (zone ${r.node.zone})` : ''}   objects: ${r.source ?? 'none (the maps only)'}`);
  const o = r.object;
  if (o) {
    out.push(`  type       ${o.type}   cluster IPs ${o.clusterIPs.join(', ') || '-'}`);
    out.push(
      `  ports      ${o.ports.map((p) => `${p.name || '(unnamed)'} ${p.port}/${p.protocol} → ${p.targetPort === null ? '-' : p.targetPort}${p.nodePort ? ` (nodePort ${p.nodePort})` : ''}`).join('; ') || '-'}`,
    );
    out.push(`  selector   ${o.selector ? Object.entries(o.selector).map(([k, v]) => `${k}=${v}`).join(',') : '(none: EndpointSlices are managed by hand)'}`);
    out.push(`  policies   internalTrafficPolicy ${o.internalTrafficPolicy ?? 'Cluster'}, externalTrafficPolicy ${o.externalTrafficPolicy ?? '-'}, sessionAffinity ${o.sessionAffinity ? `ClientIP (${o.sessionAffinity.timeoutSec} s)` : 'None'}`);
    const ext: string[] = [];
    if (o.externalIPs.length) ext.push(`externalIPs ${o.externalIPs.join(', ')}`);
    if (o.loadBalancerIngress.length) ext.push(`LoadBalancer ${o.loadBalancerIngress.map((i) => `${i.ip ?? i.hostname}${i.ipMode ? ` (${i.ipMode})` : ''}`).join(', ')}`);
    if (o.loadBalancerSourceRanges.length) ext.push(`source ranges ${o.loadBalancerSourceRanges.join(', ')}`);
    if (o.healthCheckNodePort) ext.push(`healthCheckNodePort ${o.healthCheckNodePort}`);
    if (ext.length) out.push(`  external   ${ext.join('; ')}`);
    if (Object.keys(o.proxyLabels).length) out.push(`  labels     ${Object.entries(o.proxyLabels).map(([k, v]) => `${k}=${v}`).join(', ')}`);
  }
  if (r.ignored) out.push(`  ignored    ${r.ignored}`);
  for (const x of r.rejected) out.push(`  rejected   ${x}`);
  if (r.slices.length || o) {
    out.push('', `EndpointSlices (${r.slices.length})`);
    for (const s of r.slices) {
      out.push(`  ${s.name}  ${s.addressType}  ports ${s.ports.map((p) => `${p.name || '""'} ${p.port}/${p.protocol}`).join(', ') || '(none)'}${s.ignored ? `  (ignored: ${s.ignored})` : ''}`);
      if (s.endpoints.length) {
        out.push(
          indent(
            table(
              s.endpoints.map((e) => ({
                address: e.address, ready: yes(e.ready), serving: yes(e.serving), terminating: yes(e.terminating), node: e.node, zone: e.zone,
                hints: e.hints ? [...e.hints.zones.map((z) => `zone:${z}`), ...e.hints.nodes.map((n) => `node:${n}`)].join(',') : '',
              })),
              ['address', 'ready', 'serving', 'terminating', 'node', 'zone', 'hints'],
            ),
            '    ',
          ),
        );
      } else out.push('    (no endpoints)');
      for (const x of s.rejected) out.push(`    rejected: ${x}`);
    }
  }
  const kernelOnly = r.source === null;
  for (const p of r.ports) out.push('', portBlock(p, kernelOnly));
  if (r.healthCheck) {
    const h = r.healthCheck;
    const answer = h.answer ? `answers ${h.answer.status}${h.answer.localEndpoints !== undefined ? ` (localEndpoints ${h.answer.localEndpoints})` : ''}` : `no answer (${h.error ?? 'not asked'})`;
    out.push('', `Health check node port ${h.port}: ${h.localEndpoints} local ready endpoint(s) by the objects; ${answer}`);
  }
  if (r.probe) {
    out.push('', `Probe from ${r.node.name}:`);
    out.push(
      indent(
        table(
          r.probe.map((p) => ({ kind: p.kind, target: p.target, proto: p.protocol, port: p.port, result: p.result, ms: p.ms.toFixed(1), detail: p.detail })),
          ['kind', 'target', 'proto', 'port', 'result', 'ms', 'detail'],
        ),
      ),
    );
  }
  if (r.from) out.push('', `Client: ${r.from}`);
  for (const n of r.notes) out.push(`note: ${n}`);
  out.push('', `Verdict: ${r.verdict.text}`);
  return out.join('\n');
}

export function renderTrace(t: TraceReport): string {
  const out: string[] = [];
  const who = t.query.client === 'node' ? 'a client on this node (socket hooks)' : 'a client outside the cluster, arriving on this node (tc path)';
  out.push(`trace      ${t.query.from ?? '(any client)'} → ${t.query.to}, ${who}`);
  const f = t.frontend;
  if (f) {
    const name = f.service ? `${f.namespace}/${f.service}:${f.portName}` : '(no name recorded)';
    out.push(
      `frontend   ${f.type ?? '?'} ${hostPort(f.address, f.port)}/${f.protocol} ${f.scope}  ${name}  svc ${f.svcId}: ${f.backendCount} backend(s), M=${f.maglevSize}${f.externalTrafficPolicyLocal ? ', externalTrafficPolicy Local' : ''}${f.flags.length ? `, ${f.flags.join(',')}` : ''}`,
    );
  } else out.push('frontend   (none)');
  if (t.ownership) {
    out.push(`owns       ${t.ownership.rule}`);
    const c = Object.entries(t.ownership.counters);
    if (c.length) out.push(`           on this node so far: ${c.map(([k, v]) => `${k} ${v}`).join(', ')}`);
  }
  if (t.flow) {
    out.push(
      t.flow.state === 'none'
        ? 'flow       no state for this 5-tuple: a new flow'
        : `flow       existing → ${t.flow.backend} (backend ${t.flow.backendId}; ${t.flow.flags.join(',') || 'no flags'}); ${t.flow.usable ? 'kept' : 'not kept'}: ${t.flow.why}`,
    );
  }
  if (t.sourceRange) out.push(`source     loadBalancerSourceRanges ${t.sourceRange.ranges.join(', ')}: ${t.sourceRange.allowed ? 'the client is inside' : 'the client is outside'}`);
  if (t.affinity) {
    const a = t.affinity;
    if (!a.on) out.push('affinity   off');
    else if (a.client === null) out.push(`affinity   ClientIP per client network namespace: ${a.entries ?? 0} sticky client(s) of this Service; a client with a fresh entry goes to its backend`);
    else out.push(`affinity   ClientIP, client ${a.client}: ${a.entry ? `entry → ${a.entry.backend ?? `#${a.entry.backendId} (gone)`}, idle ${a.entry.idleSec} s${a.entry.fresh ? '' : ' (expired: a new choice)'}` : 'no entry: a new choice, remembered'}`);
  }
  if (t.maglev) {
    const m = t.maglev;
    if (m.known) out.push(`maglev     hash ${m.hash} of (${m.input}) → slot ${m.slot} of M=${m.m} → backend ${m.backendId}`);
    else {
      out.push(`maglev     ${m.why}:`);
      out.push(indent(table(m.candidates.map((c) => ({ id: c.id, backend: c.backend ?? '(missing)', slots: c.slots, share: pct(c.share) })), ['id', 'backend', 'slots', 'share']), '             '));
    }
  }
  if (t.backend) out.push(`backend    ${hostPort(t.backend.address, t.backend.port)} (id ${t.backend.id}, ${t.backend.node ?? 'node unknown'}, ${t.backend.state}, ${t.backend.local ? 'on this node' : 'on another node'})`);
  out.push(`next       ${t.outcome.action}: ${t.outcome.text}${t.outcome.counter ? ` [counter ${t.outcome.counter}]` : ''}`);
  return out.join('\n');
}
