// Brings up the datapath: checks the host, finds (or compiles) the objects,
// loads them with their maps pinned (the socket hooks and the tc programs
// share the service maps through the pins; which maps, the C code declares),
// sized by the --max-* options the registry names, checks the codecs against
// their BTF, writes the socket hooks' settings (the node's network namespace,
// localhost NodePorts, bind protection) and attaches the socket hooks to the
// cgroup through pinned links. The tc programs are attached separately, once
// the devices are known.
import { join } from 'node:path';
import { type BpfProgramName, compileBpf } from '../../bpf/compile.ts';
import { checkCgroup, checkPrivileges, ensureBpffs } from '../../bpf/environment.ts';
import { type LinkAction, ensureCgroupLink, linkPinDir, loadPinned } from '../../bpf/loader.ts';
import type { BpfMap } from '../../bpf/map.ts';
import { BpfObject } from '../../bpf/object.ts';
import { netnsCookie } from '../../bpf/netns.ts';
import { type PinDirLock, holdPinDir } from '../../bpf/pin-lock.ts';
import {
  SOCK_CFG_BIND_PROTECT,
  SOCK_CFG_HOST_ONLY,
  SOCK_CFG_LOCALHOST4,
  SOCK_CFG_LOCALHOST6,
  SOCK_CFG_POD_BYPASS,
} from '../../maps/constants.ts';
import { DatapathMaps } from '../../maps/datapath-maps.ts';
import { Migration } from '../../maps/migration/migrate.ts';
import { planMigration } from '../../maps/migration/plan.ts';
import { type MapSizes, mapSize } from '../../maps/registry.ts';
import type { Family } from '../../util/family.ts';
import type { Component } from '../components.ts';
import type { Logger } from '../log.ts';
import { pinnedVeths } from './veth-datapath.ts';
import { type Acceleration, pinnedXdpDevices } from './xdp-devices.ts';

/** The socket hooks, by program name (the SEC names give the attach types). */
export const SOCK_PROGRAMS = [
  'svcmap_connect4',
  'svcmap_sendmsg4',
  'svcmap_recvmsg4',
  'svcmap_getpeer4',
  'svcmap_connect6',
  'svcmap_sendmsg6',
  'svcmap_recvmsg6',
  'svcmap_getpeer6',
  'svcmap_bind4',
  'svcmap_bind6',
  'svcmap_sock_release',
] as const;
/** The tc programs: ingress and egress of the node's external devices (the pods' veths: veth-datapath.ts). */
export const TC_PROGRAMS = { ingress: 'svcmap_tc_in', egress: 'svcmap_tc_out' } as const;

/** What the socket hooks do for the node's own sockets (those of the agent's network namespace): struct sock_config. */
export interface SockSettings {
  /** 127.0.0.1:NodePort (4) and [::1]:NodePort (6) reach the NodePort. */
  localhostNodePorts: Readonly<Record<Family, boolean>>;
  /** bind() to a port a NodePort holds fails with EADDRINUSE. */
  bindProtection: boolean;
  /** --socket-lb: all sockets, or only the node's own (host-only: pods' traffic is translated at their veths). */
  socketLb?: SocketLbMode;
}

/** Which sockets the socket LB translates (--socket-lb). */
export const SOCKET_LB_MODES = ['all', 'host-only'] as const;
export type SocketLbMode = (typeof SOCKET_LB_MODES)[number];

/** kube-proxy's defaults (--iptables-localhost-nodeports) and Cilium's (nodePort.bindProtection). */
export const DEFAULT_SOCK_SETTINGS: SockSettings = { localhostNodePorts: { 4: true, 6: true }, bindProtection: true, socketLb: 'all' };

export interface DatapathOptions extends MapSizes {
  pinDir: string;
  cgroup: string;
  /** Default: DEFAULT_SOCK_SETTINGS. */
  sockSettings?: SockSettings;
  /** Where compiled objects are cached; default build/bpf. */
  objectDir?: string;
  /** Compile even if a cached object matches. */
  forceCompile?: boolean;
  /** Per-packet translation at the pods' veths (--veth-lb; always with --socket-lb=host-only). */
  vethLb?: boolean;
  /** XDP in front of tc ingress on the external devices (--acceleration; default disabled). */
  acceleration?: Acceleration;
}

