// Reads a directory of manifests into validated objects. Reading is separate
// from watching (watch.ts); the file source re-reads only the files that changed.

import { hash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Problem } from '../../model/types.ts';
import { identify, supportedKind, type KubeObject } from '../../model/schemas.ts';
import { leanObject, validateObject } from '../../model/validate.ts';
import { parseManifest } from './parse.ts';
import { sameValue } from './same-value.ts';

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

export interface LoadedFile {
  /** Valid Services, EndpointSlices and Nodes, in file order (a later duplicate included). */
  objects: KubeObject[];
  /**
   * Each object's fingerprint (a hash of its document), same order: what
   * the next read of the file may reuse. A first read leaves it undefined
   * for the documents the lean validation takes.
   */
  prints: Array<string | undefined>;
  problems: Problem[];
}

/** The objects of an earlier read of the file, which a document that has not changed takes its object from. */
export interface KnownObjects {
  /** By objectKeyOf. */
  byKey: ReadonlyMap<string, KubeObject>;
  /** By fingerprint. */
  byPrint: ReadonlyMap<string, KubeObject>;
}

/** A document's fingerprint: equal documents, equal prints. */
function fingerprint(raw: unknown): string {
  return hash('sha1', JSON.stringify(raw), 'base64');
}

/**
 * Every Service, EndpointSlice and Node in one manifest file; undefined when
 * the file vanished or is not a regular file. Other kinds are ignored;
 * invalid objects and unreadable documents are reported and skipped.
 * `known`: the objects of an earlier read; a document that has not changed
 * takes its object from there, so the model sees the same object (and does
 * not recompute its Service). A read again fingerprints every document and
 * takes the unchanged ones by fingerprint. A first read fingerprints only
 * the documents zod validates (50-100 µs each, worth not repeating): the
 * plain ones (the lean validation takes them in a few µs, about what a
 * fingerprint costs) are not, and the first read again of their file
 * validates them and keeps the earlier object of their name when equal.
 */
export async function loadManifestFile(file: string, known?: KnownObjects): Promise<LoadedFile | undefined> {
  let text: string | undefined;
  try {
    text = await readManifest(file);
  } catch (err) {
    return {
      objects: [],
      prints: [],
      problems: [
        { kind: '', namespace: '', name: '', path: '', message: `cannot read: ${(err as Error).message}`, severity: 'error', source: file },
      ],
    };
  }
  if (text === undefined) return undefined;
  const parsed = parseManifest(text, file);
  const problems = parsed.problems;
  const objects: KubeObject[] = [];
  const prints: Array<string | undefined> = [];
  for (const raw of parsed.objects) {
    const r = raw as { kind?: unknown } | null;
    // Other kinds (ConfigMaps, Deployments, Knative Services, ...) are not ours.
    if (typeof r === 'object' && r !== null && typeof r.kind === 'string' && supportedKind(raw) === undefined) continue;
    const print = known === undefined ? undefined : fingerprint(raw);
    const same = print === undefined ? undefined : known?.byPrint.get(print);
    if (same !== undefined) {
      objects.push(same);
      prints.push(print);
      continue;
    }
    const lean = leanObject(raw);
    if (lean !== undefined) {
      const before = known?.byKey.get(objectKeyOf(lean));
      objects.push(before !== undefined && sameValue(before, lean) ? before : lean);
      prints.push(print);
      continue;
    }
    const result = validateObject(raw, file);
    if (result.ok) {
      objects.push(result.obj);
      prints.push(print ?? fingerprint(raw));
    } else problems.push(...result.problems);
  }
  return { objects, prints, problems };
}

/** The identity two definitions of one object share: kind/namespace/name. */
export function objectKeyOf(obj: KubeObject): string {
  return `${obj.kind}/${'namespace' in obj.metadata ? obj.metadata.namespace : ''}/${obj.metadata.name}`;
}

/** The warning on a later definition of an object that wins over an earlier one (in `earlier`, or the same file when undefined). */
export function duplicateProblem(obj: KubeObject, file: string, earlier: string | undefined): Problem {
  const where = earlier === undefined ? 'earlier in the same file' : `in ${earlier}`;
  return { ...identify(obj), path: '', message: `also defined ${where}; this later definition wins`, severity: 'warning', source: file };
}

/**
 * Every Service, EndpointSlice and Node in `dir` (not recursive), as
 * loadManifestFile reads each file. When two files define the same object
 * the later file (by name) wins. Rejects when `dir` itself cannot be read, so
 * callers can keep their last good state instead of treating a missing
 * directory as "no services".
 */
export async function loadManifestDir(dir: string): Promise<LoadResult> {
  const names = (await readdir(dir)).filter(isManifestName).sort();
  const problems: Problem[] = [];
  const byId = new Map<string, LoadedObject>();

  for (const name of names) {
    const file = join(dir, name);
    const loaded = await loadManifestFile(file);
    if (loaded === undefined) continue;
    problems.push(...loaded.problems);
    for (const obj of loaded.objects) {
      const key = objectKeyOf(obj);
      const earlier = byId.get(key);
      if (earlier !== undefined) {
        problems.push(duplicateProblem(obj, file, earlier.source === file ? undefined : earlier.source));
        byId.delete(key); // keep output in file order, with the winner where it was read
      }
      byId.set(key, { obj, source: file });
    }
  }
  return { objects: [...byId.values()], problems };
}
