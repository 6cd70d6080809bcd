// agnhost: the image e2e.test runs its Services checks in, under the name it
// asks for. Upstream (test/images/agnhost/Dockerfile) is Alpine + bind-tools
// curl netcat-openbsd iproute2 iperf bash, /agnhost (+ the agnhost-2 link),
// /coredns, /uploads, porter's localhost.crt/.key, and a user and group
// defined in the image. This is the nearest Debian: the same tools from
// bookworm (dnsutils for bind-tools, plus wget, ping, ps that the tests'
// shell commands use), the binaries make cluster-bins built from the same
// Kubernetes release.
import { copyFileSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { bin } from '../paths.ts';
import { DEFAULT_PATH } from './buildah.ts';
import { exec } from './exec.ts';
import type { Recipe } from './recipe.ts';
import { rootfsKey, rootfsTarball, unpackRootfs, type RootfsSpec } from './rootfs.ts';
import { requirePath } from './scratch.ts';
import { e2eImageRef, kubernetesSource } from './upstream.ts';

export const AGNHOST_ROOTFS: RootfsSpec = {
  suite: 'bookworm',
  packages: ['bash', 'ca-certificates', 'curl', 'dnsutils', 'iperf', 'iproute2', 'iputils-ping', 'netcat-openbsd', 'procps', 'wget'],
};

const porter = (f: string) => join(kubernetesSource(), 'test', 'images', 'agnhost', 'porter', f);

export const agnhost: Recipe = {
  name: 'agnhost',
  module: import.meta.url,
  async inputs() {
    for (const b of ['agnhost', 'coredns'] as const) requirePath(bin(b), 'run make cluster-bins');
    return [
      { fact: `rootfs ${rootfsKey(AGNHOST_ROOTFS)}` },
      { fact: await this.ref('') },
      { path: bin('agnhost') },
      { path: bin('coredns') },
      { path: porter('localhost.crt') },
      { path: porter('localhost.key') },
    ];
  },
  async ref() {
    return e2eImageRef('Agnhost'); // registry.k8s.io/e2e-test-images/agnhost:2.56
  },
  config: {
    entrypoint: ['/agnhost'],
    cmd: ['pause'],
    env: { PATH: DEFAULT_PATH },
    // test-webserver, netexec, serve-hostname, grpc-health-checking (upstream's EXPOSE)
    ports: ['80', '8080', '8081', '9376', '5000'],
  },
  async fill(root, ctx) {
    const tarball = await ctx.step('rootfs', () => rootfsTarball(AGNHOST_ROOTFS, ctx.log));
    await ctx.step('unpack rootfs', () => unpackRootfs(tarball, root));
    copyFileSync(bin('agnhost'), join(root, 'agnhost'));
    symlinkSync('agnhost', join(root, 'agnhost-2')); // entrypoint-tester tests run /agnhost-2
    copyFileSync(bin('coredns'), join(root, 'coredns'));
    mkdirSync(join(root, 'uploads')); // netexec's upload directory
    copyFileSync(porter('localhost.crt'), join(root, 'localhost.crt'));
    copyFileSync(porter('localhost.key'), join(root, 'localhost.key'));
    symlinkSync('/usr/bin/iperf', join(root, 'usr', 'local', 'bin', 'iperf'));
    // user-defined-in-image (uid 1000) in group-defined-in-image (gid 50000),
    // for the SupplementalGroups test; made by the image's own shadow tools.
    await exec('chroot', [root, 'groupadd', '-g', '50000', 'group-defined-in-image']);
    await exec('chroot', [
      root,
      'useradd',
      '-u',
      '1000',
      '-U',
      '-m',
      '-s',
      '/bin/sh',
      '-G',
      'group-defined-in-image',
      'user-defined-in-image',
    ]);
  },
};
