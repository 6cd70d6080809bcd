// Which YAML loader the file source uses, measured: today's positional path
// (yaml's parseAllDocuments with a line counter, then toJS), yaml's streaming
// Parser + Composer (one document's tree at a time, no line counter), and
// js-yaml's loadAll, on one 10k-Service file (a kind: List, as kubectl
// prints it, and the same as a multi-document stream) and on 1000 small
// files (a Service and its slice each). Time per read (median of reps) and
// the heap retained by the objects read (after a GC, the text dropped).
//
//   node --expose-gc bench/yaml-loaders.ts [--reps 5] [--services 10000] [--files 1000]
import { loadAll } from 'js-yaml';
import { parseArgs } from 'node:util';
import { Composer, Parser, LineCounter, parseAllDocuments } from 'yaml';
import { parseManifest } from '../src/sources/file/parse.ts';
import { yamlDocuments, yamlList } from './manifests.ts';
import { median } from './stats.ts';
import { makeServices } from './workload.ts';

type Loader = (text: string) => unknown[];

const LOADERS: Record<string, Loader> = {
  'yaml parseAllDocuments + LineCounter (today)': (text) => {
    const lines = new LineCounter();
    return parseAllDocuments(text, { lineCounter: lines }).map((d) => d.toJS({ maxAliasCount: 100 }));
  },
  'yaml Parser + Composer, streamed': (text) => {
    const out: unknown[] = [];
    for (const doc of new Composer().compose(new Parser().parse(text), true)) out.push(doc.toJS({ maxAliasCount: 100 }));
    return out;
  },
  'js-yaml loadAll': (text) => loadAll(text),
  'the file source (parseManifest: js-yaml, strings copied)': (text) => parseManifest(text, 'x.yaml').objects,
};

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

function measure(name: string, texts: () => string[], load: Loader, reps: number): string {
  const times: number[] = [];
  for (let r = 0; r < reps; r++) {
    const ts = texts();
    const t0 = performance.now();
    for (const t of ts) load(t);
    times.push(performance.now() - t0);
  }
  gc!();
  gc!();
  const before = process.memoryUsage().heapUsed;
  let kept: unknown[][] = [];
  {
    const ts = texts();
    kept = ts.map((t) => load(t));
  }
  gc!();
  gc!();
  const retained = process.memoryUsage().heapUsed - before;
  const n = kept.reduce((a, k) => a + k.length, 0);
  kept = [];
  return `| ${name} | ${median(times).toFixed(0)} ms | ${(retained / 2 ** 20).toFixed(1)} MiB (${n} documents) |`;
}

const { values } = parseArgs({
  options: {
    reps: { type: 'string', default: '5' },
    services: { type: 'string', default: '10000' },
    files: { type: 'string', default: '1000' },
  },
});
const reps = Number(values.reps);
const big = makeServices(Number(values.services), 10);
const small = makeServices(Number(values.files), 10);
const cases: Array<[string, () => string[]]> = [
  [`${big.length} Services, one kind: List`, () => [yamlList(big)]],
  [`${big.length} Services, one multi-document file`, () => [yamlDocuments(big)]],
  [`${small.length} files of one Service + slice`, () => small.map((s) => yamlDocuments([s]))],
];
for (const [c, make] of cases) {
  const made = make();
  const f = () => made;
  const bytes = f().reduce((a, t) => a + t.length, 0);
  process.stdout.write(
    `\n${c} (${(bytes / 2 ** 20).toFixed(1)} MiB of text)\n\n| loader | read | heap retained after |\n| --- | --- | --- |\n`,
  );
  for (const [name, load] of Object.entries(LOADERS)) process.stdout.write(`${measure(name, f, load, reps)}\n`);
}
