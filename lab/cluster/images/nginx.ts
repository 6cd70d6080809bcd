// nginx: the image of the pods in the EndpointSlice conformance spec (it
// only needs them running), under the name e2e.test asks for. Upstream's
// (test/images/nginx) is the official nginx image; this is Debian bookworm's
// nginx package, run in the foreground as the official image runs it.
import { DEFAULT_PATH } from './buildah.ts';
import type { Recipe } from './recipe.ts';
import { rootfsKey, rootfsTarball, unpackRootfs, type RootfsSpec } from './rootfs.ts';
import { e2eImageRef } from './upstream.ts';

export const NGINX_ROOTFS: RootfsSpec = { suite: 'bookworm', packages: ['nginx'] };

export const nginx: Recipe = {
  name: 'nginx',
  module: import.meta.url,
  async inputs() {
    return [{ fact: `rootfs ${rootfsKey(NGINX_ROOTFS)}` }, { fact: await this.ref('') }];
  },
  async ref() {
    return e2eImageRef('Nginx');
  },
  config: { entrypoint: ['/usr/sbin/nginx', '-g', 'daemon off;'], env: { PATH: DEFAULT_PATH }, ports: ['80'] },
  async fill(root, ctx) {
    const tarball = await ctx.step('rootfs', () => rootfsTarball(NGINX_ROOTFS, ctx.log));
    await ctx.step('unpack rootfs', () => unpackRootfs(tarball, root));
  },
};
