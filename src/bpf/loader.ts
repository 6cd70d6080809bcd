// Loads an object with its maps pinned (reused across restarts) and attaches
// its programs through pinned links, replacing the program of an existing
// link atomically so that a restart or upgrade never leaves a gap.
import { closeSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { BpfMap } from './map.ts';
import { BpfObject } from './object.ts';
import { LINK_TYPE_CGROUP, attachCgroup, cgroupId, detachPinnedLink, linkInfo, openPinned, pinNewLink, updateLink } from './link.ts';
import { native } from './native.ts';

export interface MapPinSpec {
  name: string;
  /** Capacity for a new map; a pinned map keeps the size it was created with. */
  maxEntries?: number;
}

export interface LoadOptions {
  objectPath: string;
  pinDir: string;
  maps: readonly MapPinSpec[];
  /** Programs not to load (e.g. hooks for a family that is switched off). */
  skipPrograms?: readonly string[];
}

export interface LoadResult {
  object: BpfObject;
  /** Maps that were already pinned and are reused (their entries survive). */
  reusedMaps: string[];
  notes: string[];
}

export function mapPinPath(pinDir: string, name: string): string {
  return join(pinDir, name);
}

export function linkPinDir(pinDir: string): string {
  return join(pinDir, 'links');
}

export function loadPinned(opts: LoadOptions): LoadResult {
  mkdirSync(opts.pinDir, { recursive: true });
  const object = BpfObject.open(opts.objectPath);
  const reusedMaps: string[] = [];
  const notes: string[] = [];
  try {
    for (const spec of opts.maps) {
      const path = mapPinPath(opts.pinDir, spec.name);
      if (existsSync(path)) {
        const pinned = BpfMap.openPinned(path);
        try {
          const wantKey = object.mapKeySize(spec.name);
          const wantValue = object.mapValueSize(spec.name);
          if (pinned.keySize !== wantKey || pinned.valueSize !== wantValue) {
            throw new Error(`the map pinned at ${path} has key/value sizes ${pinned.keySize}/${pinned.valueSize}, this build of the datapath expects ${wantKey}/${wantValue}: the layout changed. Remove the old datapath with svcmap cleanup --pin-dir ${opts.pinDir} (services are unreachable until the agent re-syncs), then start the agent again`);
          }
          if (spec.maxEntries !== undefined && spec.maxEntries !== pinned.maxEntries) {
            notes.push(`map ${spec.name} is pinned with ${pinned.maxEntries} entries; keeping that size rather than ${spec.maxEntries} (resizing needs svcmap cleanup)`);
          }
          object.setMaxEntries(spec.name, pinned.maxEntries);
          reusedMaps.push(spec.name);
        } finally {
          pinned.close();
        }
      } else if (spec.maxEntries !== undefined) {
        object.setMaxEntries(spec.name, spec.maxEntries);
      }
      object.setPinPath(spec.name, path);
    }
    for (const p of opts.skipPrograms ?? []) object.setAutoload(p, false);
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
