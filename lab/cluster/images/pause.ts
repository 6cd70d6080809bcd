// pause: the pod sandbox image, FROM scratch with a static pause binary, named
// as kubelet 1.34 and e2e.test ask for it (so nothing is ever pulled).
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exec } from './exec.ts';
import type { Recipe } from './recipe.ts';
import { e2eImageRef } from './upstream.ts';

const SOURCE = fileURLToPath(new URL('pause.c', import.meta.url));

export const pause: Recipe = {
  name: 'pause',
  module: import.meta.url,
  async inputs() {
    return [
      { path: SOURCE },
      { fact: execFileSync('gcc', ['--version'], { encoding: 'utf8' }).split('\n')[0]! },
      { fact: await this.ref('') },
    ];
  },
  async ref() {
    return e2eImageRef('Pause'); // registry.k8s.io/pause:3.10.1
  },
  config: { entrypoint: ['/pause'] },
  async fill(root) {
    await exec('gcc', ['-static', '-s', '-O2', '-Wall', '-Wextra', '-Werror', '-o', join(root, 'pause'), SOURCE]);
  },
};
