// jessie-dnsutils: the image the DNS specs of e2e.test query from (their
// "jessie" prober: dig, getent, hostname -i, awk, seq in sh -c loops), under
// the name e2e.test asks for. Upstream (test/images/jessie-dnsutils) is
// Debian + dnsutils + CoreDNS at /coredns; this is the same on Debian
// bookworm (the mirror this machine has), with the CoreDNS make cluster-bins
// built.
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { bin } from '../paths.ts';
import { DEFAULT_PATH } from './buildah.ts';
import type { Recipe } from './recipe.ts';
import { rootfsKey, rootfsTarball, unpackRootfs, type RootfsSpec } from './rootfs.ts';
import { requirePath } from './scratch.ts';
import { e2eImageRef } from './upstream.ts';

export const JESSIE_DNSUTILS_ROOTFS: RootfsSpec = { suite: 'bookworm', packages: ['dnsutils'] };

export const jessieDnsutils: Recipe = {
  name: 'jessie-dnsutils',
  module: import.meta.url,
  async inputs() {
    requirePath(bin('coredns'), 'run make cluster-bins');
    return [{ fact: `rootfs ${rootfsKey(JESSIE_DNSUTILS_ROOTFS)}` }, { fact: await this.ref('') }, { path: bin('coredns') }];
  },
  async ref() {
    return e2eImageRef('JessieDnsutils');
  },
  // Upstream's has no entrypoint of its own (Debian's: /bin/bash); the specs give the command.
  config: { entrypoint: ['/bin/bash'], env: { PATH: DEFAULT_PATH } },
  async fill(root, ctx) {
    const tarball = await ctx.step('rootfs', () => rootfsTarball(JESSIE_DNSUTILS_ROOTFS, ctx.log));
    await ctx.step('unpack rootfs', () => unpackRootfs(tarball, root));
    copyFileSync(bin('coredns'), join(root, 'coredns'));
  },
};
