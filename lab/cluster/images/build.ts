// Builds the cluster images (all, or those named) and prints one line per
// image: name, cached or built, seconds, ref, archive; while building, how
// long each step took.
//
//   node lab/cluster/images/build.ts [pause|labtool|svcmap|coredns|agnhost ...]
//
// Run as root (debootstrap, buildah); `make cluster-images` runs it after
// `make build` and `make cluster-bins`.
import { buildImages, IMAGE_NAMES, type ImageName } from './index.ts';

const names = process.argv.slice(2);
const unknown = names.filter((n) => !IMAGE_NAMES.includes(n as ImageName));
if (unknown.length) {
  process.stderr.write(`unknown image(s): ${unknown.join(', ')}; the images are ${IMAGE_NAMES.join(', ')}\n`);
  process.exit(2);
}

const t0 = performance.now();
try {
  await buildImages({ ...(names.length ? { only: names as ImageName[] } : {}), log: (line) => process.stdout.write(`${line}\n`) });
  process.stdout.write(`images: ${((performance.now() - t0) / 1000).toFixed(1)}s\n`);
} catch (e) {
  process.stderr.write(`cluster images: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exitCode = 1;
}
