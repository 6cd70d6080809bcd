// Brings up the socket-level datapath: checks the host, finds (or compiles)
// the object, loads it with its maps pinned, checks the codecs against its
// BTF, and attaches the socket hooks to the cgroup through pinned links.
import { join } from 'node:path';
import { compileBpf } from '../bpf/compile.ts';
import { checkCgroup, checkPrivileges, ensureBpffs } from '../bpf/environment.ts';
import { type LinkAction, ensureCgroupLink, linkPinDir, loadPinned } from '../bpf/loader.ts';
import type { BpfObject } from '../bpf/object.ts';
import { DatapathMaps } from '../maps/datapath-maps.ts';
import { MAP_BACKENDS, MAP_REVNAT, MAP_SERVICES, MAP_SK_REVNAT } from '../maps/constants.ts';

/** The socket hooks, by program name (the SEC names give the attach types). */
export const SOCK_PROGRAMS = ['svcmap_connect4', 'svcmap_sendmsg4', 'svcmap_recvmsg4', 'svcmap_getpeer4'] as const;

export interface DatapathOptions {
  pinDir: string;
  cgroup: string;
  /** Where compiled objects are cached; default build/bpf. */
  objectDir?: string;
  /** Compile even if a cached object matches. */
  forceCompile?: boolean;
  maxServices?: number;
  maxBackends?: number;
  maxSockRevNat?: number;
}

export interface Datapath {
  object: BpfObject;
  maps: DatapathMaps;
  objectPath: string;
  compiled: boolean;
  reusedMaps: string[];
  links: Array<{ program: string; action: LinkAction }>;
  notes: string[];
}

export function bringUpDatapath(opts: DatapathOptions, log: (msg: string, fields?: object) => void): Datapath {
  checkPrivileges();
  ensureBpffs(opts.pinDir, true);
  checkCgroup(opts.cgroup);

  const compiled = compileBpf({ program: 'sock', ...(opts.objectDir ? { outDir: opts.objectDir } : {}), ...(opts.forceCompile ? { force: true } : {}) });
  log(compiled.cached ? 'using cached BPF object' : 'compiled BPF object', { path: compiled.path });

  const loaded = loadPinned({
    objectPath: compiled.path,
    pinDir: opts.pinDir,
    maps: [
      { name: MAP_SERVICES, ...(opts.maxServices ? { maxEntries: opts.maxServices } : {}) },
      { name: MAP_BACKENDS, ...(opts.maxBackends ? { maxEntries: opts.maxBackends } : {}) },
      { name: MAP_REVNAT, ...(opts.maxServices ? { maxEntries: opts.maxServices } : {}) },
      { name: MAP_SK_REVNAT, ...(opts.maxSockRevNat ? { maxEntries: opts.maxSockRevNat } : {}) },
    ],
  });
  let maps: DatapathMaps;
  try {
    // Before anything is attached: a codec that disagrees with the object stops us here.
    maps = DatapathMaps.fromObject(loaded.object);
  } catch (err) {
    loaded.object.close();
    throw err;
  }
  const links = SOCK_PROGRAMS.map((program) => ({
    program,
    action: ensureCgroupLink(loaded.object, program, opts.cgroup, join(linkPinDir(opts.pinDir), program)),
  }));
  return {
    object: loaded.object, maps, objectPath: compiled.path, compiled: !compiled.cached,
    reusedMaps: loaded.reusedMaps, links, notes: loaded.notes,
  };
}
