// svcmap status: what is loaded and attached, and how full each map is.
// Reads the pins only, so it answers whether or not the agent runs.
import { closeSync, existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { cgroup2Mounts } from '../bpf/environment.ts';
import { ATTACH_TYPE_NAMES, LINK_TYPE_CGROUP, LINK_TYPE_TCX, linkInfo, openPinned, progInfoById } from '../bpf/link.ts';
import { linkPinDir } from '../bpf/loader.ts';
import { classicTcProgram, ifIndex, interfaceNames } from '../bpf/tc.ts';
import { BpfMap, MAP_TYPE_NAMES } from '../bpf/map.ts';
import { readDatapathCounters } from '../maps/datapath-counters.ts';
import { ALL_MAPS, devAddr6Map, devAddrMap, metricsMap } from '../maps/registry.ts';
import { TypedMap } from '../maps/typed-map.ts';
import { command, parseFlags, pinDirFlag } from './args.ts';
import { formatData, outputFlag } from './format.ts';
import { pinDirExists, withPinAccess } from './pin-access.ts';

export const statusCommand = command({
  name: 'status',
  summary: 'attached programs, map fill levels, SNAT addresses, datapath counters',
  description: 'Lists the attached programs and where they are attached (cgroup, tcx or tc), each map\'s fill level, the SNAT address of each device (svcmap_devaddr), and the datapath\'s counters that are not zero (svcmap_datapath_packets_total: per hook, what became of the packets).',
  flags: { output: outputFlag(['table', 'json', 'yaml']), 'pin-dir': pinDirFlag },
});

export interface StatusReport {
  pinDir: string;
  programs: Array<{ link: string; program: string; progId: number; tag: string; attachType: string; attachedTo: string; mode: string }>;
  maps: Array<{ name: string; type: string; entries: number; maxEntries: number; fill: string; purpose: string }>;
  /** The datapath counters that are not zero, summed over the CPUs. */
  counters: Array<{ hook: string; reason: string; packets: number; drop: boolean }>;
  /** svcmap_devaddr: the address a flow SNATed out of each device takes (device: its name here, if it has one). */
  snatAddresses: Array<{ ifindex: number; device?: string; addr: string }>;
}

/** The cgroup directory whose id (inode) is `id`, searched under the cgroup v2 mounts. */
function cgroupPathById(id: bigint): string | undefined {
  const walk = (dir: string, depth: number): string | undefined => {
    if (statSync(dir, { bigint: true }).ino === id) return dir;
    if (depth === 0) return undefined;
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return undefined;
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      const hit = walk(join(dir, e.name), depth - 1);
      if (hit) return hit;
    }
    return undefined;
  };
  for (const m of cgroup2Mounts()) {
    const hit = walk(m, 6);
    if (hit) return hit;
  }
  return undefined;
}

