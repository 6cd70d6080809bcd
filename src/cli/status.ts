// svcmap status: what is loaded and attached, and how full each map is.
// Reads the pins only, so it answers whether or not the agent runs.
import { closeSync, existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { cgroup2Mounts } from '../bpf/environment.ts';
import { ATTACH_TYPE_NAMES, LINK_TYPE_CGROUP, LINK_TYPE_TCX, linkInfo, openPinned, progInfoById } from '../bpf/link.ts';
import { listLinks } from '../bpf/links.ts';
import { linkPinDir } from '../bpf/loader.ts';
import { LINK_TYPE_XDP, type XdpMode } from '../bpf/xdp.ts';
import { classicTcProgram, ifIndex, interfaceNames } from '../bpf/tc.ts';
import { BpfMap, MAP_TYPE_NAMES } from '../bpf/map.ts';
import { readDatapathCounters } from '../maps/datapath-counters.ts';
import { ALL_MAPS, devAddr6Map, devAddrMap, metricsMap, sockBypassMap, sockConfigMap } from '../maps/registry.ts';
import { SOCK_CFG_HOST_ONLY } from '../maps/constants.ts';
import { pinnedVeths } from '../agent/datapath/veth-datapath.ts';
import { type DeviceRuns, type NoFrames, deviceRuns, devicesWithoutFrames } from '../agent/datapath/xdp-devices.ts';
import { TypedMap } from '../maps/typed-map.ts';
import { command, noHeadersFlag, parseFlags, pinDirFlag } from './args.ts';
import { type Column, PLAIN, type TableStyle, formatData, isTable, outputFlag, printed, renderColumns, tableStyle } from './format.ts';
import { pinDirExists, withPinAccess } from './pin-access.ts';
import { type AgentAnswer, askAgent, describeAgent } from './agent-health.ts';
import { type DsrCount, lbModeText, pinnedDsrCount } from './status-lb-mode.ts';

export const statusCommand = command({
  name: 'status',
  summary: 'attached programs, map fill levels, SNAT addresses, datapath counters',
  description:
    "Says what the running agent reports at /healthz (healthy, ready, the API server it uses and its failovers), then lists the external devices and what meets traffic from outside on each (XDP in driver or generic mode in front of tc, or tc only), the node's lb mode (the agent's --lb-mode) and how many frontends from outside use direct server return, the attached programs and where they are attached (cgroup, tcx, tc or xdp), each map's fill level, the SNAT address of each device (svcmap_devaddr), and the datapath's counters that are not zero (svcmap_datapath_packets_total: per hook, what became of the packets).",
  flags: {
    output: outputFlag(),
    'no-headers': noHeadersFlag,
    'pin-dir': pinDirFlag,
    'healthz-address': {
      value: 'HOST:PORT',
      schema: z.string().min(1),
      default: '127.0.0.1:10256',
      help: "the agent's /healthz (its --healthz-bind-address), asked which API server the agent uses and how often it failed over",
    },
  },
});

export interface StatusReport {
  pinDir: string;
  /** pin: the link's pin (classic tc filters have none). */
  programs: Array<{
    link: string;
    pin?: string;
    program: string;
    progId: number;
    tag: string;
    attachType: string;
    attachedTo: string;
    mode: string;
  }>;
  maps: Array<{ name: string; id: number; pin: string; type: string; entries: number; maxEntries: number; fill: string; purpose: string }>;
  /** The datapath counters that are not zero, summed over the CPUs. */
  counters: Array<{ hook: string; reason: string; packets: number; drop: boolean }>;
  /** svcmap_devaddr: the address a flow SNATed out of each device takes (device: its name here, if it has one). */
  snatAddresses: Array<{ ifindex: number; device?: string; addr: string }>;
  /** What the running agent says at /healthz (absent: not asked). */
  agent?: AgentAnswer;
  /** Which sockets the socket LB translates (svcmap_sockcfg): all, host-only, or unknown (not written). */
  socketLb: 'all' | 'host-only' | 'unknown';
  /** The pods' veths with svcmap_veth_in/out attached (by their pinned links). */
  veths: string[];
  /** The external devices (svcmap_tc_in attached) and what meets traffic from outside there: XDP in driver or generic mode in front of tc, or tc only. */
  devices: Array<{ device: string; runs: DeviceRuns }>;
  /** The Pods whose sockets the socket LB leaves alone (svcmap_sock_byp), by name; cgroupId as a decimal string. */
  socketLbBypass: Array<{ pod: string; cgroupId: string }>;
  /** The frontends from outside (both families' master entries) and how many carry direct server return (SVC_F_DSR). */
  dsr: DsrCount;
}

/** svcmap_sock_byp's Pods, sorted by name. */
function bypassedPods(pinDir: string): StatusReport['socketLbBypass'] {
  const path = join(pinDir, sockBypassMap.name);
  if (!existsSync(path)) return [];
  const m = new TypedMap(sockBypassMap, BpfMap.openPinned(path));
  try {
    return m
      .entries()
      .map(([id, v]) => ({ pod: v.pod, cgroupId: String(id) }))
      .sort((a, b) => (a.pod < b.pod ? -1 : a.pod > b.pod ? 1 : 0));
  } finally {
    m.raw.close();
  }
}

/** The socket LB's mode as svcmap_sockcfg says it. */
function socketLbMode(pinDir: string): StatusReport['socketLb'] {
  const path = join(pinDir, sockConfigMap.name);
  if (!existsSync(path)) return 'unknown';
  const m = new TypedMap(sockConfigMap, BpfMap.openPinned(path));
  try {
    const cfg = m.get(0);
    if (!cfg || cfg.host_netns === 0n) return 'unknown';
    return cfg.flags & SOCK_CFG_HOST_ONLY ? 'host-only' : 'all';
  } finally {
    m.raw.close();
  }
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

/** The programs attached through pins under pinDir, and svcmap's classic tc filters on this namespace's interfaces. */
export function attachedPrograms(pinDir: string): StatusReport['programs'] {
  const programs: StatusReport['programs'] = [];
  // The mode an XDP program runs in is the device's to say (rtnetlink), not the link's.
  const xdpModes = new Map(listLinks().flatMap((l) => (l.xdp ? [[l.name, l.xdp] as const] : [])));
  const linkDir = linkPinDir(pinDir);
  if (existsSync(linkDir)) {
    for (const name of readdirSync(linkDir).sort()) {
      const fd = openPinned(join(linkDir, name));
      if (fd === undefined) continue;
      try {
        const info = linkInfo(fd);
        const prog = progInfoById(info.progId);
        const attachedTo =
          info.type === LINK_TYPE_CGROUP
            ? `cgroup ${cgroupPathById(info.target) ?? `id ${info.target}`}`
            : info.type === LINK_TYPE_TCX || info.type === LINK_TYPE_XDP
              ? `device ${name.split('@')[1] ?? `ifindex ${info.target}`}`
              : '?';
        const xdpMode = info.type === LINK_TYPE_XDP ? xdpModes.get(name.split('@')[1] ?? '') : undefined;
        programs.push({
          link: name,
          pin: join(linkDir, name),
          program: prog?.name ?? '?',
          progId: info.progId,
          tag: prog?.tag ?? '',
          attachType: info.type === LINK_TYPE_XDP ? 'xdp' : (ATTACH_TYPE_NAMES[info.attachType] ?? String(info.attachType)),
          attachedTo,
          mode:
            info.type === LINK_TYPE_TCX
              ? 'tcx link'
              : info.type === LINK_TYPE_CGROUP
                ? 'cgroup link'
                : info.type === LINK_TYPE_XDP
                  ? `xdp link (${xdpMode?.progId === info.progId ? xdpMode.mode : 'not running'})`
                  : `link type ${info.type}`,
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
      programs.push({
        link: `tc ${dir} ${name}`,
        program: prog.name,
        progId: id!,
        tag: prog.tag,
        attachType: `tc/${dir}`,
        attachedTo: `device ${name}`,
        mode: 'tc filter (clsact)',
      });
    }
  }
  return programs;
}

export function collectStatus(pinDir: string): StatusReport {
  const programs = attachedPrograms(pinDir);
  const report: StatusReport = {
    pinDir,
    programs,
    maps: [],
    counters: [],
    snatAddresses: [],
    socketLb: socketLbMode(pinDir),
    veths: pinnedVeths(pinDir),
    socketLbBypass: bypassedPods(pinDir),
    devices: externalDevices(programs),
    dsr: pinnedDsrCount(pinDir),
  };
  for (const spec of ALL_MAPS) {
    const path = join(pinDir, spec.name);
    if (spec.listable === false || !existsSync(path)) continue;
    const m = BpfMap.openPinned(path);
    try {
      const entries = m.count();
      report.maps.push({
        name: spec.name,
        id: m.info.id,
        pin: path,
        type: MAP_TYPE_NAMES[m.info.type] ?? String(m.info.type),
        entries,
        maxEntries: m.maxEntries,
        fill: `${((100 * entries) / m.maxEntries).toFixed(1)}%`,
        purpose: spec.purpose,
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
        try {
          names.set(ifIndex(name), name);
        } catch {
          /* gone meanwhile */
        }
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

/**
 * Each device svcmap_tc_in is attached to, with what runs in front of it
 * (from the programs listed) and, for XDP in driver mode, whether the
 * device takes the frames XDP forwards (noFrames: the kernel's XDP features).
 */
export function externalDevices(
  programs: StatusReport['programs'],
  noFrames: (devices: string[]) => ReadonlyMap<string, NoFrames> = (devices) => devicesWithoutFrames(devices),
): StatusReport['devices'] {
  const device = (p: StatusReport['programs'][number]) => p.attachedTo.replace(/^device /, '');
  const xdp = new Map(
    programs.filter((p) => p.attachType === 'xdp').map((p) => [device(p), /\((native|generic)\)/.exec(p.mode)?.[1]] as const),
  );
  const native = [...xdp].filter(([, mode]) => mode === 'native').map(([d]) => d);
  const without = native.length ? noFrames(native) : new Map<string, NoFrames>();
  return [...new Set(programs.filter((p) => p.program === 'svcmap_tc_in').map(device))].sort().map((d) => {
    const mode = xdp.get(d);
    return { device: d, runs: deviceRuns(mode as XdpMode | undefined, without.get(d)) };
  });
}

const PROGRAM_COLUMNS: readonly Column[] = [
  { header: 'ATTACH TYPE' },
  { header: 'PROGRAM' },
  { header: 'ID', right: true },
  { header: 'TAG', wide: true },
  { header: 'PIN', wide: true },
  { header: 'ATTACHED', free: true },
];
const MAP_COLUMNS: readonly Column[] = [
  { header: 'NAME' },
  { header: 'TYPE' },
  { header: 'ENTRIES' },
  { header: 'FILL', right: true },
  { header: 'ID', wide: true, right: true },
  { header: 'PIN', wide: true },
  { header: 'PURPOSE', free: true },
];
const SNAT_COLUMNS: readonly Column[] = [{ header: 'DEVICE' }, { header: 'IFINDEX', wide: true, right: true }, { header: 'ADDRESS' }];
const COUNTER_COLUMNS: readonly Column[] = [
  { header: 'HOOK' },
  { header: 'REASON' },
  { header: 'PACKETS', right: true },
  { header: 'DROP' },
];

/**
 * The report as sections, each a title and a table (or what stands for an
 * empty one). --no-headers: the rows only, a section's after the previous
 * one's and an empty line, in this order (an empty section: no rows).
 * -o wide: the programs' tags and link pins, the maps' ids and pins, the
 * devices' ifindexes.
 */
export function renderStatus(r: StatusReport, style: TableStyle = PLAIN): string {
  const sections = [
    {
      title: 'PROGRAMS',
      none: '(none attached)',
      columns: PROGRAM_COLUMNS,
      rows: r.programs.map((p) => [p.attachType, p.program, String(p.progId), p.tag || '-', p.pin ?? '-', `${p.mode} on ${p.attachedTo}`]),
    },
    {
      title: 'MAPS',
      none: '(none pinned)',
      columns: MAP_COLUMNS,
      rows: r.maps.map((m) => [m.name, m.type, `${m.entries}/${m.maxEntries}`, m.fill, String(m.id), m.pin, m.purpose]),
    },
    {
      title: "SNAT ADDRESSES (svcmap_devaddr, svcmap_devaddr6: a flow SNATed out of a device takes its address of the flow's family)",
      none: '(none)',
      columns: SNAT_COLUMNS,
      rows: r.snatAddresses.map((a) => [a.device ?? `ifindex ${a.ifindex}`, String(a.ifindex), a.addr]),
    },
    {
      title: 'DATAPATH COUNTERS (not zero; svcmap_datapath_packets_total)',
      none: '(all zero)',
      columns: COUNTER_COLUMNS,
      rows: r.counters.map((c) => [c.hook, c.reason, String(c.packets), c.drop ? 'drop' : '']),
    },
  ];
  const lines: string[] = style.headers
    ? [
        `pin directory: ${r.pinDir}`,
        ...(r.agent ? [describeAgent(r.agent)] : []),
        `socket LB: ${r.socketLb === 'host-only' ? "host-only (the node's own sockets; pods' traffic is translated at their veths)" : r.socketLb}`,
        `pod veths with programs: ${r.veths.length ? r.veths.join(', ') : '(none)'}`,
        ...(r.socketLbBypass.length
          ? [`pods bypassing the socket LB: ${r.socketLbBypass.map((b) => `${b.pod} (cgroup ${b.cgroupId})`).join(', ')}`]
          : []),
        `external devices: ${r.devices.length ? r.devices.map((d) => `${d.device} (${d.runs})`).join(', ') : '(none)'}`,
        lbModeText(r.agent && 'lbMode' in r.agent ? r.agent.lbMode : undefined, r.dsr),
      ]
    : [];
  sections.forEach((s, i) => {
    if (style.headers || i > 0) lines.push('');
    if (style.headers) lines.push(s.title);
    if (s.rows.length) lines.push(...renderColumns(s.columns, s.rows, style, '  '));
    else if (style.headers) lines.push(`  ${s.none}`);
  });
  return printed(lines);
}

export async function status(argv: string[], out: (s: string) => void): Promise<void> {
  const f = parseFlags(statusCommand, argv);
  if (!pinDirExists(f['pin-dir']))
    throw new Error(`nothing is pinned at ${f['pin-dir']}: the agent has not run with this --pin-dir, or svcmap cleanup removed it`);
  const agent = askAgent(f['healthz-address']);
  const r = { ...withPinAccess(f['pin-dir'], () => collectStatus(f['pin-dir'])), agent: await agent };
  out(isTable(f.output) ? renderStatus(r, tableStyle(f)) : formatData(r, f.output));
}
