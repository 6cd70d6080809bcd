// Manual use of a lab cluster:
//
//   node lab/cluster/cli.ts up [--nodes 2] [--image ARCHIVE ...]
//   node lab/cluster/cli.ts sweep     what killed runs left (after lab/sweep.ts)
//
// brings a cluster up, prints how to reach it, and keeps it until Ctrl-C (or
// SIGTERM), then removes everything. kubectl runs from the outside namespace:
//   nsenter --net=/run/netns/<outside> .tools/cluster/bin/kubectl --kubeconfig <file> get nodes
// (Node >= 22.18 / 24, which runs TypeScript directly; e.g. node_modules/.bin/node.)

import { parseArgs } from 'node:util';
import { Cluster } from './cluster.ts';
import { bin } from './paths.ts';
import { sweepStaleClusters } from './sweep.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    nodes: { type: 'string', default: '2' },
    image: { type: 'string', multiple: true, default: [] },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (values.help || (positionals[0] !== 'up' && positionals[0] !== 'sweep')) {
  process.stdout.write('usage: node lab/cluster/cli.ts up [--nodes N] [--image OCI-ARCHIVE ...]\n       node lab/cluster/cli.ts sweep\n');
  process.exit(values.help ? 0 : 2);
}
if (positionals[0] === 'sweep') {
  const swept = sweepStaleClusters();
  process.stdout.write(swept.length ? swept.map((id) => `swept cluster ${id}\n`).join('') : 'no stale cluster\n');
  process.exit(0);
}

const cluster = await Cluster.up({ nodes: Number(values.nodes), images: values.image ?? [] });
const outside = cluster.net.outside.ns.ns;
process.stdout.write(
  `\ncluster ${cluster.lab.id} is up. kubectl:\n  nsenter --net=/run/netns/${outside} ${bin('kubectl')} --kubeconfig ${cluster.adminKubeconfig} get nodes -o wide\n`,
);
for (const n of cluster.nodes) process.stdout.write(`node ${n.name}: ${n.argv('sh', []).join(' ')}\n`);
process.stdout.write('Ctrl-C removes it.\n');
await new Promise<void>((resolve) => {
  process.once('SIGINT', resolve);
  process.once('SIGTERM', resolve);
});
await cluster.down();
