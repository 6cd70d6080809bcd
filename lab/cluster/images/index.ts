// The container images of the real-cluster tier, built locally with buildah
// (no Docker engine, no registry) into OCI archives that the cluster harness
// imports with `ctr -n k8s.io images import`. Each image is cached under a
// key that hashes everything it is made of: a build with nothing changed
// only hashes its inputs.
//
//   const images = await buildImages({ only: ['pause', 'labtool'], log: console.log });
//   images.get('pause')  // { name, ref: 'registry.k8s.io/pause:3.10.1', archive: '.tools/images/pause-<key>.oci.tar', ... }
import { copyFileSync, existsSync, mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { agnhost } from './agnhost.ts';
import { buildImage, sweepBuildah } from './buildah.ts';
import { busybox } from './busybox.ts';
import { inputsKey, pruneOld } from './cache.ts';
import { jessieDnsutils } from './jessie-dnsutils.ts';
import { coredns } from './coredns.ts';
import { timed } from './exec.ts';
import { labtool } from './labtool.ts';
import { nginx } from './nginx.ts';
import { pause } from './pause.ts';
import { regressionIssue74839 } from './regression-issue-74839.ts';
import type { ImageName, Recipe } from './recipe.ts';
import { IMAGES_DIR, sweepScratch, withScratch } from './scratch.ts';
import { svcmap } from './svcmap.ts';

export type { ImageName } from './recipe.ts';
export { IMAGES_DIR } from './scratch.ts';

export interface BuiltImage {
  name: ImageName;
  /** The name containerd knows it by after import. */
  ref: string;
  /** The OCI archive (absolute path). */
  archive: string;
  /** The image's static program, kept on the host too (labtool). */
  binary?: string;
  /** True when nothing changed since the archive was built. */
  cached: boolean;
  seconds: number;
}

export const RECIPES: readonly Recipe[] = [pause, labtool, svcmap, coredns, agnhost, jessieDnsutils, regressionIssue74839, busybox, nginx];
export const IMAGE_NAMES: readonly ImageName[] = RECIPES.map((r) => r.name);

// How a working container becomes an image (config flags, commit format)
// shapes every image: part of every key.
const BUILDAH_MODULE = fileURLToPath(new URL('buildah.ts', import.meta.url));

export async function buildImages(
  opts: { only?: readonly ImageName[]; log?: (line: string) => void } = {},
): Promise<Map<ImageName, BuiltImage>> {
  const log = opts.log ?? (() => {});
  for (const n of opts.only ?? []) {
    if (!IMAGE_NAMES.includes(n)) throw new Error(`unknown image ${JSON.stringify(n)}; the images are ${IMAGE_NAMES.join(', ')}`);
  }
  mkdirSync(IMAGES_DIR, { recursive: true });
  const result = new Map<ImageName, BuiltImage>();
  let swept = false;
  for (const recipe of RECIPES.filter((r) => !opts.only || opts.only.includes(r.name))) {
    const t0 = performance.now();
    const key = inputsKey([
      { fact: recipe.name },
      { path: fileURLToPath(recipe.module) },
      { path: BUILDAH_MODULE },
      ...(await recipe.inputs()),
    ]);
    const ref = await recipe.ref(key);
    const archive = join(IMAGES_DIR, `${recipe.name}-${key}.oci.tar`);
    const binary = recipe.binary ? join(IMAGES_DIR, `${recipe.name}-${key}.bin`) : undefined;
    const cached = existsSync(archive) && (!binary || existsSync(binary));
    if (!cached) {
      if (!swept) {
        // What a build killed with SIGKILL left behind (its pid is gone).
        const gone = [...sweepScratch(), ...(await sweepBuildah())];
        if (gone.length) log(`removed leftovers of killed builds: ${gone.join(', ')}`);
        swept = true;
      }
      const step = <T>(label: string, fn: () => Promise<T>) => timed(log, `${recipe.name}: ${label}`, fn);
      await withScratch(async (scratch) => {
        const tmp = join(scratch, 'image.oci.tar');
        const fill = async (root: string) => {
          await step('fill', () => recipe.fill(root, { scratch, log, step }));
          if (recipe.binary) copyFileSync(join(root, recipe.binary), join(scratch, 'binary'));
        };
        await buildImage({ name: recipe.name, ref, archive: tmp, config: recipe.config, step, fill });
        // Complete or absent: a half-written file never counts as cached.
        if (binary) renameSync(join(scratch, 'binary'), binary);
        renameSync(tmp, archive);
      });
      // Older versions of this image: the newest few stay (a cluster may still import them).
      pruneOld(IMAGES_DIR, new RegExp(`^${recipe.name}-[0-9a-f]{16}\\.(oci\\.tar|bin)$`), binary ? 6 : 3);
    }
    const seconds = (performance.now() - t0) / 1000;
    result.set(recipe.name, { name: recipe.name, ref, archive, ...(binary ? { binary } : {}), cached, seconds });
    log(`${recipe.name.padEnd(8)} ${cached ? 'cached' : 'built '} ${seconds.toFixed(1).padStart(6)}s  ${ref}  ${archive}`);
  }
  return result;
}
