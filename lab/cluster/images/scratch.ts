// Where the image builds keep things, and scratch space that never outlives
// the build: every temporary directory (and anything debootstrap mounted in
// it) and every buildah working container is removed on success, on failure,
// on SIGINT/SIGTERM (lab's teardown registry), and, if the build was killed
// outright, by the sweep at the start of the next build.
//
//   .tools/images/<name>-<key>.oci.tar   the images (OCI archives)
//   .tools/images/rootfs/<key>.tar       debootstrap results
//   .tools/images/debs/                  debootstrap's .deb cache
//   .tools/images/npm/<key>/             production node_modules for the svcmap image
//   .tools/images/buildah/{root,run}     buildah's own storage (never /var/lib/containers)
//   .tools/images/tmp/<pid>-<n>/         scratch, named by the owning process
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { registerTeardown, unregisterTeardown, type Teardown } from '../../cleanup.ts';
import { REPO_ROOT } from '../paths.ts';
import { killRunningSteps } from './exec.ts';

export const IMAGES_DIR = process.env.SVCMAP_IMAGES_DIR ?? join(REPO_ROOT, '.tools', 'images');
const TMP_ROOT = join(IMAGES_DIR, 'tmp');

/** Runs undo on abort (signal, exit) until the returned release is called; steps still running are killed first. */
export function onAbort(undo: () => void): () => void {
  const t: Teardown = {
    emergency() {
      killRunningSteps();
      undo();
    },
  };
  registerTeardown(t);
  return () => unregisterTeardown(t);
}

/** Mount points at or below dir (from this process's mount table), deepest first. */
function mountsUnder(dir: string): string[] {
  const unescape = (s: string) => s.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => unescape(l.split(' ')[4] ?? ''))
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

/**
 * Removes a scratch tree: unmounts what debootstrap (or a killed chroot step)
 * left mounted in it first, and never crosses into another file system, so a
 * mount that could not be removed stops the rm instead of being emptied.
 */
export function removeTree(dir: string): void {
  if (!existsSync(dir)) return;
  for (const m of mountsUnder(dir)) spawnSync('umount', ['--lazy', m], { stdio: 'ignore' });
  const r = spawnSync('rm', ['-rf', '--one-file-system', dir], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cannot remove ${dir}: ${r.stderr.trim()}`);
}

let counter = 0;

/** A fresh scratch directory for fn, removed afterwards whatever happens. */
export async function withScratch<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  mkdirSync(TMP_ROOT, { recursive: true });
  const dir = join(TMP_ROOT, `${process.pid}-${++counter}`);
  mkdirSync(dir);
  const release = onAbort(() => removeTree(dir));
  try {
    return await fn(dir);
  } finally {
    release();
    removeTree(dir);
  }
}

const alive = (pid: number) => existsSync(`/proc/${pid}`);

/** Removes the scratch directories of build processes that no longer exist. */
export function sweepScratch(): string[] {
  if (!existsSync(TMP_ROOT)) return [];
  const gone = readdirSync(TMP_ROOT).filter((e) => {
    const pid = Number(/^(\d+)-/.exec(e)?.[1]);
    return !pid || !alive(pid);
  });
  for (const e of gone) removeTree(join(TMP_ROOT, e));
  return gone;
}

/** Fails with what to run when an input of an image is missing. */
export function requirePath(path: string, hint: string): void {
  if (!existsSync(path)) throw new Error(`${path} is missing: ${hint}`);
}
