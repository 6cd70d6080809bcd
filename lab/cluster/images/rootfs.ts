// Debian root file systems for the images that need a distribution (svcmap,
// agnhost, jessie-dnsutils, nginx), made with debootstrap from the mirror this machine uses and kept
// as a tarball keyed on the suite and the package list: debootstrap runs once
// per list (under a minute here), every later image build unpacks the tarball.
//
// Everything here works on the tree from outside (it is never entered with
// chroot), so symbolic links are never followed: an absolute link in the
// tree would name a file of this machine.
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inputsKey, pruneOld } from './cache.ts';
import { exec, StepError } from './exec.ts';
import { IMAGES_DIR, withScratch } from './scratch.ts';

export interface RootfsSpec {
  suite: string;
  /** Added to debootstrap's minbase (--include): what the image's programs need. */
  packages: readonly string[];
}

// deb.debian.org, as in /etc/apt/sources.list.d/debian.sources; not part of the key.
const MIRROR = process.env.SVCMAP_DEBIAN_MIRROR ?? 'http://deb.debian.org/debian';
const ROOTFS_DIR = join(IMAGES_DIR, 'rootfs');
const DEBS_DIR = join(IMAGES_DIR, 'debs');

/** The cache key: the suite, the sorted package list and this file (how the tree is made and slimmed). */
export function rootfsKey(spec: RootfsSpec): string {
  return inputsKey([
    { fact: `debootstrap --variant=minbase ${spec.suite} ${[...spec.packages].sort().join(',')}` },
    { path: fileURLToPath(import.meta.url) },
  ]);
}

/** The tarball of spec's tree, made with debootstrap when it is not cached. */
export async function rootfsTarball(spec: RootfsSpec, log: (line: string) => void): Promise<string> {
  const tarball = join(ROOTFS_DIR, `${spec.suite}-${rootfsKey(spec)}.tar`);
  if (existsSync(tarball)) return tarball;
  mkdirSync(ROOTFS_DIR, { recursive: true });
  mkdirSync(DEBS_DIR, { recursive: true });
  const t0 = performance.now();
  await withScratch(async (dir) => {
    const root = join(dir, 'root');
    try {
      await exec(
        'debootstrap',
        ['--variant=minbase', `--include=${spec.packages.join(',')}`, `--cache-dir=${DEBS_DIR}`, spec.suite, root, MIRROR],
        { timeoutMs: 30 * 60_000 },
      );
    } catch (e) {
      // debootstrap's stderr says which step failed; its log says why.
      const logFile = join(root, 'debootstrap', 'debootstrap.log');
      const detail = existsSync(logFile)
        ? `\n--- ${logFile} (end) ---\n${readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-30).join('\n')}`
        : '';
      if (e instanceof StepError) throw new StepError(e.command, e.code, `${e.output}${detail}`);
      throw e;
    }
    slim(root);
    const tmp = join(dir, 'rootfs.tar');
    await exec('tar', ['--numeric-owner', '--xattrs', '--xattrs-include=*', '-C', root, '-cf', tmp, '.']);
    renameSync(tmp, tarball);
  });
  pruneOld(ROOTFS_DIR, /\.tar$/, 6); // four lists in use (svcmap, agnhost, jessie-dnsutils, nginx); room for a change
  log(`rootfs ${spec.suite} +${spec.packages.join(',')}: debootstrap ${((performance.now() - t0) / 1000).toFixed(1)}s -> ${tarball}`);
  return tarball;
}

/** Unpacks a rootfs tarball into an (empty) image root, owners and capabilities included. */
export async function unpackRootfs(tarball: string, root: string): Promise<void> {
  await exec('tar', ['--numeric-owner', '--xattrs', '--xattrs-include=*', '-xpf', tarball, '-C', root]);
}

const isDir = (p: string) => lstatSync(p, { throwIfNoEntry: false })?.isDirectory() ?? false;

/** Empties a directory of the tree, except the entries keep() accepts. */
function emptyDir(dir: string, keep: (name: string) => boolean = () => false): void {
  if (!isDir(dir)) return;
  for (const e of readdirSync(dir)) if (!keep(e)) rmSync(join(dir, e), { recursive: true, force: true });
}

/**
 * What an image does not need, as Debian's slim images leave it out: apt's
 * package lists and caches, logs of the bootstrap, documentation (except the
 * copyright files), man pages, translations; and this machine's resolv.conf
 * and hostname, which debootstrap copies in (the runtime mounts the pod's).
 */
function slim(root: string): void {
  for (const d of ['var/lib/apt/lists', 'var/cache/apt', 'var/log/apt', 'usr/share/man', 'usr/share/info']) {
    emptyDir(join(root, d), (e) => e === 'partial' || e === 'archives');
  }
  emptyDir(join(root, 'var/cache/apt/archives'), (e) => e === 'partial' || e === 'lock');
  for (const f of ['var/log/dpkg.log', 'var/log/bootstrap.log', 'var/log/alternatives.log', 'etc/resolv.conf', 'etc/hostname'])
    rmSync(join(root, f), { force: true });
  writeFileSync(join(root, 'etc/hostname'), 'localhost\n'); // removed first: never written through a link
  emptyDir(join(root, 'usr/share/locale'), (e) => e === 'locale.alias');
  const doc = join(root, 'usr/share/doc');
  for (const pkg of readdirSync(doc)) {
    if (isDir(join(doc, pkg))) emptyDir(join(doc, pkg), (e) => e === 'copyright');
  }
  for (const f of readdirSync(join(root, 'var/cache/debconf'))) if (f.endsWith('-old')) rmSync(join(root, 'var/cache/debconf', f));
}
