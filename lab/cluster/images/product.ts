// The svcmap image for a registry: the very image the lab cluster runs
// (svcmap.ts, built with buildah FROM scratch, cached), written to
// build/image/svcmap-<version>.oci.tar, and pushed from there.
//
//   node lab/cluster/images/product.ts build               (make image)
//   node lab/cluster/images/product.ts push REGISTRY        (make image-push REGISTRY=...)
//
// push tags it REGISTRY/svcmap:<version> and pushes with buildah (its own
// storage; credentials from `buildah login` or $REGISTRY_AUTH_FILE). Run as
// root, after make build.
import { copyFileSync, mkdirSync, readFileSync, renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../paths.ts';
import { buildah } from './buildah.ts';
import { exec } from './exec.ts';
import { buildImages } from './index.ts';
import { withScratch } from './scratch.ts';
import { SVCMAP_VERSION } from './svcmap.ts';

const VERSION = SVCMAP_VERSION;
export const PRODUCT_ARCHIVE = join(REPO_ROOT, 'build', 'image', `svcmap-${VERSION}.oci.tar`);

const out = (s: string) => process.stdout.write(`${s}\n`);

/** The number of files (not directories) in the image's layers. */
export async function fileCount(archive: string): Promise<number> {
  return withScratch(async (dir) => {
    await exec('tar', ['-xf', archive, '-C', dir]);
    const blob = (d: string) => join(dir, 'blobs', 'sha256', d.replace(/^sha256:/, ''));
    const index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as { manifests: Array<{ digest: string }> };
    const manifest = JSON.parse(readFileSync(blob(index.manifests[0]!.digest), 'utf8')) as { layers: Array<{ digest: string }> };
    let n = 0;
    // GNU tar tells a compressed layer from a plain one by itself.
    for (const l of manifest.layers) n += (await exec('tar', ['-tvf', blob(l.digest)])).split('\n').filter((e) => /^[-lh]/.test(e)).length;
    return n;
  });
}

async function build(): Promise<void> {
  const image = (await buildImages({ only: ['svcmap'], log: out })).get('svcmap')!;
  mkdirSync(join(REPO_ROOT, 'build', 'image'), { recursive: true });
  const tmp = `${PRODUCT_ARCHIVE}.tmp-${process.pid}`;
  copyFileSync(image.archive, tmp);
  renameSync(tmp, PRODUCT_ARCHIVE);
  out(
    `${PRODUCT_ARCHIVE}: ${(statSync(PRODUCT_ARCHIVE).size / 1e6).toFixed(1)} MB, ${await fileCount(PRODUCT_ARCHIVE)} files (${image.ref} in the lab)`,
  );
}

async function push(registry: string): Promise<void> {
  const target = `${registry.replace(/\/+$/, '')}/svcmap:${VERSION}`;
  const id = (await buildah(['pull', '--quiet', `oci-archive:${PRODUCT_ARCHIVE}`])).trim();
  try {
    await buildah(['push', id, `docker://${target}`]);
    out(`pushed ${target}`);
  } finally {
    await buildah(['rmi', '--force', id]);
  }
}

if (import.meta.main) await main(process.argv.slice(2));

async function main([cmd, arg]: string[]): Promise<void> {
  try {
    if (cmd === 'build') await build();
    else if (cmd === 'push' && arg) {
      if (!statSync(PRODUCT_ARCHIVE, { throwIfNoEntry: false })) throw new Error(`${PRODUCT_ARCHIVE} is missing: run make image`);
      await push(arg);
    } else {
      process.stderr.write('usage: product.ts build | push REGISTRY (e.g. make image-push REGISTRY=ghcr.io/you)\n');
      process.exitCode = 2;
    }
  } catch (e) {
    process.stderr.write(`svcmap image: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  }
}
