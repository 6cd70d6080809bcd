// Completes an image root with the libraries its ELF files need, from a
// Debian tree (runtime-root.ts). The Dockerfile's "rootfs" stage runs it; the
// buildah recipe (svcmap.ts) calls completeRuntimeRoot directly.
//
//   node runtime-root-cli.ts TREE ROOT      (e.g. / /rootfs)
import { completeRuntimeRoot } from './runtime-root.ts';

const [tree, root] = process.argv.slice(2);
if (!tree || !root) {
  process.stderr.write('usage: node runtime-root-cli.ts TREE ROOT\n');
  process.exit(2);
}
const r = completeRuntimeRoot(tree, root);
process.stdout.write(`${r.libraries.length} libraries from ${r.packages.join(', ')}:\n${r.libraries.map((l) => `  ${l}\n`).join('')}`);
