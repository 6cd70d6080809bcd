// Where the API server is: --kubeconfig, else the in-cluster service account.
// With kube-proxy gone, the `kubernetes` Service VIP works only once svcmap
// has programmed it, so --k8s-api-server (like Cilium's k8sServiceHost and
// k8sServicePort) points the client at the API server directly.
import { existsSync } from 'node:fs';
import { KubeConfig } from './client-node.ts';

export interface KubeConnection {
  kubeconfig?: string;
  /** https://HOST:PORT of the API server, bypassing the `kubernetes` Service. */
  apiServer?: string;
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
    let url: URL;
    try {
      url = new URL(conn.apiServer);
    } catch {
      throw new Error(`--k8s-api-server ${JSON.stringify(conn.apiServer)} is not a URL (use https://HOST:PORT)`);
    }
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster to point at --k8s-api-server');
    // Keep the CA and credentials, change only where to connect.
    const clusters = kc.clusters.map((c) => (c.name === cluster.name ? { ...c, server: url.toString().replace(/\/$/, '') } : c));
    kc.loadFromOptions({ clusters, users: kc.users, contexts: kc.contexts, currentContext: kc.currentContext });
  }
  if (!kc.getCurrentCluster()) throw new Error('the kubeconfig has no current cluster');
  return kc;
}
