// helm (the pinned one in .tools/bin, `make helm`) against a lab cluster, run
// from the outside namespace like kubectl.

import { join } from 'node:path';
import type { Kubectl } from './kubectl.ts';
import { REPO_ROOT } from './paths.ts';

export const HELM = process.env.HELM ?? join(REPO_ROOT, '.tools', 'bin', 'helm');
export const CHART = join(REPO_ROOT, 'charts', 'svcmap');

export class Helm {
  readonly kubectl: Kubectl;
  readonly #home: string;
  /** home: a directory of the run for helm's cache, config and data (never the user's). */
  constructor(kubectl: Kubectl, home: string) {
    this.kubectl = kubectl;
    this.#home = home;
  }

  run(args: readonly string[], timeoutMs = 600_000): Promise<string> {
    const env = {
      HELM_CACHE_HOME: join(this.#home, 'cache'),
      HELM_CONFIG_HOME: join(this.#home, 'config'),
      HELM_DATA_HOME: join(this.#home, 'data'),
    };
    return this.kubectl.exec(HELM, args, { timeoutMs, env });
  }

  /** --set key=value pairs from an object. */
  static sets(values: Record<string, string | number | boolean>): string[] {
    return Object.entries(values).flatMap(([k, v]) => ['--set', `${k}=${v}`]);
  }
}
