// The bench's chart, drawn as plain SVG text (no dependency): datapath
// connection rate against N, the two control-plane timings against N on log
// scales, and the agent's memory beside the real kube-proxy's. A missing point is a skipped measurement (over the time budget).
import { isOp, type Op } from './cp-netfilter.ts';
import { isRealSkipped, type RealKpResult, type RealProxy } from './kube-proxy-real.ts';
import { fmtN } from './report.ts';
import { type BenchResults, isAgentResult, modeResult } from './results.ts';

interface Series {
  name: string;
  color: string;
  dashed?: boolean;
  /** By N; undefined = not measured. */
  values: Array<number | undefined>;
}

interface Panel {
  title: string;
  yLabel: string;
  log: boolean;
  xs: number[];
  series: Series[];
  fmt: (v: number) => string;
}

const H = 470;
const PW = 380;
const PH = 290;
const TOP = 70;
const LEFT0 = 70;
const GAP = 40;
const COLORS = { direct: '#6b7280', svcmap: '#2563eb', svcmap2: '#60a5fa', iptables: '#ea580c', iptables2: '#fb923c', nftables: '#16a34a' };

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function niceMax(v: number): number {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function panel(p: Panel, x0: number): string {
  const out: string[] = [];
  const y0 = TOP;
  const all = p.series.flatMap((s) => s.values.filter((v): v is number => v !== undefined && v > 0));
  let lo = 0;
  let hi = niceMax(Math.max(1, ...all) * 1.08);
  if (p.log) {
    lo = 10 ** Math.floor(Math.log10(Math.min(...all, hi)));
    hi = 10 ** Math.ceil(Math.log10(Math.max(...all, lo * 10)));
  }
  const sy = (v: number) =>
    p.log ? y0 + PH - ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * PH : y0 + PH - ((v - lo) / (hi - lo)) * PH;
  const step = p.xs.length > 1 ? PW / (p.xs.length - 1) : 0;
  const sx = (i: number) => (p.xs.length > 1 ? x0 + i * step : x0 + PW / 2);

  out.push(`<text x="${x0 + PW / 2}" y="${y0 - 28}" text-anchor="middle" font-size="15" font-weight="600">${esc(p.title)}</text>`);
  out.push(`<rect x="${x0}" y="${y0}" width="${PW}" height="${PH}" fill="#fafafa" stroke="#d1d5db"/>`);
  // y grid + ticks
  const ticks: number[] = [];
  if (p.log) for (let v = lo; v <= hi * 1.0001; v *= 10) ticks.push(v);
  else for (let i = 0; i <= 5; i++) ticks.push(lo + ((hi - lo) * i) / 5);
  for (const v of ticks) {
    const y = sy(v);
    out.push(`<line x1="${x0}" y1="${y.toFixed(1)}" x2="${x0 + PW}" y2="${y.toFixed(1)}" stroke="#e5e7eb"/>`);
    out.push(`<text x="${x0 - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end" font-size="11" fill="#374151">${esc(p.fmt(v))}</text>`);
  }
  out.push(
    `<text transform="translate(${x0 - 56},${y0 + PH / 2}) rotate(-90)" text-anchor="middle" font-size="12" fill="#374151">${esc(p.yLabel)}</text>`,
  );
  // x ticks
  p.xs.forEach((n, i) => {
    out.push(`<text x="${sx(i).toFixed(1)}" y="${y0 + PH + 18}" text-anchor="middle" font-size="12" fill="#374151">${fmtN(n)}</text>`);
  });
  out.push(`<text x="${x0 + PW / 2}" y="${y0 + PH + 38}" text-anchor="middle" font-size="12" fill="#374151">services (N)</text>`);
  // series
  for (const s of p.series) {
    const pts = s.values.map((v, i) => (v !== undefined && v > 0 ? [sx(i), sy(v)] : undefined));
    let path = '';
    let pen = false;
    for (const pt of pts) {
      if (!pt) {
        pen = false;
        continue;
      }
      path += `${pen ? 'L' : 'M'}${pt[0]!.toFixed(1)},${pt[1]!.toFixed(1)} `;
      pen = true;
    }
    if (path)
      out.push(`<path d="${path.trim()}" fill="none" stroke="${s.color}" stroke-width="2.2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`);
    for (const pt of pts) if (pt) out.push(`<circle cx="${pt[0]!.toFixed(1)}" cy="${pt[1]!.toFixed(1)}" r="3.5" fill="${s.color}"/>`);
  }
  // legend
  p.series.forEach((s, i) => {
    const ly = y0 + PH + 58 + Math.floor(i / 2) * 18;
    const lx = x0 + (i % 2) * (PW / 2);
    out.push(
      `<line x1="${lx}" y1="${ly - 4}" x2="${lx + 22}" y2="${ly - 4}" stroke="${s.color}" stroke-width="2.5"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`,
    );
    out.push(`<text x="${lx + 28}" y="${ly}" font-size="11.5" fill="#111827">${esc(s.name)}</text>`);
  });
  return out.join('\n');
}

/** Log-scale ticks are powers of ten: 1 µs, 10 ms, 1 s, 100 s. */
function fmtPow10(ms: number): string {
  const r = (x: number) => String(Number(x.toPrecision(1)));
  if (ms < 1) return `${r(ms * 1000)} µs`;
  if (ms < 1000) return `${r(ms)} ms`;
  return `${r(ms / 1000)} s`;
}

const opMs = (o: Op | undefined) => (o && isOp(o) ? o.ms : undefined);

export function chartSvg(r: BenchResults & { realKubeProxy?: RealKpResult }): string {
  const dxs = r.datapath.map((p) => p.n);
  const dp: Panel = {
    title: 'Datapath: connections per second',
    yLabel: 'connections / s (higher is better)',
    log: false,
    xs: dxs,
    fmt: (v) => (v >= 1000 ? `${(v / 1000).toFixed(v >= 10_000 ? 0 : 1)}k` : v.toFixed(0)),
    series: [
      {
        name: 'direct to pod (floor)',
        color: COLORS.direct,
        dashed: true,
        values: r.datapath.map((p) => modeResult(p, 'direct')?.connPerSec),
      },
      { name: 'svcmap socket LB', color: COLORS.svcmap, values: r.datapath.map((p) => modeResult(p, 'svcmap')?.connPerSec) },
      { name: 'kube-proxy iptables', color: COLORS.iptables, values: r.datapath.map((p) => modeResult(p, 'iptables')?.connPerSec) },
      { name: 'kube-proxy nftables', color: COLORS.nftables, values: r.datapath.map((p) => modeResult(p, 'nftables')?.connPerSec) },
    ],
  };
  const cp = r.controlPlane;
  const cxs = cp?.netfilter.map((p) => p.n) ?? [];
  const agent = (n: number) => {
    const a = cp?.agent.find((x) => x.n === n);
    return a && isAgentResult(a) ? a : undefined;
  };
  const e = cp?.endpointsPerService ?? 10;
  const full: Panel = {
    title: `Program N services x ${e} endpoints`,
    yLabel: 'time (log scale, lower is better)',
    log: true,
    xs: cxs,
    fmt: fmtPow10,
    series: [
      { name: 'svcmap agent sync', color: COLORS.svcmap, values: cxs.map((n) => agent(n)?.fullSyncMs) },
      { name: 'svcmap agent start -> synced', color: COLORS.svcmap2, dashed: true, values: cxs.map((n) => agent(n)?.startToSyncMs) },
      { name: 'iptables-restore --noflush', color: COLORS.iptables, values: cp?.netfilter.map((p) => opMs(p.iptables.fullNoflush)) ?? [] },
      {
        name: 'iptables-restore (replace)',
        color: COLORS.iptables2,
        dashed: true,
        values: cp?.netfilter.map((p) => opMs(p.iptables.fullReplace)) ?? [],
      },
      { name: 'nft -f', color: COLORS.nftables, values: cp?.netfilter.map((p) => opMs(p.nftables.full)) ?? [] },
    ],
  };
  const change: Panel = {
    title: 'One endpoint change',
    yLabel: 'time (log scale, lower is better)',
    log: true,
    xs: cxs,
    fmt: fmtPow10,
    series: [
      { name: 'svcmap agent (API -> maps, p50)', color: COLORS.svcmap, values: cxs.map((n) => agent(n)?.change.wallP50) },
      {
        name: 'svcmap engine (partial sync)',
        color: COLORS.svcmap2,
        dashed: true,
        values: cxs.map((n) => cp?.engine.find((x) => x.n === n)?.changePartialMs.p50),
      },
      { name: 'iptables full restore', color: COLORS.iptables, values: cp?.netfilter.map((p) => opMs(p.iptables.changeFull)) ?? [] },
      {
        name: 'iptables partial restore',
        color: COLORS.iptables2,
        dashed: true,
        values: cp?.netfilter.map((p) => opMs(p.iptables.changePartial)) ?? [],
      },
      { name: 'nft delta', color: COLORS.nftables, values: cp?.netfilter.map((p) => opMs(p.nftables.changeDelta)) ?? [] },
    ],
  };
  const real = (n: number, proxy: RealProxy) => {
    const x = r.realKubeProxy?.points.find((p) => p.n === n)?.proxies.find((y) => y.proxy === proxy);
    return x && !isRealSkipped(x) ? x.rssAfterSync / 2 ** 20 : undefined;
  };
  const mxs = [...new Set([...(cp?.agent.map((a) => a.n) ?? []), ...(r.realKubeProxy?.points.map((p) => p.n) ?? [])])].sort(
    (a, b) => a - b,
  );
  const memory: Panel = {
    title: `Agent memory, N services x ${e} endpoints`,
    yLabel: 'RSS after the first sync, MiB (lower is better)',
    log: false,
    xs: mxs,
    fmt: (v) => v.toFixed(0),
    series: [
      {
        name: 'svcmap agent (bench API server)',
        color: COLORS.svcmap,
        values: mxs.map((n) => {
          const a = agent(n);
          return a ? a.rssAfterSync / 2 ** 20 : undefined;
        }),
      },
      { name: 'svcmap agent (real kube-apiserver)', color: COLORS.svcmap2, dashed: true, values: mxs.map((n) => real(n, 'svcmap')) },
      { name: 'kube-proxy iptables (real)', color: COLORS.iptables, values: mxs.map((n) => real(n, 'iptables')) },
      { name: 'kube-proxy nftables (real)', color: COLORS.nftables, values: mxs.map((n) => real(n, 'nftables')) },
    ],
  };
  const panels = [...(r.datapath.length ? [dp] : []), ...(cp?.netfilter.length ? [full, change] : []), ...(mxs.length ? [memory] : [])];
  const W = Math.max(780, LEFT0 + panels.length * (PW + GAP + 40) - 50); // the header line needs ~780 px
  const m = r.machine;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="${W}" height="${H}" fill="#ffffff"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="13" fill="#4b5563">${esc(`svcmap vs kube-proxy shapes - ${m.cpuModel}, ${m.vcpus} vCPUs, Linux ${m.kernel}, ${r.startedAt.slice(0, 10)}${r.mode === 'smoke' ? ' (smoke sizes)' : ''}; a missing point = skipped (over the time budget)`)}</text>`,
    ...panels.map((p, i) => panel(p, LEFT0 + i * (PW + GAP + 40))),
    '</svg>',
    '',
  ];
  return parts.join('\n');
}
