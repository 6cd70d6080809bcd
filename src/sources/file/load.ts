// Reads a directory of manifests into validated objects. Reading is separate
// from watching (watch.ts) so that a reload is always a full, consistent read.

import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Problem } from '../../model/types.ts';
import { identify, supportedKind, validateObject, type KubeObject } from '../../model/schemas.ts';
import { parseManifest } from './parse.ts';

export interface LoadedObject {
  obj: KubeObject;
  /** The file it was read from. */
  source: string;
}

export interface LoadResult {
  objects: LoadedObject[];
  problems: Problem[];
}

/**
 * Manifest files only: *.yaml, *.yml, *.json, but not dotfiles (vim's
 * .x.swp, emacs' .#x lock files, Kubernetes' ..data volume internals) or
 * editor leftovers such as x.yaml~ and #x.yaml#.
 */
export function isManifestName(name: string): boolean {
  if (name.startsWith('.') || name.startsWith('#') || name.endsWith('~') || name.endsWith('.swp')) return false;
  return /\.(ya?ml|json)$/i.test(name);
}

function isENOENT(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | null)?.code === 'ENOENT';
}

/** Text of `file`, or undefined when it vanished between readdir and read (or is not a regular file). */
async function readManifest(file: string): Promise<string | undefined> {
  try {
    // stat follows symlinks: ConfigMap volumes present files as links into ..data/.
    if (!(await stat(file)).isFile()) return undefined;
    return await readFile(file, 'utf8');
  } catch (err) {
    if (isENOENT(err)) return undefined;
    throw err;
  }
}

/**
 * Every Service, EndpointSlice and Node in `dir` (not recursive). Other kinds
 * are ignored; invalid objects and unreadable documents are reported and
 * skipped. When two files define the same object the later file (by name)
 * wins. Rejects when `dir` itself cannot be read, so callers can keep their
 * last good state instead of treating a missing directory as "no services".
 */
export async function loadManifestDir(dir: string): Promise<LoadResult> {
  const names = (await readdir(dir)).filter(isManifestName).sort();
  const problems: Problem[] = [];
  const byId = new Map<string, LoadedObject>();

  for (const name of names) {
    const file = join(dir, name);
    let text: string | undefined;
    try {
      text = await readManifest(file);
    } catch (err) {
      problems.push({ kind: '', namespace: '', name: '', path: '', message: `cannot read: ${(err as Error).message}`, severity: 'error', source: file });
      continue;
    }
    if (text === undefined) continue;

    const parsed = parseManifest(text, file);
    problems.push(...parsed.problems);
    for (const raw of parsed.objects) {
      const r = raw as { kind?: unknown } | null;
      // Other kinds (ConfigMaps, Deployments, Knative Services, ...) are not ours.
      if (typeof r === 'object' && r !== null && typeof r.kind === 'string' && supportedKind(raw) === undefined) continue;
      const result = validateObject(raw, file);
      if (!result.ok) {
        problems.push(...result.problems);
        continue;
      }
      const obj = result.obj;
      const key = `${obj.kind}/${'namespace' in obj.metadata ? obj.metadata.namespace : ''}/${obj.metadata.name}`;
      const earlier = byId.get(key);
      if (earlier !== undefined) {
        const who = identify(obj);
        const where = earlier.source === file ? 'earlier in the same file' : `in ${earlier.source}`;
        problems.push({ ...who, path: '', message: `also defined ${where}; this later definition wins`, severity: 'warning', source: file });
        byId.delete(key); // keep output in file order, with the winner where it was read
      }
      byId.set(key, { obj, source: file });
    }
  }
  return { objects: [...byId.values()], problems };
}
