import t, { type Test } from 'tap';
import { mkdirSync, mkdtempSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { watchManifestDir } from '../../src/sources/file/watch.ts';
import { loadManifestDir } from '../../src/sources/file/load.ts';

// Every step waits for the change signal it caused and then checks that a
// reload sees the change; nothing here asserts on time.

const svcYaml = (name: string, ip: string) =>
  `apiVersion: v1\nkind: Service\nmetadata:\n  name: ${name}\nspec:\n  clusterIP: ${ip}\n  ports:\n  - port: 80\n`;

async function names(dir: string): Promise<string[]> {
  const r = await loadManifestDir(dir);
  return r.objects.map((o) => o.obj.metadata.name).sort();
}

function setup(t: Test, dir: string) {
  let waiter: (() => void) | undefined;
  const w = watchManifestDir(dir, () => waiter?.(), { debounceMs: 20, retryMs: 20, checkMs: 50 });
  t.teardown(() => w.close());
  /** Resolves at the first change signal after the call. */
  const nextChange = () =>
    new Promise<void>((resolve) => {
      waiter = () => {
        waiter = undefined;
        resolve();
      };
    });
  return nextChange;
}

function tempRoot(t: Test): string {
  const root = mkdtempSync(join(tmpdir(), 'svcmap-watch-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  return root;
}

t.test('fires after a write, a rename into place and a delete', async (t) => {
  const dir = join(tempRoot(t), 'manifests');
  mkdirSync(dir);
  const nextChange = setup(t, dir);

  let change = nextChange();
  writeFileSync(join(dir, 'a.yaml'), svcYaml('a', '10.96.0.1'));
  await change;
  t.same(await names(dir), ['a'], 'written file seen');

  // How editors and `kubectl` wrappers save: write a temp file, rename it over.
  change = nextChange();
  writeFileSync(join(dir, '.b.yaml.tmp'), svcYaml('b', '10.96.0.2'));
  await change;
  change = nextChange();
  renameSync(join(dir, '.b.yaml.tmp'), join(dir, 'b.yaml'));
  await change;
  t.same(await names(dir), ['a', 'b'], 'renamed file seen');

  change = nextChange();
  writeFileSync(join(dir, '.a.yaml.tmp'), svcYaml('a2', '10.96.0.3'));
  renameSync(join(dir, '.a.yaml.tmp'), join(dir, 'a.yaml'));
  await change;
  t.same(await names(dir), ['a2', 'b'], 'file replaced by rename seen');

  change = nextChange();
  unlinkSync(join(dir, 'a.yaml'));
  await change;
  t.same(await names(dir), ['b'], 'deletion seen');
});

t.test('survives the directory going away and coming back', async (t) => {
  const root = tempRoot(t);
  const dir = join(root, 'manifests');
  mkdirSync(dir);
  writeFileSync(join(dir, 'a.yaml'), svcYaml('a', '10.96.0.1'));
  const nextChange = setup(t, dir);

  rmSync(dir, { recursive: true });
  // Give the watcher a moment to notice it is gone (not an assertion: if it
  // has not, the re-created directory is found by the next check instead).
  await new Promise((r) => setTimeout(r, 100));
  const change = nextChange();
  mkdirSync(dir);
  writeFileSync(join(dir, 'c.yaml'), svcYaml('c', '10.96.0.3'));
  await change;
  t.same(await names(dir), ['c']);

  // And it watches the new directory, not the deleted one.
  const again = nextChange();
  writeFileSync(join(dir, 'd.yaml'), svcYaml('d', '10.96.0.4'));
  await again;
  t.same(await names(dir), ['c', 'd']);
});

t.test('follows a directory replaced by rename', async (t) => {
  const root = tempRoot(t);
  const dir = join(root, 'manifests');
  mkdirSync(dir);
  writeFileSync(join(dir, 'a.yaml'), svcYaml('a', '10.96.0.1'));
  const nextChange = setup(t, dir);

  const staged = join(root, 'staged');
  mkdirSync(staged);
  writeFileSync(join(staged, 'e.yaml'), svcYaml('e', '10.96.0.5'));
  const change = nextChange();
  renameSync(dir, join(root, 'old'));
  renameSync(staged, dir);
  await change;
  t.same(await names(dir), ['e']);

  const again = nextChange();
  writeFileSync(join(dir, 'f.yaml'), svcYaml('f', '10.96.0.6'));
  await again;
  t.same(await names(dir), ['e', 'f']);
});

t.test('waits for a directory that does not exist yet', async (t) => {
  const dir = join(tempRoot(t), 'later');
  const nextChange = setup(t, dir);
  const change = nextChange();
  mkdirSync(dir);
  writeFileSync(join(dir, 'a.yaml'), svcYaml('a', '10.96.0.1'));
  await change;
  t.same(await names(dir), ['a']);
});
