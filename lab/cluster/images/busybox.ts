// busybox: the image e2e.test runs its small shell steps in (init containers
// that sleep, `nc` clients in the Conntrack specs), under the name it asks
// for. Upstream's (registry.k8s.io/e2e-test-images/busybox) is busybox's
// static binary with every applet linked; this is Debian's busybox-static,
// FROM scratch, the same way. installBusybox() is shared with labtool's
// image, which carries the same shell.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_PATH } from './buildah.ts';
import type { Input } from './cache.ts';
import type { Recipe } from './recipe.ts';
import { requirePath } from './scratch.ts';
import { e2eImageRef } from './upstream.ts';

export const BUSYBOX = '/bin/busybox';

/** The static busybox as an input (fails with what to install when it is missing). */
export function busyboxInput(): Input {
  requirePath(BUSYBOX, 'install the static busybox: apt-get install busybox-static (make cluster-images does)');
  return { path: BUSYBOX };
}

/** /bin/busybox, every applet linked to it (as `busybox --install -s`), and a world-writable /tmp. */
export function installBusybox(root: string): void {
  mkdirSync(join(root, 'bin'), { recursive: true });
  copyFileSync(BUSYBOX, join(root, 'bin', 'busybox'));
  const applets = execFileSync(BUSYBOX, ['--list'], { encoding: 'utf8' })
    .split('\n')
    .filter((a) => a && a !== 'busybox');
  for (const a of applets) symlinkSync('busybox', join(root, 'bin', a));
  mkdirSync(join(root, 'tmp'));
  chmodSync(join(root, 'tmp'), 0o1777);
}

export const busybox: Recipe = {
  name: 'busybox',
  module: import.meta.url,
  async inputs() {
    return [busyboxInput(), { fact: await this.ref('') }];
  },
  async ref() {
    return e2eImageRef('BusyBox');
  },
  config: { entrypoint: ['/bin/sh'], env: { PATH: DEFAULT_PATH } },
  async fill(root) {
    installBusybox(root);
  },
};
