// Where the API server is: --kubeconfig, else the in-cluster service account.
// With kube-proxy gone, the `kubernetes` Service VIP works only once svcmap
// has programmed it, so --k8s-api-server (like Cilium's k8sServiceHost and
// k8sServicePort) points the client at the API server directly. Several,
// comma-separated (as Cilium's k8s.apiServerURLs): the agent uses the first
// and moves on when one stops answering (api-servers.ts).
import { existsSync } from 'node:fs';
import { KubeConfig } from './client-node.ts';

export interface KubeConnection {
  kubeconfig?: string;
  /** https://HOST:PORT of the API server, bypassing the `kubernetes` Service; several comma-separated. */
  apiServer?: string;
}

/** The URLs in --k8s-api-server, in order, each https://HOST:PORT without a trailing slash; a clear error for one that is not a URL. */
export function apiServerUrls(value: string): string[] {
  const urls = value.split(',').map((u) => u.trim());
  return urls.map((u) => {
    let url: URL;
    try {
      url = new URL(u);
    } catch {
      throw new Error(`--k8s-api-server ${JSON.stringify(u)} is not a URL (use https://HOST:PORT, several separated by commas)`);
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:')
      throw new Error(`--k8s-api-server ${JSON.stringify(u)}: the scheme must be https (or http), not ${url.protocol}`);
    return url.toString().replace(/\/$/, '');
  });
}

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export function loadKubeConfig(conn: KubeConnection): KubeConfig {
  const kc = new KubeConfig();
  if (conn.kubeconfig) {
    if (!existsSync(conn.kubeconfig)) throw new Error(`--kubeconfig ${conn.kubeconfig} does not exist`);
    kc.loadFromFile(conn.kubeconfig);
  } else if (existsSync(`${SA_DIR}/token`)) {
    kc.loadFromCluster();
  } else {
    throw new Error(
      'no Kubernetes credentials: pass --kubeconfig PATH, run in a Pod with a service account, or use --manifests DIR for a local run',
    );
  }
  if (conn.apiServer) {
    const [first] = apiServerUrls(conn.apiServer);
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster to point at --k8s-api-server');
    // Keep the CA and credentials, change only where to connect.
    const clusters = kc.clusters.map((c) => (c.name === cluster.name ? { ...c, server: first! } : c));
    kc.loadFromOptions({ clusters, users: kc.users, contexts: kc.contexts, currentContext: kc.currentContext });
  }
  if (!kc.getCurrentCluster()) throw new Error('the kubeconfig has no current cluster');
  return kc;
}
