// LIST semantics: which resourceVersion a list is served at, pagination with continue
// tokens over a consistent snapshot, and the list body shape the real server returns.

import type { Resource } from './resources.ts';
import type { Selector } from './selectors.ts';
import { badRequest, expired, invalid, tooLargeResourceVersion, type StatusCause } from './status.ts';
import type { Store } from './store.ts';
import type { KubeObject, StoredObject } from './types.ts';

export interface ListParams {
  namespace?: string;
  resourceVersion?: string;
  resourceVersionMatch?: string;
  limit?: number;
  continue?: string;
  labelSelector: Selector;
  fieldSelector: Selector;
}

export interface ListBody {
  kind: string;
  apiVersion: string;
  metadata: { resourceVersion: string; continue?: string; remainingItemCount?: number };
  items: KubeObject[];
}

// etcd3 store wording (apiserver/pkg/storage/etcd3/errors.go).
const EXPIRED_LIST = 'The resourceVersion for the provided list is too old.';
const INCONSISTENT_CONTINUE =
  'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.';

/** Same format as apiserver/pkg/storage: base64url(JSON {v, rv, start}), start = last key + "\0". rv -1 = inconsistent (read latest). */
export function encodeContinue(start: string, rv: number): string {
  return Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv, start })).toString('base64url');
}

export function decodeContinue(token: string): { start: string; rv: number } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch (err) {
    throw badRequest(`continue key is not valid: ${err instanceof Error ? err.message : String(err)}`);
  }
  const c = parsed as { v?: unknown; rv?: unknown; start?: unknown };
  if (c.v !== 'meta.k8s.io/v1')
    throw badRequest(`continue key is not valid: server does not recognize this encoded version "${String(c.v)}"`);
  if (typeof c.rv !== 'number' || !Number.isInteger(c.rv) || c.rv === 0)
    throw badRequest('continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
  if (typeof c.start !== 'string' || c.start === '')
    throw badRequest('continue key is not valid: encoded start key empty (version meta.k8s.io/v1)');
  return { start: c.start, rv: c.rv };
}

/** A resourceVersion query value as a number; 400 for anything that is not a decimal integer. */
export function parseResourceVersion(rv: string): number {
  if (!/^\d+$/.test(rv)) throw badRequest(`invalid resource version: ${JSON.stringify(rv)}`);
  return Number(rv);
}

/** ListOptions validation (apimachinery internalversion/validation): 422 Invalid, as the real server answers. */
function validate(p: ListParams): void {
  const causes: StatusCause[] = [];
  const forbid = (field: string, msg: string): void => {
    causes.push({ reason: 'FieldValueForbidden', message: `Forbidden: ${msg}`, field });
  };
  const match = p.resourceVersionMatch;
  if (match) {
    if (!p.resourceVersion) forbid('resourceVersionMatch', 'resourceVersionMatch is forbidden unless resourceVersion is provided');
    if (p.continue) forbid('resourceVersionMatch', 'resourceVersionMatch is forbidden when continue is provided');
    if (match !== 'Exact' && match !== 'NotOlderThan') {
      causes.push({
        reason: 'FieldValueNotSupported',
        message: `Unsupported value: "${match}": supported values: "Exact", "NotOlderThan", ""`,
        field: 'resourceVersionMatch',
      });
    }
    if (match === 'Exact' && p.resourceVersion === '0')
      forbid('resourceVersionMatch', 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"');
  }
  if (causes.length) throw invalid('ListOptions', 'meta.k8s.io', '', causes);
  if (p.continue && p.resourceVersion && p.resourceVersion !== '0')
    throw badRequest('specifying resource version is not allowed when using continue');
}

export async function listObjects(store: Store, r: Resource, p: ListParams, opts: { tooLargeWaitMs: number }): Promise<ListBody> {
  validate(p);
  let limit = p.limit ?? 0;
  let snapshotRv = store.resourceVersion;
  let startKey: string | undefined;
  let entries: ReadonlyArray<readonly [string, StoredObject]>;
  if (p.continue) {
    const token = decodeContinue(p.continue);
    startKey = token.start;
    if (token.rv !== -1) {
      // A later page is read at the first page's resourceVersion: a consistent snapshot,
      // until compaction takes that revision away.
      if (token.rv < store.oldestResourceVersion) throw expired(INCONSISTENT_CONTINUE, encodeContinue(token.start, -1));
      snapshotRv = token.rv;
    }
    entries = store.listAt(r, snapshotRv);
  } else if (p.resourceVersion === undefined || p.resourceVersion === '' || p.resourceVersion === '0') {
    // "" is a consistent (quorum) read, "0" is "any version" from the watch cache; both are
    // the latest state here. The real watch cache ignores limit for resourceVersion=0.
    if (p.resourceVersion === '0') limit = 0;
    entries = store.listAt(r, snapshotRv);
  } else {
    const wanted = parseResourceVersion(p.resourceVersion);
    if (wanted > store.resourceVersion && !(await store.waitForResourceVersion(wanted, opts.tooLargeWaitMs))) {
      throw tooLargeResourceVersion(wanted, store.resourceVersion);
    }
    if (p.resourceVersionMatch === 'Exact') {
      if (wanted < store.oldestResourceVersion) throw expired(EXPIRED_LIST);
      snapshotRv = wanted;
    } else {
      snapshotRv = store.resourceVersion; // NotOlderThan: anything at least that new; the latest is
    }
    entries = store.listAt(r, snapshotRv);
  }

  // Entries are in key order ("namespace/name"): a page is a binary search to its first key
  // (and a namespace's range: '0' follows '/'), then a walk that stops one match past the
  // page, so a 100k list in pages of 500 is not quadratic.
  const matches = (o: StoredObject) =>
    (p.namespace === undefined || o.metadata.namespace === p.namespace) && p.labelSelector.matches(o) && p.fieldSelector.matches(o);
  const inNamespace = p.namespace !== undefined && r.namespaced;
  let from = inNamespace ? firstAtOrAfter(entries, `${p.namespace}/`) : 0;
  if (startKey !== undefined) from = Math.max(from, firstAtOrAfter(entries, startKey));
  const end = inNamespace ? firstAtOrAfter(entries, `${p.namespace}0`) : entries.length;
  const page: Array<readonly [string, StoredObject]> = [];
  let more = false;
  for (let i = from; i < end; i++) {
    const e = entries[i]!;
    if (!matches(e[1])) continue;
    if (limit > 0 && page.length === limit) {
      more = true;
      break;
    }
    page.push(e);
  }
  const metadata: ListBody['metadata'] = { resourceVersion: String(snapshotRv) };
  if (more) {
    metadata.continue = encodeContinue(page[page.length - 1]![0] + '\u0000', snapshotRv);
    // The real server only knows the remaining count when nothing is filtered out.
    if (p.labelSelector.empty && p.fieldSelector.empty && (p.namespace === undefined || inNamespace))
      metadata.remainingItemCount = end - from - page.length;
  }
  return { kind: r.listKind, apiVersion: r.apiVersion, metadata, items: page.map(([, o]) => listItem(o)) };
}

/** List items carry no kind/apiVersion in the real server's JSON (only the list does). */
function listItem(o: StoredObject): KubeObject {
  const { kind: _k, apiVersion: _a, ...rest } = o;
  return rest;
}

/** The index of the first entry whose key is >= key (entries sorted by key). */
function firstAtOrAfter(entries: ReadonlyArray<readonly [string, StoredObject]>, key: string): number {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (entries[mid]![0] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
