// Loads an object with its maps pinned (reused across restarts) and attaches
// its programs through pinned links, replacing the program of an existing
// link atomically so that a restart or upgrade never leaves a gap.
import { closeSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { BpfMap } from './map.ts';
import { BpfObject } from './object.ts';
import { LINK_TYPE_CGROUP, attachCgroup, cgroupId, detachPinnedLink, linkInfo, openPinned, pinNewLink, updateLink } from './link.ts';
import { native } from './native.ts';

export interface LoadOptions {
  objectPath: string;
  pinDir: string;
  /** Capacity of a map created now, by name (undefined: the size the C code declares); a pinned map keeps its own. */
  maxEntries?: (map: string) => number | undefined;
  /** Maps pinned elsewhere than pinDir/NAME (a migration's new maps), by name. */
  pinPaths?: ReadonlyMap<string, string>;
}

export interface LoadResult {
  object: BpfObject;
  /** Maps that were already pinned and are reused (their entries survive). */
  reusedMaps: string[];
  notes: string[];
}

export function linkPinDir(pinDir: string): string {
  return join(pinDir, 'links');
}

/**
 * Loads an object with the maps its C code declares LIBBPF_PIN_BY_NAME
 * pinned under pinDir, named as in C: a map another object (or an earlier
 * run) already pinned there is reused, so the objects share one map and its
 * entries survive a restart. A pinned map whose key or value size differs
 * from this build's is refused with what to do, before libbpf would refuse
 * it with EINVAL; one pinned with another capacity keeps it. (The agent
 * moves such maps to new ones first: src/maps/migration/.)
 */
export function loadPinned(opts: LoadOptions): LoadResult {
  mkdirSync(opts.pinDir, { recursive: true });
  const object = BpfObject.open(opts.objectPath, opts.pinDir);
  const reusedMaps: string[] = [];
  const notes: string[] = [];
  try {
    for (const m of object.maps()) {
      const name = m.name;
      const path = m.pinPath === undefined ? undefined : (opts.pinPaths?.get(name) ?? m.pinPath);
      if (path === undefined) continue;
      if (path !== m.pinPath) object.setPinPath(name, path);
      // A map of no capacity (socket storage: one value per socket) cannot be sized.
      const want = object.mapMaxEntries(name) === 0 ? undefined : opts.maxEntries?.(name);
      if (existsSync(path)) {
        const pinned = BpfMap.openPinned(path);
        try {
          const wantKey = object.mapKeySize(name);
          const wantValue = object.mapValueSize(name);
          if (pinned.keySize !== wantKey || pinned.valueSize !== wantValue) {
            throw new Error(
              `the map pinned at ${path} has key/value sizes ${pinned.keySize}/${pinned.valueSize}, this build of the datapath expects ${wantKey}/${wantValue}: the layout changed. The agent migrates it when it starts (docs/upgrade.md); start the agent first`,
            );
          }
          if (want !== undefined && want !== pinned.maxEntries) {
            notes.push(
              `map ${name} is pinned with ${pinned.maxEntries} entries; keeping that size rather than ${want} (the agent resizes it when it starts with that --max-* option)`,
            );
          }
          object.setMaxEntries(name, pinned.maxEntries);
          reusedMaps.push(name);
        } finally {
          pinned.close();
        }
      } else if (want !== undefined) {
        object.setMaxEntries(name, want);
      }
    }
    object.load();
  } catch (err) {
    object.close();
    throw err;
  }
  return { object, reusedMaps, notes };
}

export type LinkAction = 'created' | 'updated' | 'moved';

/**
 * Attaches program `name` of a loaded object to a cgroup through a link
 * pinned at pinPath. An existing link on the same cgroup gets the new
 * program atomically (BPF_LINK_UPDATE); a link on another cgroup is replaced
 * after the new one is in place.
 */
export function ensureCgroupLink(object: BpfObject, program: string, cgroup: string, pinPath: string): LinkAction {
  const prog = object.programs().find((p) => p.name === program);
  if (!prog) throw new Error(`BPF object ${object.path} has no program ${program}`);
  const attachType = native().programExpectedAttachType(prog.handle) as number;
  const progFd = object.programFd(program);
  const existing = openPinned(pinPath);
  if (existing !== undefined) {
    try {
      const info = linkInfo(existing);
      if (info.type === LINK_TYPE_CGROUP && info.attachType === attachType && info.target === cgroupId(cgroup)) {
        updateLink(existing, progFd);
        return 'updated';
      }
    } finally {
      closeSync(existing);
    }
  }
  // A link on another cgroup goes once the new one is in place.
  pinNewLink(attachCgroup(progFd, cgroup, attachType), pinPath, existing !== undefined);
  return existing !== undefined ? 'moved' : 'created';
}

/** Detaches every pinned link under dir and removes the pins. Returns what it removed. */
export function detachPinnedLinks(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const removed: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (detachPinnedLink(path)) removed.push(path);
  }
  return removed;
}
