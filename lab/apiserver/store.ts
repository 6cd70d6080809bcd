// The object store: one global resourceVersion counter (like etcd's revision) shared by
// every resource, the current objects, and a bounded history of changes for watches to
// resume from. Compaction drops history; a watch or list that needs dropped history gets
// 410 Expired, which is what makes clients relist.

import { randomUUID } from 'node:crypto';
import { resourceFor, type Resource } from './resources.ts';
import { alreadyExists, badRequest, conflict, internalError, invalid, notFound, tooOldResourceVersion } from './status.ts';
import type { KubeObject, ObjectMeta, StoredObject } from './types.ts';

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface Change {
  rv: number;
  type: ChangeType;
  resource: Resource;
  /** The new state; for DELETED the last state carrying the deletion's resourceVersion (as etcd3's watcher reports it). */
  object: StoredObject;
  /** The state before, for MODIFIED and DELETED: watchers with selectors need it to turn an update into ADDED/DELETED. */
  prev?: StoredObject;
}

export interface StoreOptions {
  /** The first resourceVersion handed out is this + 1. Default 1000, so RVs look like a live cluster's, not array indices. */
  initialResourceVersion?: number;
  /** Changes kept for watches to resume from; older ones are compacted away. Default 10000. */
  historyLimit?: number;
}

export interface WriteOptions {
  /** HTTP semantics: status is a subresource (kept on PUT), a create may not carry a resourceVersion. */
  http?: boolean;
  /** Write only .status (PUT .../status). */
  statusOnly?: boolean;
}

export interface Preconditions {
  resourceVersion?: string;
  uid?: string;
}

/** JSON round trip: a private deep copy, and Date objects (client-node models) become RFC 3339 strings. */
export function cloneJson<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** Kubernetes timestamps are RFC 3339 with second precision. */
function now(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function randomSuffix(): string {
  const chars = 'bcdfghjklmnpqrstvwxz2456789';
  let s = '';
  for (let i = 0; i < 5; i++) s += chars[Math.floor(Math.random() * chars.length)];
  return s;
}

/** JSON with object keys sorted: equality of content, whatever order the writer used. */
export function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_k, val: unknown) =>
    typeof val === 'object' && val !== null && !Array.isArray(val)
      ? Object.fromEntries(Object.entries(val).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : val,
  );
}

/** Everything except metadata and status: a change here bumps metadata.generation. */
function specOf(obj: KubeObject): string {
  const { metadata: _m, status: _s, ...rest } = obj;
  return canonicalJson(rest);
}

export class Store {
  readonly #objects = new Map<string, Map<string, StoredObject>>();
  readonly #listeners = new Set<(c: Change) => void>();
  readonly #historyLimit: number;
  #history: Change[] = [];
  /** The last listAt result per resource: the pages of one paginated list read the same
   * snapshot, and rebuilding and sorting it per page made a 100k list quadratic. The state
   * at an rv never changes, so the snapshot stays right while that rv is listable. */
  readonly #snapshots = new Map<string, { rv: number; entries: ReadonlyArray<readonly [string, StoredObject]> }>();
  #rv: number;
  /** History holds every change with rv > #oldest; state at #oldest and later can be rebuilt. */
  #oldest: number;

  constructor(opts: StoreOptions = {}) {
    this.#rv = opts.initialResourceVersion ?? 1000;
    this.#oldest = this.#rv;
    this.#historyLimit = opts.historyLimit ?? 10000;
  }

  get resourceVersion(): number {
    return this.#rv;
  }

  /** The oldest resourceVersion a watch can resume from without 410. */
  get oldestResourceVersion(): number {
    return this.#oldest;
  }

  subscribe(fn: (c: Change) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  #map(r: Resource): Map<string, StoredObject> {
    let m = this.#objects.get(r.plural);
    if (!m) this.#objects.set(r.plural, (m = new Map()));
    return m;
  }

  static key(r: Resource, namespace: string | undefined, name: string): string {
    return r.namespaced ? `${namespace ?? ''}/${name}` : name;
  }

  get(r: Resource, namespace: string | undefined, name: string): StoredObject | undefined {
    return this.#map(r).get(Store.key(r, namespace, name));
  }

