// kubectl (and anything else that talks to the API server, e.g. helm) run from
// inside a lab network namespace: the root namespace has no route to the
// cluster, by design.

import { run } from '../run.ts';
import { netnsPath } from '../netns.ts';
import { bin } from './paths.ts';

export class Kubectl {
  readonly netns: string;
  readonly kubeconfig: string;
  readonly #cacheDir: string;

  /**
   * cacheDir: kubectl's discovery cache, of this cluster only (every lab cluster
   * has the same API address, so a shared ~/.kube/cache would serve stale data).
   */
  constructor(netns: string, kubeconfig: string, cacheDir: string) {
    this.netns = netns;
    this.kubeconfig = kubeconfig;
    this.#cacheDir = cacheDir;
  }

  /** Any command inside the namespace, with KUBECONFIG set. */
  exec(
    cmd: string,
    args: readonly string[],
    opts: { input?: string; timeoutMs?: number; env?: Record<string, string> } = {},
  ): Promise<string> {
    const env = Object.entries({ KUBECONFIG: this.kubeconfig, KUBECACHEDIR: this.#cacheDir, ...opts.env }).map(([k, v]) => `${k}=${v}`);
    return run('nsenter', [`--net=${netnsPath(this.netns)}`, '--', 'env', ...env, cmd, ...args], {
      timeoutMs: opts.timeoutMs ?? 60_000,
      ...(opts.input !== undefined ? { input: opts.input } : {}),
    });
  }

  run(args: readonly string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<string> {
    return this.exec(bin('kubectl'), args, opts);
  }

  async json<T = unknown>(args: readonly string[], opts: { timeoutMs?: number } = {}): Promise<T> {
    return JSON.parse(await this.run([...args, '-o', 'json'], opts)) as T;
  }

  apply(manifest: string): Promise<string> {
    return this.run(['apply', '-f', '-'], { input: manifest });
  }

  /** True if `get --raw path` answers "ok". */
  async rawOk(path: string): Promise<boolean> {
    try {
      return (await this.run(['get', '--raw', path], { timeoutMs: 5000 })).trim() === 'ok';
    } catch {
      return false;
    }
  }
}
