/**
 * Line charts as SVG text, for the benchmark report: one series per line,
 * logarithmic x axis (number of Services), linear or logarithmic y axis.
 * Written by hand to keep the report free of chart libraries.
 */

export interface Series {
  name: string;
  /** [x, y]; points whose y is not a finite number are skipped. */
  points: [number, number][];
  color: string;
  dashed?: boolean;
}

export interface ChartSpec {
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  logY?: boolean;
  width?: number;
  height?: number;
}

export const COLORS = { switchyard: '#1b7f3b', iptables: '#c0392b', nftables: '#2471a3', direct: '#7f8c8d' } as const;

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function fmt(v: number): string {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toPrecision(3)}k`;
  if (a >= 1) return `${+v.toPrecision(3)}`;
  return `${+v.toPrecision(2)}`;
}

/** "Nice" linear ticks covering [lo, hi]. */
function linearTicks(lo: number, hi: number, want = 5): number[] {
  if (hi <= lo) hi = lo + 1;
  const raw = (hi - lo) / want;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  for (let v = Math.floor(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}

function logTicks(lo: number, hi: number): number[] {
  const out: number[] = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) out.push(10 ** e);
  return out;
}

export function lineChart(spec: ChartSpec): string {
  const W = spec.width ?? 640;
  const H = spec.height ?? 380;
  const m = { l: 70, r: 170, t: 36, b: 50 };
  const pw = W - m.l - m.r;
  const ph = H - m.t - m.b;
  const pts = spec.series.flatMap((s) => s.points.filter(([x, y]) => x > 0 && Number.isFinite(y) && (!spec.logY || y > 0)));
  const xs = pts.map(([x]) => x);
  const ys = pts.map(([, y]) => y);
  const xlo = xs.length ? Math.min(...xs) : 1;
  const xhi = xs.length ? Math.max(...xs) : 10;
  const xt = logTicks(xlo, xhi === xlo ? xlo * 10 : xhi);
  const [x0, x1] = [Math.log10(xt[0]), Math.log10(xt[xt.length - 1])];
  let yt: number[];
  if (spec.logY) {
    yt = logTicks(ys.length ? Math.min(...ys) : 1, ys.length ? Math.max(...ys) : 10);
  } else {
    yt = linearTicks(0, ys.length ? Math.max(...ys) * 1.05 : 1);
  }
  const [y0, y1] = spec.logY ? [Math.log10(yt[0]), Math.log10(yt[yt.length - 1])] : [yt[0], yt[yt.length - 1]];
  const X = (x: number) => m.l + ((Math.log10(x) - x0) / (x1 - x0 || 1)) * pw;
  const Y = (y: number) => m.t + ph - (((spec.logY ? Math.log10(y) : y) - y0) / (y1 - y0 || 1)) * ph;
  const o: string[] = [];
  o.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  o.push(`<rect x="0" y="0" width="${W}" height="${H}" fill="white"/>`);
  o.push(`<text x="${m.l}" y="20" font-size="14" font-weight="bold">${esc(spec.title)}</text>`);
  for (const t of xt) {
    const x = X(t).toFixed(1);
    o.push(`<line x1="${x}" y1="${m.t}" x2="${x}" y2="${m.t + ph}" stroke="#e5e5e5"/>`);
    o.push(`<text x="${x}" y="${m.t + ph + 16}" text-anchor="middle">${fmt(t)}</text>`);
  }
  for (const t of yt) {
    const y = Y(t).toFixed(1);
    o.push(`<line x1="${m.l}" y1="${y}" x2="${m.l + pw}" y2="${y}" stroke="#e5e5e5"/>`);
    o.push(`<text x="${m.l - 6}" y="${(+y + 4).toFixed(1)}" text-anchor="end">${fmt(t)}</text>`);
  }
  o.push(`<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" fill="none" stroke="#333"/>`);
  o.push(`<text x="${m.l + pw / 2}" y="${H - 10}" text-anchor="middle">${esc(spec.xLabel)}</text>`);
  o.push(`<text x="16" y="${m.t + ph / 2}" text-anchor="middle" transform="rotate(-90 16 ${m.t + ph / 2})">${esc(spec.yLabel)}</text>`);
  spec.series.forEach((s, i) => {
    const p = s.points.filter(([x, y]) => x > 0 && Number.isFinite(y) && (!spec.logY || y > 0)).sort((a, b) => a[0] - b[0]);
    const dash = s.dashed ? ' stroke-dasharray="6 4"' : '';
    if (p.length > 0) {
      o.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2"${dash} points="${p.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(' ')}"/>`);
      for (const [x, y] of p) o.push(`<circle cx="${X(x).toFixed(1)}" cy="${Y(y).toFixed(1)}" r="3" fill="${s.color}"/>`);
    }
    const ly = m.t + 10 + i * 18;
    o.push(`<line x1="${m.l + pw + 12}" y1="${ly}" x2="${m.l + pw + 36}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/>`);
    o.push(`<text x="${m.l + pw + 42}" y="${ly + 4}">${esc(s.name)}</text>`);
  });
  o.push('</svg>');
  return o.join('\n') + '\n';
}