/** The pods' veths get the veth programs: asked for, or implied by a socket LB that leaves pods alone. */
export function vethLbOn(opts: Pick<DatapathOptions, 'vethLb' | 'sockSettings'>): boolean {
  return !!opts.vethLb || opts.sockSettings?.socketLb === 'host-only';
}

export interface Datapath {
  sock: BpfObject;
  tc: BpfObject;
  /** The pods' veths' programs (bpf/veth.c); loaded only when they are used (vethLbOn) or an earlier run left veth links pinned (a migration swaps them too). */
  veth: BpfObject | undefined;
  /** The external devices' XDP program (bpf/xdp.c); loaded only when --acceleration is on or an earlier run left XDP links pinned (to swap or detach them). */
  xdp: BpfObject | undefined;
  maps: DatapathMaps;
  objectPaths: string[];
  reusedMaps: string[];
  links: Array<{ program: string; action: LinkAction }>;
  notes: string[];
  /** The agent's lock on the pin directory, by which svcmap cleanup knows that it runs: held until the agent stops. */
  pinLock: PinDirLock;
}

export function bringUpDatapath(opts: DatapathOptions, log: (msg: string, fields?: object) => void): Datapath {
  checkPrivileges();
  ensureBpffs(opts.pinDir, true);
  checkCgroup(opts.cgroup);
  const pinLock = holdPinDir(opts.pinDir);
  try {
    return loadAndAttach(opts, log, pinLock);
  } catch (err) {
    pinLock.release();
    throw err;
  }
}

function loadAndAttach(opts: DatapathOptions, log: (msg: string, fields?: object) => void, pinLock: PinDirLock): Datapath {
  const build = (program: BpfProgramName) => {
    const o = compileBpf({ program, ...(opts.objectDir ? { outDir: opts.objectDir } : {}), ...(opts.forceCompile ? { force: true } : {}) });
    log(o.cached ? 'using cached BPF object' : 'compiled BPF object', { path: o.path });
    return o.path;
  };
  // The veth object only when its programs are attached or already pinned: verifying them costs
  // as much CPU as the socket hooks' and a third of the start at 10k Services (~0.5 s here).
  const withVeth = vethLbOn(opts) || pinnedVeths(opts.pinDir).length > 0;
  const withXdp = (opts.acceleration ?? 'disabled') !== 'disabled' || pinnedXdpDevices(opts.pinDir).length > 0;
  const names: BpfProgramName[] = ['sock', 'tc', ...(withVeth ? (['veth'] as const) : []), ...(withXdp ? (['xdp'] as const) : [])];
  const paths = names.map(build);
  const maxEntries = (name: string) => mapSize(opts, name);
  const began = performance.now();
  // Pinned maps of another layout or capacity move to new maps (src/maps/migration/).
  const migration = planMigrationOf(paths, opts.pinDir, maxEntries, log);
  const pinPaths = migration?.pinPaths();
  const load = (objectPath: string) => loadPinned({ objectPath, pinDir: opts.pinDir, maxEntries, ...(pinPaths ? { pinPaths } : {}) });
  const loaded: Array<ReturnType<typeof loadPinned>> = [];
  const objects = () => loaded.map((l) => l.object);
  let maps: DatapathMaps | undefined;
  try {
    for (const p of paths) loaded.push(load(p));
    // Before anything is attached: a codec that disagrees with an object stops us here.
    maps = DatapathMaps.fromObjects(objects());
    migration?.copy((name) => objectMap(objects(), name));
    // Before the hooks are attached (or their programs replaced): a new hook never runs without them.
    writeSockSettings(maps, opts.sockSettings ?? DEFAULT_SOCK_SETTINGS, log);
    if (migration)
      log('migration: every hook takes the new programs', { links: migration.swap(objects(), (name) => objectMap(objects(), name)) });
  } catch (err) {
    maps?.close();
    for (const o of objects()) o.close();
    migration?.abort();
    throw err;
  }
  if (migration) {
    for (const r of migration.finish((name) => objectMap(objects(), name))) log('map migrated', { ...r });
    log('migration done', { ms: Math.round(performance.now() - began), holdMs: migration.holdMs });
  }
  const loadedOf = (name: BpfProgramName) => loaded[names.indexOf(name)];
  const sock = loadedOf('sock')!;
  const tc = loadedOf('tc')!;
  const links = SOCK_PROGRAMS.map((program) => ({
    program,
    action: ensureCgroupLink(sock.object, program, opts.cgroup, join(linkPinDir(opts.pinDir), program)),
  }));
  return {
    sock: sock.object,
    tc: tc.object,
    veth: loadedOf('veth')?.object,
    xdp: loadedOf('xdp')?.object,
    maps,
    objectPaths: [...paths],
    reusedMaps: [...new Set(loaded.flatMap((l) => l.reusedMaps))],
    links,
    notes: loaded.flatMap((l) => l.notes),
    pinLock,
  };
}

