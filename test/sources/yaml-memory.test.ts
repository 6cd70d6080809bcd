// The file source's memory after reading does not depend on the text it
// read: a YAML file is read (the fast loader, and the positional path for a
// file it leaves) and its objects kept, the text dropped; the heap it leaves
// behind is bounded by what the same objects cost when read from JSON
// (JSON.parse makes fresh strings), not by the text. The file carries 16 MiB
// of comments, so a kept text (a value that is a V8 slice of it, or a node
// tree with its source) is 16 MiB over the bound.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { serviceObject, sliceObject, yamlDocuments, yamlList } from '../../bench/manifests.ts';
import { makeServices } from '../../bench/workload.ts';
import { fastYamlDocuments } from '../../src/sources/file/fast-yaml.ts';
import { loadManifestFile } from '../../src/sources/file/load.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const MiB = 2 ** 20;

const services = makeServices(300, 10);
const PADDING = `${'# a comment line of sixty-four characters, kept out of objects.\n'.repeat((16 * MiB) / 64)}`;

/** Heap left after reading `file` with its objects kept (and how many). */
async function retainedBy(file: string): Promise<{ bytes: number; objects: number }> {
  gc();
  gc();
  const before = process.memoryUsage().heapUsed;
  const loaded = await loadManifestFile(file);
  gc();
  gc();
  const bytes = process.memoryUsage().heapUsed - before;
  return { bytes, objects: loaded?.objects.length ?? 0 };
}

t.test('reading a YAML file keeps its objects, not its text', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-yaml-mem-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const items: unknown[] = [];
  for (const s of services) items.push(serviceObject(s), sliceObject(s));
  writeFileSync(join(dir, 'list.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  // Names of 14+ characters (svc-123-bench), labels, apiVersions: values V8 would slice.
  writeFileSync(join(dir, 'fast.yaml'), `${PADDING}${yamlList(services)}`);
  // An alias more than the fast loader takes: the positional path reads it.
  const aliases = Array.from({ length: 11 }, (_, i) => `k${i}: *a`).join(', ');
  writeFileSync(
    join(dir, 'positional.yaml'),
    `${PADDING}${yamlDocuments(services)}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: &a cm}\ndata: {${aliases}}\n`,
  );

  const json = await retainedBy(join(dir, 'list.json'));
  const bound = json.bytes * 1.5 + 2 * MiB;
  t.equal(json.objects, 600, 'the JSON file: 300 Services and their slices');
  t.equal(
    fastYamlDocuments(readFileSync(join(dir, 'positional.yaml'), 'utf8')),
    undefined,
    'positional.yaml is one the fast loader leaves',
  );
  for (const f of ['fast.yaml', 'positional.yaml']) {
    const y = await retainedBy(join(dir, f));
    t.equal(y.objects, 600, `${f}: ${y.objects} objects read`);
    t.ok(
      y.bytes < bound,
      `${f}: ${(y.bytes / MiB).toFixed(1)} MiB retained, bound ${(bound / MiB).toFixed(1)} MiB (1.5 x the same objects read from JSON, ${(json.bytes / MiB).toFixed(1)} MiB, + 2 MiB); the text is ${(PADDING.length / MiB).toFixed(0)} MiB more`,
    );
  }
});
