// CLI: remove what crashed lab runs left behind (namespaces, cgroups, processes in
// them, run records). Runs of live processes are never touched.
//
//   node lab/sweep.ts [--prefix sm] [--orphans] [--json]
//
// Also detaches and removes bpffs pin directories of runs whose owner died.
//
// (Node >= 22.18 / 24, which runs TypeScript directly; e.g. node_modules/.bin/node.)

import { parseArgs } from 'node:util';
import { sweepStale } from './cleanup.ts';
import { sweepStalePins } from './pins.ts';

const { values } = parseArgs({
  options: {
    prefix: { type: 'string' },
    orphans: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (values.help) {
  process.stdout.write(
    'usage: node lab/sweep.ts [--prefix sm] [--orphans] [--json]\n  removes namespaces, cgroups and processes of lab runs whose owner died;\n  --orphans also lab-named ones without any run record\n',
  );
  process.exit(0);
}

const report = sweepStale(values.prefix, { orphans: values.orphans ?? false });
// Pins (and the programs their links keep attached) of runs whose owner died.
const pins = sweepStalePins();
for (const p of pins) process.stdout.write(`  pins   ${p}\n`);
if (values.json) {
  process.stdout.write(`${JSON.stringify(report)}\n`);
} else if (report.runs.length === 0) {
  process.stdout.write('nothing stale\n');
} else {
  process.stdout.write(
    `swept runs ${report.runs.join(' ')}: ${report.netns.length} namespaces, ${report.cgroups.length} cgroups, ${report.pids.length} processes\n`,
  );
  for (const n of report.netns) process.stdout.write(`  netns  ${n}\n`);
  for (const c of report.cgroups) process.stdout.write(`  cgroup ${c}\n`);
}