export function collectStatus(pinDir: string): StatusReport {
  const report: StatusReport = { pinDir, programs: [], maps: [], counters: [], snatAddresses: [] };
  const linkDir = linkPinDir(pinDir);
  if (existsSync(linkDir)) {
    for (const name of readdirSync(linkDir).sort()) {
      const fd = openPinned(join(linkDir, name));
      if (fd === undefined) continue;
      try {
        const info = linkInfo(fd);
        const prog = progInfoById(info.progId);
        const attachedTo = info.type === LINK_TYPE_CGROUP
          ? `cgroup ${cgroupPathById(info.target) ?? `id ${info.target}`}`
          : info.type === LINK_TYPE_TCX ? `device ${name.split('@')[1] ?? `ifindex ${info.target}`}` : '?';
        report.programs.push({
          link: name, program: prog?.name ?? '?', progId: info.progId, tag: prog?.tag ?? '',
          attachType: ATTACH_TYPE_NAMES[info.attachType] ?? String(info.attachType),
          attachedTo, mode: info.type === LINK_TYPE_TCX ? 'tcx link' : info.type === LINK_TYPE_CGROUP ? 'cgroup link' : `link type ${info.type}`,
        });
      } finally {
        closeSync(fd);
      }
    }
  }
  // Classic tc filters (kernels without tcx) carry no pins: look at every interface.
  for (const name of interfaceNames()) {
    let idx: number;
    try {
      idx = ifIndex(name);
    } catch {
      continue;
    }
    for (const dir of ['ingress', 'egress'] as const) {
      const id = classicTcProgram(idx, dir);
      const prog = id === undefined ? undefined : progInfoById(id);
      if (!prog?.name.startsWith('svcmap_')) continue;
      report.programs.push({ link: `tc ${dir} ${name}`, program: prog.name, progId: id!, tag: prog.tag, attachType: `tc/${dir}`, attachedTo: `device ${name}`, mode: 'tc filter (clsact)' });
    }
  }
  for (const spec of ALL_MAPS) {
    const path = join(pinDir, spec.name);
    if (spec.listable === false || !existsSync(path)) continue;
    const m = BpfMap.openPinned(path);
    try {
      const entries = m.count();
      report.maps.push({
        name: spec.name, type: MAP_TYPE_NAMES[m.info.type] ?? String(m.info.type), entries, maxEntries: m.maxEntries,
        fill: `${((100 * entries) / m.maxEntries).toFixed(1)}%`, purpose: spec.purpose,
      });
    } finally {
      m.close();
    }
  }
  // Both families' maps (svcmap_devaddr, svcmap_devaddr6), IPv4 first.
  for (const spec of [devAddrMap, devAddr6Map]) {
    const devAddrPath = join(pinDir, spec.name);
    if (!existsSync(devAddrPath)) continue;
    const m = new TypedMap(spec, BpfMap.openPinned(devAddrPath));
    try {
      const names = new Map<number, string>();
      for (const name of interfaceNames()) {
        try { names.set(ifIndex(name), name); } catch { /* gone meanwhile */ }
      }
      for (const [ifindex, v] of m.entries().sort(([a], [b]) => a - b)) {
        const device = names.get(ifindex);
        report.snatAddresses.push({ ifindex, ...(device ? { device } : {}), addr: v.addr });
      }
    } finally {
      m.raw.close();
    }
  }
  const countersPath = join(pinDir, metricsMap.name);
  if (existsSync(countersPath)) {
    const m = BpfMap.openPinned(countersPath);
    try {
      for (const r of readDatapathCounters(m)) {
        if (r.packets > 0n) report.counters.push({ hook: r.hook, reason: r.reason, packets: Number(r.packets), drop: r.drop });
      }
    } finally {
      m.close();
    }
  }
  return report;
}

export function renderStatus(r: StatusReport): string {
  const lines: string[] = [`pin directory: ${r.pinDir}`, '', 'PROGRAMS'];
  if (!r.programs.length) lines.push('  (none attached)');
  for (const p of r.programs) lines.push(`  ${p.attachType.padEnd(20)} ${p.program.padEnd(20)} id ${String(p.progId).padEnd(6)} ${p.mode} on ${p.attachedTo}`);
  lines.push('', 'MAPS');
  if (!r.maps.length) lines.push('  (none pinned)');
  for (const m of r.maps) lines.push(`  ${m.name.padEnd(16)} ${m.type.padEnd(9)} ${`${m.entries}/${m.maxEntries}`.padEnd(16)} ${m.fill.padStart(6)}  ${m.purpose}`);
  lines.push('', 'SNAT ADDRESSES (svcmap_devaddr, svcmap_devaddr6: a flow SNATed out of a device takes its address of the flow\'s family)');
  if (!r.snatAddresses.length) lines.push('  (none)');
  for (const a of r.snatAddresses) lines.push(`  ${(a.device ?? `ifindex ${a.ifindex}`).padEnd(16)} ${a.addr}`);
  lines.push('', 'DATAPATH COUNTERS (not zero; svcmap_datapath_packets_total)');
  if (!r.counters.length) lines.push('  (all zero)');
  for (const c of r.counters) lines.push(`  ${c.hook.padEnd(14)} ${c.reason.padEnd(24)} ${String(c.packets).padStart(12)}${c.drop ? '  drop' : ''}`);
  return `${lines.join('\n')}\n`;
}

export function status(argv: string[], out: (s: string) => void): void {
  const f = parseFlags(statusCommand, argv);
  if (!pinDirExists(f['pin-dir'])) throw new Error(`nothing is pinned at ${f['pin-dir']}: the agent has not run with this --pin-dir, or svcmap cleanup removed it`);
  const r = withPinAccess(f['pin-dir'], () => collectStatus(f['pin-dir']));
  out(f.output === 'table' ? renderStatus(r) : formatData(r, f.output));
}
