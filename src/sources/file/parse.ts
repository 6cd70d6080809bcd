// One manifest file's text -> the raw objects it holds. YAML streams may hold
// several documents; `kind: List` and typed lists (ServiceList, ...) as
// `kubectl get -o yaml` prints them are flattened. A broken document is
// reported with its line and skipped; the other documents still count.
// YAML is read by the fast loader (fast-yaml.ts: plain objects, nothing of
// the text kept); a file it leaves alone (a syntax error, a feature the two
// loaders read differently) is read again by the positional path, yaml's
// document model with a line counter, for today's objects and messages.

import { LineCounter, parseAllDocuments } from 'yaml';
import type { Problem } from '../../model/types.ts';
import { fastYamlDocuments, ownStrings } from './fast-yaml.ts';

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function fileProblem(file: string, message: string): Problem {
  return { kind: '', namespace: '', name: '', path: '', message, severity: 'error', source: file };
}

/**
 * Items of a List, recursively. Typed lists (`ServiceList`) may omit apiVersion
 * and kind on their items, as the API server does; they are taken from the list.
 */
export function flattenLists(raw: unknown): unknown[] {
  if (!isRecord(raw) || typeof raw.kind !== 'string' || !raw.kind.endsWith('List') || !('items' in raw)) return [raw];
  const items = Array.isArray(raw.items) ? raw.items : [];
  const itemKind = raw.kind === 'List' ? undefined : raw.kind.slice(0, -'List'.length);
  return items.flatMap((item) => {
    if (itemKind !== undefined && isRecord(item)) {
      item = { ...item, apiVersion: item.apiVersion ?? raw.apiVersion, kind: item.kind ?? itemKind };
    }
    return flattenLists(item);
  });
}

export function parseManifest(text: string, file: string): { objects: unknown[]; problems: Problem[] } {
  // JSON is YAML, but JSON.parse reads it an order of magnitude faster; a
  // .json file it rejects goes the YAML way, for the same messages as before.
  if (/\.json$/i.test(file)) {
    try {
      const value: unknown = JSON.parse(text);
      return { objects: value === null ? [] : flattenLists(value), problems: [] };
    } catch {
      // reported below, with its line
    }
  }
  const docs = fastYamlDocuments(text);
  if (docs === undefined) return parsePositional(text, file);
  const objects: unknown[] = [];
  for (const value of docs) if (value !== null && value !== undefined) objects.push(...flattenLists(value));
  return { objects, problems: [] };
}

/**
 * The YAML stream read with yaml's document model and a line counter: every
 * error with its line, column and document. Slower, and it holds the whole
 * stream's node tree while it reads: for the files the fast loader leaves.
 */
export function parsePositional(text: string, file: string): { objects: unknown[]; problems: Problem[] } {
  const objects: unknown[] = [];
  const problems: Problem[] = [];
  const lines = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter: lines });
  docs.forEach((doc, i) => {
    const where = docs.length > 1 ? ` (document ${i + 1})` : '';
    const error = doc.errors[0];
    if (error !== undefined) {
      const at = error.linePos?.[0] ?? lines.linePos(error.pos[0]);
      // yaml appends a code excerpt after the first line; logs want one line.
      const reason = error.message.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '') ?? error.message;
      problems.push(fileProblem(file, `YAML syntax error at line ${at.line}, column ${at.col}${where}: ${reason}`));
      return;
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (err) {
      const at = lines.linePos(doc.range[0]);
      problems.push(fileProblem(file, `YAML error at line ${at.line}${where}: ${(err as Error).message}`));
      return;
    }
    if (value === null || value === undefined) return; // empty document, e.g. a trailing `---`
    objects.push(...flattenLists(ownStrings(value)));
  });
  return { objects, problems };
}