  /** Current objects in key order (namespace/name), as etcd returns a range. */
  list(r: Resource, namespace?: string): StoredObject[] {
    return sortByKey(this.#map(r))
      .filter(([, o]) => namespace === undefined || o.metadata.namespace === namespace)
      .map(([, o]) => o);
  }

  /** The objects as they were at resourceVersion rv, in key order; 410 if history no longer reaches back that far. */
  listAt(r: Resource, rv: number): ReadonlyArray<readonly [string, StoredObject]> {
    if (rv < this.#oldest) throw tooOldResourceVersion(rv, this.#oldest);
    const cached = this.#snapshots.get(r.plural);
    if (cached?.rv === rv && rv <= this.#rv) return cached.entries;
    const entries = this.#stateAt(r, rv);
    this.#snapshots.set(r.plural, { rv, entries });
    return entries;
  }

  #stateAt(r: Resource, rv: number): Array<[string, StoredObject]> {
    const state = new Map(this.#map(r));
    for (let i = this.#history.length - 1; i >= 0; i--) {
      const c = this.#history[i]!;
      if (c.rv <= rv) break;
      if (c.resource !== r) continue;
      const key = Store.key(r, c.object.metadata.namespace, c.object.metadata.name);
      if (c.type === 'ADDED') state.delete(key);
      else state.set(key, c.prev!);
    }
    return sortByKey(state);
  }

  /** Changes to r after rv, oldest first; 410 Expired if some were compacted away. */
  changesAfter(r: Resource, rv: number): Change[] {
    if (rv < this.#oldest) throw tooOldResourceVersion(rv, this.#oldest);
    return this.#history.filter((c) => c.rv > rv && c.resource === r);
  }

  #normalize(r: Resource, input: KubeObject): KubeObject {
    if (typeof input !== 'object' || input === null || Array.isArray(input)) throw badRequest('the request body is not a JSON object');
    const obj = cloneJson(input);
    if (obj.apiVersion !== undefined && obj.apiVersion !== r.apiVersion) {
      throw badRequest(`the API version in the data (${obj.apiVersion}) does not match the expected API version (${r.apiVersion})`);
    }
    if (obj.kind !== undefined && obj.kind !== r.kind)
      throw badRequest(`the kind in the data (${obj.kind}) does not match the expected kind (${r.kind})`);
    obj.apiVersion = r.apiVersion;
    obj.kind = r.kind;
    if (typeof obj.metadata !== 'object' || obj.metadata === null) obj.metadata = {};
    if (!r.namespaced) delete obj.metadata.namespace;
    return obj;
  }

  #commit(type: ChangeType, r: Resource, object: StoredObject, prev?: StoredObject): Change {
    const key = Store.key(r, object.metadata.namespace, object.metadata.name);
    if (type === 'DELETED') this.#map(r).delete(key);
    else this.#map(r).set(key, object);
    const change: Change = prev ? { rv: this.#rv, type, resource: r, object, prev } : { rv: this.#rv, type, resource: r, object };
    this.#history.push(change);
    if (this.#history.length > this.#historyLimit) {
      const dropped = this.#history.splice(0, this.#history.length - this.#historyLimit);
      this.#oldest = dropped[dropped.length - 1]!.rv;
    }
    for (const fn of [...this.#listeners]) fn(change);
    return change;
  }

  /** Create; namespaced objects without a namespace land in `defaultNamespace`. */
  create(r: Resource, input: KubeObject, opts: WriteOptions & { defaultNamespace?: string; keepIdentity?: boolean } = {}): StoredObject {
    const obj = this.#normalize(r, input);
    const meta = obj.metadata as ObjectMeta;
    if (opts.http && meta.resourceVersion) throw internalError(new Error('resourceVersion should not be set on objects to be created'));
    if (!meta.name && meta.generateName) {
      do meta.name = meta.generateName + randomSuffix();
      while (this.get(r, meta.namespace, meta.name));
    }
    if (!meta.name) {
      throw invalid(r.kind, r.group, '', [
        { reason: 'FieldValueRequired', message: 'Required value: name or generateName is required', field: 'metadata.name' },
      ]);
    }
    if (r.namespaced && !meta.namespace) meta.namespace = opts.defaultNamespace ?? 'default';
    if (this.get(r, meta.namespace, meta.name)) throw alreadyExists(r, meta.name);
    if (opts.http && r.clearStatusOnCreate) delete obj['status'];
    if (!opts.keepIdentity || !meta.uid) meta.uid = randomUUID();
    if (!opts.keepIdentity || !meta.creationTimestamp) meta.creationTimestamp = now();
    meta.generation = 1;
    meta.resourceVersion = String(++this.#rv);
    return this.#commit('ADDED', r, obj as StoredObject).object;
  }

  /**
   * Update. A metadata.resourceVersion in the input is a precondition (409 Conflict when
   * stale); without one the update is unconditional, as the real server allows for these
   * resources. A write that changes nothing is not a write: no new resourceVersion, no event.
   */
  update(r: Resource, input: KubeObject, opts: WriteOptions & { defaultNamespace?: string } = {}): StoredObject {
    const obj = this.#normalize(r, input);
    const meta = obj.metadata as ObjectMeta;
    if (!meta.name) {
      throw invalid(r.kind, r.group, '', [
        { reason: 'FieldValueRequired', message: 'Required value: name is required', field: 'metadata.name' },
      ]);
    }
    if (r.namespaced && !meta.namespace) meta.namespace = opts.defaultNamespace ?? 'default';
    const old = this.get(r, meta.namespace, meta.name);
    if (!old) throw notFound(r, meta.name);
    if (meta.resourceVersion && meta.resourceVersion !== old.metadata.resourceVersion) throw conflict(r, meta.name);
    if (meta.uid && meta.uid !== old.metadata.uid) {
      throw conflict(r, meta.name, `Precondition failed: UID in precondition: ${meta.uid}, UID in object meta: ${old.metadata.uid}`);
    }
    let next: KubeObject;
    if (opts.statusOnly) {
      next = { ...cloneJson(old), status: obj['status'] };
    } else {
      next = obj;
      if (opts.http && r.statusSubresource) {
        if (old['status'] === undefined) delete next['status'];
        else next['status'] = cloneJson(old['status']);
      }
    }
    const nextMeta = next.metadata as ObjectMeta;
    nextMeta.uid = old.metadata.uid;
    nextMeta.creationTimestamp = old.metadata.creationTimestamp;
    nextMeta.generation = (old.metadata.generation ?? 1) + (specOf(next) !== specOf(old) ? 1 : 0);
    nextMeta.resourceVersion = old.metadata.resourceVersion;
    if (canonicalJson(next) === canonicalJson(old)) return old;
    nextMeta.resourceVersion = String(++this.#rv);
    return this.#commit('MODIFIED', r, next as StoredObject, old).object;
  }

  /** Delete at once (no finalizers, no grace period); returns the object as it was. */
  delete(r: Resource, namespace: string | undefined, name: string, pre: Preconditions = {}): StoredObject {
    const old = this.get(r, r.namespaced ? (namespace ?? 'default') : undefined, name);
    if (!old) throw notFound(r, name);
    if (pre.uid !== undefined && pre.uid !== old.metadata.uid) {
      throw conflict(r, name, `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${old.metadata.uid}`);
    }
    if (pre.resourceVersion !== undefined && pre.resourceVersion !== old.metadata.resourceVersion) {
      throw conflict(
        r,
        name,
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${old.metadata.resourceVersion}`,
      );
    }
    const rv = String(++this.#rv);
    const tomb = { ...old, metadata: { ...old.metadata, resourceVersion: rv } };
    this.#commit('DELETED', r, tomb, old);
    return old;
  }

  /** Drop all history, as an etcd compaction plus a fresh watch cache would: resuming from any older RV gives 410. */
  compact(): void {
    this.#history = [];
    this.#oldest = this.#rv;
  }

  /** Advance the counter without a change (another writer, or a different etcd after a restore). */
  jump(by: number): void {
    if (!Number.isInteger(by) || by < 0) throw new Error(`resourceVersion jump must be a non-negative integer, got ${by}`);
    this.#rv += by;
  }

  /** Replace every object (a restored or different backing store); history is dropped. */
  replaceAll(objects: readonly KubeObject[]): void {
    this.#objects.clear();
    this.#snapshots.clear();
    this.#history = [];
    for (const o of objects) {
      const r = resourceFor(String(o.kind ?? ''));
      const copy = cloneJson(o);
      if (copy.metadata) delete copy.metadata.resourceVersion;
      this.create(r, copy, { keepIdentity: true });
    }
    this.compact();
  }

  /** Resolve true once the store reaches rv, false after ms without it (a list waits like the watch cache does). */
  waitForResourceVersion(rv: number, ms: number): Promise<boolean> {
    if (this.#rv >= rv) return Promise.resolve(true);
    if (ms <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (ok: boolean): void => {
        clearTimeout(timer);
        unsubscribe();
        resolve(ok);
      };
      const timer = setTimeout(() => done(false), ms);
      const unsubscribe = this.subscribe(() => {
        if (this.#rv >= rv) done(true);
      });
    });
  }
}

function sortByKey(m: Map<string, StoredObject>): Array<[string, StoredObject]> {
  return [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}
