// A kubeconfig pointing at the test API server. client-node 2.x refuses an http://
// server unless the cluster has insecure-skip-tls-verify: true, hence that line.

import { writeFile } from 'node:fs/promises';
import { stringify } from 'yaml';

export interface KubeconfigOptions {
  /** Bearer token in the user entry (the server accepts any unless started with `token`). Default "svcmap-test-token". */
  token?: string;
  /** Namespace of the context. Default "default". */
  namespace?: string;
  /** Name used for the cluster, user and context. Default "svcmap-test". */
  name?: string;
}

/** The kubeconfig YAML for a server URL (http://127.0.0.1:PORT) or anything with a `url`. */
export function kubeconfigYaml(server: string | { url: string }, opts: KubeconfigOptions = {}): string {
  const url = typeof server === 'string' ? server : server.url;
  const name = opts.name ?? 'svcmap-test';
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server: url, 'insecure-skip-tls-verify': true } }],
    users: [{ name, user: { token: opts.token ?? 'svcmap-test-token' } }],
    contexts: [{ name, context: { cluster: name, user: name, namespace: opts.namespace ?? 'default' } }],
    'current-context': name,
    preferences: {},
  });
}

/** Write the kubeconfig to path; resolves with path. */
export async function writeKubeconfig(path: string, server: string | { url: string }, opts: KubeconfigOptions = {}): Promise<string> {
  await writeFile(path, kubeconfigYaml(server, opts), { mode: 0o600 });
  return path;
}
