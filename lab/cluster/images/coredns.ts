// coredns: the cluster DNS, FROM scratch with the static binary make
// cluster-bins builds, tagged with the release its go.mod pins.
import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { bin, REPO_ROOT } from '../paths.ts';
import type { Recipe } from './recipe.ts';
import { requirePath } from './scratch.ts';

const GO_MOD = join(REPO_ROOT, 'lab', 'cluster', 'modules', 'coredns', 'go.mod');

function version(): string {
  const v = /^require github\.com\/coredns\/coredns (v[\d.]+)$/m.exec(readFileSync(GO_MOD, 'utf8'))?.[1];
  if (!v) throw new Error(`no "require github.com/coredns/coredns vX.Y.Z" line in ${GO_MOD}`);
  return v;
}

export const coredns: Recipe = {
  name: 'coredns',
  module: import.meta.url,
  async inputs() {
    requirePath(bin('coredns'), 'run make cluster-bins');
    return [{ path: bin('coredns') }, { fact: version() }];
  },
  async ref() {
    return `localhost/coredns:${version()}`;
  },
  // As upstream's image, minus its USER nonroot: the harness's Deployment
  // decides who it runs as (port 53 needs root or NET_BIND_SERVICE).
  config: { entrypoint: ['/coredns'], ports: ['53/udp', '53/tcp', '9153/tcp'] },
  async fill(root) {
    copyFileSync(bin('coredns'), join(root, 'coredns'));
  },
};
