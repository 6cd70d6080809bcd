// svcmap on a lab cluster the way an operator installs it: `helm install` of
// charts/svcmap with the image built locally (lab/cluster/images) and the API
// server's node address as k8sServiceHost (and, on a cluster with a second
// API server, that one as k8sServiceHostFallbacks). The nodes already have bpffs and a
// cgroup v2 mount at the chart's default cgroup.hostRoot (their mount
// namespaces, mount-ns.ts), as a kind node does, so the init container that
// would mount them on the host is turned off.

import { join } from 'node:path';
import type { Cluster } from './cluster.ts';
import { waitUntil } from './component.ts';
import { API_PORT } from './control-plane.ts';
import { CHART, Helm } from './helm.ts';
import { REPO_ROOT } from './paths.ts';

export const RELEASE = 'svcmap';
export const NAMESPACE = 'kube-system';
export const AGENT_SELECTOR = `app.kubernetes.io/instance=${RELEASE},app.kubernetes.io/component=agent`;
export const PIN_DIR = '/sys/fs/bpf/svcmap';

export interface ImageRef {
  repository: string;
  tag: string;
}

/** Splits "localhost/svcmap:abc" into repository and tag. */
export function splitRef(ref: string): ImageRef {
  const i = ref.lastIndexOf(':');
  if (i <= ref.lastIndexOf('/')) throw new Error(`image reference without a tag: ${ref}`);
  return { repository: ref.slice(0, i), tag: ref.slice(i + 1) };
}

export function chartValues(cluster: Cluster, image: ImageRef): Record<string, string> {
  return {
    k8sServiceHost: cluster.net.nodes[0]!.ip,
    k8sServicePort: String(API_PORT),
    ...(cluster.controlPlane.opts.secondApiPort
      ? { k8sServiceHostFallbacks: `{${cluster.net.nodes[0]!.ip}:${cluster.controlPlane.opts.secondApiPort}}` }
      : {}),
    'image.repository': image.repository,
    'image.tag': image.tag,
    'image.pullPolicy': 'IfNotPresent',
    'bpf.autoMount': 'false',
    'cgroup.autoMount': 'false',
    logLevel: 'debug',
  };
}

export function helmFor(cluster: Cluster): Helm {
  return new Helm(cluster.kubectl, join(cluster.dir, 'helm'));
}

export async function installSvcmap(cluster: Cluster, image: ImageRef): Promise<void> {
  await helmFor(cluster).run(['install', RELEASE, CHART, '-n', NAMESPACE, ...Helm.sets(chartValues(cluster, image))]);
  await waitAgentsReady(cluster);
}

interface DaemonSetStatus {
  status: { desiredNumberScheduled?: number; numberReady?: number; updatedNumberScheduled?: number; numberAvailable?: number };
  metadata: { generation: number };
}

/** The DaemonSet rolled out on every node, each agent Ready (its readiness probe is /readyz: first full sync done). */
export async function waitAgentsReady(cluster: Cluster, timeoutMs = 180_000): Promise<void> {
  await cluster.kubectl.run(['-n', NAMESPACE, 'rollout', 'status', `daemonset/${RELEASE}`, `--timeout=${timeoutMs / 1000}s`], {
    timeoutMs: timeoutMs + 10_000,
  });
  await waitUntil(
    'an agent Ready on every node',
    async () => {
      const ds = await cluster.kubectl.json<DaemonSetStatus>(['-n', NAMESPACE, 'get', 'daemonset', RELEASE]);
      return ds.status.numberReady === cluster.nodes.length && ds.status.desiredNumberScheduled === cluster.nodes.length;
    },
    { timeoutMs: 30_000 },
  );
}

/**
 * The agents' logs and `svcmap status` of every node (from the node itself, so
 * that it answers also when no agent pod runs): printed when a check fails.
 */
export async function svcmapDiagnostics(cluster: Cluster): Promise<string> {
  const out: string[] = [];
  const add = async (title: string, f: () => Promise<string>) => {
    try {
      out.push(`==== ${title}\n${(await f()).trimEnd()}`);
    } catch (e) {
      out.push(`==== ${title}\n(failed: ${(e as Error).message.split('\n').slice(0, 5).join('\n')})`);
    }
  };
  await add('pods', () => cluster.kubectl.run(['get', 'pods', '-A', '-o', 'wide']));
  await add('agent logs', () =>
    cluster.kubectl.run(['-n', NAMESPACE, 'logs', '-l', AGENT_SELECTOR, '--all-containers', '--prefix', '--tail=200']),
  );
  await add('agent logs (previous)', () =>
    cluster.kubectl.run(['-n', NAMESPACE, 'logs', '-l', AGENT_SELECTOR, '--all-containers', '--prefix', '--previous', '--tail=50']),
  );
  for (const n of cluster.nodes) {
    await add(`${n.name}: svcmap status`, () => n.exec(join(REPO_ROOT, 'bin', 'svcmap'), ['status', '--pin-dir', PIN_DIR]));
  }
  await add('events', () => cluster.kubectl.run(['get', 'events', '-A', '--sort-by=.lastTimestamp']));
  return out.join('\n');
}
