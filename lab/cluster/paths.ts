// Where the real-cluster tier keeps things. Pure: names only, no I/O.
//   binaries   <repo>/.tools/cluster/bin        (make cluster-bins)
//   run state  /var/lib/svcmap-lab/<run id>/     (etcd data, containerd roots, logs, certs)
//   mount nss  /run/svcmap-lab/mntns/<id>-<node> (one persisted mount namespace per node; <id>-<node>.uts its UTS namespace)
// Everything a run makes carries its lab run id, so the sweep can tell a dead
// run's leftovers from a live run's.

import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLUSTER_BIN = process.env.SVCMAP_CLUSTER_BIN ?? join(REPO_ROOT, '.tools', 'cluster', 'bin');
export const STATE_ROOT = '/var/lib/svcmap-lab';
export const MNTNS_DIR = '/run/svcmap-lab/mntns';

export type ClusterBinary =
  | 'etcd'
  | 'kube-apiserver'
  | 'kube-controller-manager'
  | 'kube-scheduler'
  | 'kubelet'
  | 'kube-proxy'
  | 'kubectl'
  | 'e2e.test'
  | 'agnhost'
  | 'regression-issue-74839'
  | 'coredns';

export function bin(name: ClusterBinary): string {
  return join(CLUSTER_BIN, name);
}

/** The run's state directory. */
export function stateDir(runId: string): string {
  return join(STATE_ROOT, runId);
}

/** The file a node's mount namespace is persisted on. */
export function mntnsFile(runId: string, node: string): string {
  return join(MNTNS_DIR, `${runId}-${node}`);
}

/** Matches the files in MNTNS_DIR; group 1 is the run id. */
export const MNTNS_PATTERN = /^([0-9a-f]{6})-[a-z0-9]{1,16}(\.uts)?$/;
