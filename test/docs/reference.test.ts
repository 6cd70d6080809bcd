// docs/reference/ is generated from the code (lab/docs/reference.ts, `make
// docs`): regenerated here in memory, it must equal what is committed, so a
// flag, metric, annotation or chart value changed without its docs fails
// here with the file and the command that fixes it.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { REFERENCE_DIR, renderReference } from '../../lab/docs/reference.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

t.test('docs/reference is what the code says (make docs)', async (t) => {
  const want = await renderReference(ROOT);
  const dir = join(ROOT, REFERENCE_DIR);
  const have = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.md')) : [];
  const stale: string[] = [];
  for (const [name, text] of want) {
    const path = join(dir, name);
    if (!existsSync(path)) stale.push(`${REFERENCE_DIR}/${name}: missing`);
    else if (readFileSync(path, 'utf8') !== text) {
      const a = readFileSync(path, 'utf8').split('\n');
      const b = text.split('\n');
      const line = b.findIndex((l, i) => l !== a[i]);
      stale.push(
        `${REFERENCE_DIR}/${name}: differs from the code from line ${line + 1} (committed: ${JSON.stringify(a[line] ?? '')}, generated: ${JSON.stringify(b[line] ?? '')})`,
      );
    }
  }
  for (const name of have) if (!want.has(name)) stale.push(`${REFERENCE_DIR}/${name}: not generated any more`);
  t.same(
    stale,
    [],
    stale.length ? `docs/reference is stale; run \`make docs\` and commit the result:\n  ${stale.join('\n  ')}` : 'up to date',
  );
});

t.test('the generator is deterministic', async (t) => {
  const a = await renderReference(ROOT);
  const b = await renderReference(ROOT);
  t.same([...a], [...b]);
});

t.test('every command, annotation and chart value is in the reference', async (t) => {
  const files = await renderReference(ROOT);
  const { COMMANDS } = await import('../../src/cli/commands.ts');
  const { METADATA_KEYS } = await import('../../src/model/metadata-keys.ts');
  for (const c of COMMANDS) t.match(files.get('cli.md'), `## svcmap ${c.spec.name}\n`, c.spec.name);
  for (const k of Object.values(METADATA_KEYS)) t.match(files.get('annotations.md'), `\`${k.key}\``, k.key);
  const schema = JSON.parse(readFileSync(join(ROOT, 'charts/svcmap/values.schema.json'), 'utf8')) as {
    properties: Record<string, unknown>;
  };
  for (const key of Object.keys(schema.properties)) t.match(files.get('chart-values.md'), new RegExp(`\\| \`${key}[.\`]`), key);
  t.match(files.get('metrics.md'), '`kubeproxy_sync_proxy_rules_duration_seconds` | histogram | `ip_family`');
  t.match(files.get('metrics.md'), '`svcmap_sockets_destroyed_total` | counter | `proto`');
});
