// The folder layout is the architecture (DESIGN.md's layers): nothing below
// imports anything above. Checked on every import of every source file.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const SRC = fileURLToPath(new URL('../src', import.meta.url));
// Top to bottom; a layer may import itself and anything after it.
const LAYERS = ['cli', 'agent', 'sources', 'model', 'sync', 'maps', 'bpf', 'util'];

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

const layerOf = (path: string) => relative(SRC, path).split('/')[0]!;

t.test('no layer imports one above it', async (t) => {
  const wrong: string[] = [];
  let checked = 0;
  for (const file of files(SRC)) {
    const from = LAYERS.indexOf(layerOf(file));
    for (const m of readFileSync(file, 'utf8').matchAll(/^\s*(?:import|export)[^'"]*from\s+'(\.[^']+)'/gm)) {
      const target = resolve(dirname(file), m[1]!);
      if (!target.startsWith(SRC)) {
        wrong.push(`${relative(SRC, file)} imports ${m[1]} outside src/`);
        continue;
      }
      const to = LAYERS.indexOf(layerOf(target));
      checked++;
      if (to < from) wrong.push(`${relative(SRC, file)} (${LAYERS[from]}) imports ${relative(SRC, target)} (${LAYERS[to]})`);
    }
  }
  t.same(wrong, []);
  t.ok(checked > 100, `${checked} imports checked`);
  t.same([...new Set(files(SRC).map(layerOf))].sort(), [...LAYERS].sort(), 'every folder of src/ is a known layer');
});
