// Finds Pods' pod-level cgroups by UID, as the kubelet lays them out below
// the cgroup v2 directory the agent attaches to (--cgroup: the root on a
// node), with either cgroup driver:
//   cgroupfs: [<cgroupRoot>/]kubepods/[besteffort/|burstable/]pod<UID>
//   systemd:  kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<UID_>.slice
// The kubelet makes that cgroup when the Pod's sandbox starts, before any
// container, and every process of the Pod runs below it. Its cgroup id is
// the directory's inode number (cgroup v2), the id the socket hooks compare
// with bpf_get_current_ancestor_cgroup_id(). One walk finds every Pod: a
// node holds some hundred Pods, and a walk stops at each Pod's directory.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export interface PodCgroup {
  path: string;
  /** The cgroup id: the directory's inode number. */
  id: bigint;
  /** Depth below the walk's root. */
  level: number;
}

/** pod<UID> (cgroupfs) or ...-pod<UID with _ for ->.slice (systemd): the UID, or undefined. */
export function podUidOfCgroup(dirName: string): string | undefined {
  const m = /^(?:pod|.*-pod)([0-9a-fA-F_-]{32,40})(?:\.slice)?$/.exec(dirName);
  return m ? m[1]!.replace(/_/g, '-').toLowerCase() : undefined;
}

/** How deep below the root the walk looks for Pods' directories (a kubelet's cgroupRoot and QoS level included). */
const MAX_DEPTH = 6;

/** Every Pod's cgroup below root, by UID (lower case). Directories that vanish during the walk are skipped. */
export function findPodCgroups(root: string): Map<string, PodCgroup> {
  const out = new Map<string, PodCgroup>();
  const walk = (dir: string, depth: number) => {
    if (depth > MAX_DEPTH) return;
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return; // removed meanwhile, or not readable: nothing of it
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      const path = join(dir, e.name);
      const uid = podUidOfCgroup(e.name);
      if (uid === undefined) {
        walk(path, depth + 1);
        continue;
      }
      try {
        out.set(uid, { path, id: statSync(path, { bigint: true }).ino, level: depth });
      } catch {
        // removed meanwhile
      }
    }
  };
  walk(root, 1);
  return out;
}
