// A recorded release (RELEASES), built from its own commit as it was: a git
// worktree of that commit, its own `make build`, its own image recipe
// (lab/cluster/images of that commit) and its chart. Cached by commit: a
// second call for the same commit only reads release.json. Run as root.
//
//   node lab/release/build.ts [v0.1.0]      (make release-image RELEASE=v0.1.0; default: the release before this build)
//
//   .tools/releases/<commit>/src/            the worktree (detached at <commit>), built
//   .tools/releases/<commit>/images/         its image builds (rootfs and debs shared with .tools/images)
//   .tools/releases/<commit>/release.json    written last: present = complete
//
// One build per commit at a time: the work runs under flock on
// .tools/releases/<commit>.lock.
import { existsSync, mkdirSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { exec } from '../cluster/images/exec.ts';
import { writeAtomic } from '../cluster/images/cache.ts';
import { IMAGES_DIR } from '../cluster/images/scratch.ts';
import { REPO_ROOT } from '../cluster/paths.ts';
import { findRelease, previousRelease, type Release, releasesFile } from './releases.ts';

// .tools resolved: a worktree's .tools is often a link to the main checkout's, and the
// paths recorded (release.json, git's worktree list) must not depend on the worktree.
const TOOLS = join(REPO_ROOT, '.tools');
export const RELEASES_CACHE = process.env.SVCMAP_RELEASES_DIR ?? join(existsSync(TOOLS) ? realpathSync(TOOLS) : TOOLS, 'releases');

export const BuiltRelease = z.object({
  version: z.string(),
  commit: z.string(),
  /** The name containerd knows the release's image by after import (its own recipe's ref). */
  imageRef: z.string(),
  /** The image's OCI archive. */
  archive: z.string(),
  /** The release's chart (charts/svcmap of its worktree). */
  chart: z.string(),
});
export type BuiltRelease = z.infer<typeof BuiltRelease>;

const NODE = join(REPO_ROOT, 'node_modules', '.bin', 'node');
const THIS = fileURLToPath(import.meta.url);
const dirOf = (commit: string) => join(RELEASES_CACHE, commit);

/** The release's build, from the cache or made now (minutes: npm ci, make build, the image). */
export async function buildRelease(r: Release, log: (line: string) => void = () => {}): Promise<BuiltRelease> {
  const cached = readBuilt(r);
  if (cached) return cached;
  mkdirSync(RELEASES_CACHE, { recursive: true });
  log(`${r.version}: building ${r.commit} (git worktree, npm ci, make build, image)`);
  const t0 = performance.now();
  const out = await exec('flock', [`${dirOf(r.commit)}.lock`, NODE, THIS, '--locked', r.version], { timeoutMs: 40 * 60_000 });
  for (const l of out.trimEnd().split('\n')) if (l) log(l);
  const built = readBuilt(r);
  if (!built) throw new Error(`${r.version}: the build ended without ${join(dirOf(r.commit), 'release.json')}`);
  log(`${r.version}: built in ${((performance.now() - t0) / 1000).toFixed(0)}s: ${built.imageRef}`);
  return built;
}

function readBuilt(r: Release): BuiltRelease | undefined {
  const file = join(dirOf(r.commit), 'release.json');
  if (!existsSync(file)) return undefined;
  const b = BuiltRelease.parse(JSON.parse(readFileSync(file, 'utf8')));
  // Same commit, other name (a release renamed in RELEASES): the build is the same.
  return existsSync(b.archive) && existsSync(b.chart) ? { ...b, version: r.version } : undefined;
}

/** The build itself, under the commit's lock. */
async function buildLocked(r: Release, log: (line: string) => void): Promise<void> {
  if (readBuilt(r)) return; // another process built it while this one waited for the lock
  const dir = dirOf(r.commit);
  const src = join(dir, 'src');
  const images = join(dir, 'images');
  // What a killed build left: the worktree is made again from the commit.
  if (existsSync(src))
    await exec('git', ['-C', REPO_ROOT, 'worktree', 'remove', '--force', src]).catch(() => rmSync(src, { recursive: true, force: true }));
  await exec('git', ['-C', REPO_ROOT, 'worktree', 'prune']);
  mkdirSync(dir, { recursive: true });
  const step = async (label: string, f: () => Promise<unknown>) => {
    const t0 = performance.now();
    await f();
    log(`${r.version}: ${label}: ${((performance.now() - t0) / 1000).toFixed(1)}s`);
  };
  await step(`git worktree add ${src} ${r.commit}`, () => exec('git', ['-C', REPO_ROOT, 'worktree', 'add', '--detach', src, r.commit]));
  // make build runs npm ci first (its npm-deps target); the release's own Makefile, compilers and lock file.
  await step('make build', () => exec('make', ['-C', src, 'build'], { timeoutMs: 30 * 60_000, env: { ...process.env, MAKEFLAGS: '' } }));
  // Its own image directory (the shared one keeps only a few svcmap builds); the
  // Debian trees and packages are the same for every release: shared.
  mkdirSync(images, { recursive: true });
  for (const shared of ['rootfs', 'debs']) {
    mkdirSync(join(IMAGES_DIR, shared), { recursive: true });
    if (!existsSync(join(images, shared))) symlinkSync(join(IMAGES_DIR, shared), join(images, shared));
  }
  let out = '';
  await step('image', async () => {
    out = await exec(join(src, 'node_modules', '.bin', 'node'), [join(src, 'lab', 'cluster', 'images', 'build.ts'), 'svcmap'], {
      cwd: src,
      env: { ...process.env, SVCMAP_IMAGES_DIR: images },
      timeoutMs: 30 * 60_000,
    });
  });
  // "svcmap   built    41.2s  localhost/svcmap:<tag>  <archive>" (build.ts's line, the same in every release so far).
  const m = /^svcmap\s+(?:built|cached)\s+[\d.]+s\s+(\S+)\s+(\S+)$/m.exec(out);
  if (!m) throw new Error(`${r.version}: no image line in the release's build output:\n${out}`);
  const built: BuiltRelease = {
    version: r.version,
    commit: r.commit,
    imageRef: m[1]!,
    archive: m[2]!,
    chart: join(src, 'charts', 'svcmap'),
  };
  writeAtomic(join(dir, 'release.json'), `${JSON.stringify(built, null, 2)}\n`);
}

function pick(arg: string | undefined): Release {
  const all = releasesFile();
  if (arg) return findRelease(all, arg);
  const version = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  return previousRelease(all, version);
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const locked = args[0] === '--locked';
  const out = (l: string) => process.stdout.write(`${l}\n`);
  try {
    const r = pick(locked ? args[1] : args[0]);
    if (locked) await buildLocked(r, out);
    else {
      const b = await buildRelease(r, out);
      out(`${b.version} ${b.commit}: image ${b.imageRef} (${b.archive}), chart ${b.chart}`);
    }
  } catch (e) {
    process.stderr.write(`release build: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  }
}
