// Cluster add-ons a kubeadm cluster has and svcmap depends on being proxied:
// CoreDNS behind the kube-dns Service.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Kubectl } from './kubectl.ts';
import { CLUSTER_DNS_IP } from './topology.ts';

const COREDNS = fileURLToPath(new URL('./manifests/coredns.yaml', import.meta.url));

export function corednsManifest(image: string): string {
  return readFileSync(COREDNS, 'utf8').replaceAll('__IMAGE__', image).replaceAll('__DNS_IP__', CLUSTER_DNS_IP);
}

/** Creates CoreDNS; it becomes ready only once ClusterIPs are translated on its node. */
export async function deployCoreDns(kubectl: Kubectl, image: string): Promise<void> {
  await kubectl.apply(corednsManifest(image));
}
