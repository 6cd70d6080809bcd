// Leftovers of lab clusters whose owner died without tearing down (SIGKILL,
// a crash of the machine's session): the nodes' mount namespaces, the
// kubelets' cgroup v1 directories, the kernel sysctls the kubelet rewrote and
// the state directory. Runs after lab/cleanup.ts's sweepStale(), which has
// killed the run's processes and removed its network namespaces and cgroup v2
// directories. A run whose owner is alive is never touched.

import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ownerAlive, readRecords } from '../cleanup.ts';
import { isRunId } from '../names.ts';
import { labCgroupsV1, removeCgroupV1Sync, restoreSysctls, type SysctlValues } from './host-state.ts';
import { releaseMntnsDir, removeMountNsSync } from './mount-ns.ts';
import { MNTNS_DIR, MNTNS_PATTERN, STATE_ROOT, stateDir } from './paths.ts';

function list(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Removes what dead cluster runs left; returns their run ids. */
export function sweepStaleClusters(): string[] {
  const live = new Set(
    readRecords()
      .filter(ownerAlive)
      .map((r) => r.id),
  );
  const ids = new Set<string>();
  for (const d of list(STATE_ROOT)) if (isRunId(d)) ids.add(d);
  for (const f of list(MNTNS_DIR)) {
    const id = MNTNS_PATTERN.exec(f)?.[1];
    if (id !== undefined) ids.add(id);
  }
  const swept: string[] = [];
  for (const id of ids) {
    if (live.has(id)) continue;
    for (const f of list(MNTNS_DIR)) if (MNTNS_PATTERN.exec(f)?.[1] === id && !f.endsWith('.uts')) removeMountNsSync(join(MNTNS_DIR, f)); // and its .uts
    for (const name of labCgroupsV1(id)) removeCgroupV1Sync(name);
    const saved = join(stateDir(id), 'sysctls.json');
    if (existsSync(saved)) restoreSysctls(JSON.parse(readFileSync(saved, 'utf8')) as SysctlValues);
    rmSync(stateDir(id), { recursive: true, force: true });
    swept.push(id);
  }
  releaseMntnsDir();
  return swept;
}