/** The migration these objects need in pinDir, or undefined when every pinned map fits them. */
function planMigrationOf(
  objectPaths: readonly string[],
  pinDir: string,
  maxEntries: (name: string) => number | undefined,
  log: (msg: string, fields?: object) => void,
): Migration | undefined {
  const objects = objectPaths.map((p) => BpfObject.open(p, pinDir));
  try {
    const moves = planMigration(objects, pinDir, maxEntries);
    if (!moves.length) return undefined;
    log('migration: pinned maps move to new maps', { maps: moves.map((m) => ({ map: m.spec.name, why: m.why })) });
    return new Migration(pinDir, moves, log);
  } finally {
    for (const o of objects) o.close();
  }
}

/** A map of whichever loaded object has it. */
function objectMap(objects: readonly BpfObject[], name: string): BpfMap {
  const o = objects.find((x) => x.maps().some((m) => m.name === name));
  if (!o) throw new Error(`no loaded object has map ${name}`);
  return o.map(name);
}

/** struct sock_config: the node is this process's network namespace. */
function writeSockSettings(maps: DatapathMaps, settings: SockSettings, log: (msg: string, fields?: object) => void): void {
  if (!maps.sockConfig) throw new Error('the socket object has no svcmap_sockcfg map');
  const hostNetns = netnsCookie();
  const flags =
    (settings.localhostNodePorts[4] ? SOCK_CFG_LOCALHOST4 : 0) |
    (settings.localhostNodePorts[6] ? SOCK_CFG_LOCALHOST6 : 0) |
    (settings.bindProtection ? SOCK_CFG_BIND_PROTECT : 0) |
    (settings.socketLb === 'host-only' ? SOCK_CFG_HOST_ONLY : 0) |
    // Pods an earlier agent left bypassed stay so until this one has read the Pods (sock-bypass.ts).
    (maps.sockBypass?.entries().length ? SOCK_CFG_POD_BYPASS : 0);
  maps.sockConfig.put(0, { host_netns: hostNetns, flags });
  log('socket hooks configured', {
    hostNetns: String(hostNetns),
    socketLb: settings.socketLb ?? 'all',
    localhostNodePorts: { ipv4: settings.localhostNodePorts[4], ipv6: settings.localhostNodePorts[6] },
    bindProtection: settings.bindProtection,
  });
}

/**
 * The datapath as the agent's first part: its maps are what every other part
 * is built on. Stopping closes the agent's handles only: pins and links stay,
 * so the datapath keeps working.
 */
export class DatapathPart implements Component {
  readonly name = 'datapath';
  readonly #opts: DatapathOptions;
  readonly #log: Logger;
  #dp: Datapath | undefined;

  constructor(opts: DatapathOptions, log: Logger) {
    this.#opts = opts;
    this.#log = log;
  }

  /** The loaded datapath (once started). */
  get datapath(): Datapath {
    if (!this.#dp) throw new Error('the datapath is not up yet');
    return this.#dp;
  }

  start(): void {
    const dp = bringUpDatapath(this.#opts, (msg, fields) => this.#log.info(fields ?? {}, msg));
    this.#dp = dp;
    for (const n of dp.notes) this.#log.warn(n);
    this.#log.info(
      { objects: dp.objectPaths, reusedMaps: dp.reusedMaps, links: dp.links, cgroup: this.#opts.cgroup, pinDir: this.#opts.pinDir },
      dp.reusedMaps.length ? 'datapath up (reusing pinned maps)' : 'datapath up',
    );
  }

  stop(): void {
    const dp = this.#dp;
    if (!dp) return;
    this.#dp = undefined;
    dp.maps.close();
    dp.sock.close(); // pins and links stay: the datapath keeps working
    dp.tc.close();
    dp.veth?.close();
    dp.xdp?.close();
    dp.pinLock.release(); // from here svcmap cleanup no longer asks for --force
  }
}
