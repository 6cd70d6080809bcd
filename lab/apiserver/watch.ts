// WATCH streams: a 200 chunked response of newline-delimited {"type","object"} events.
// Too-old resourceVersions are answered the way the real watch cache does it: 200, one
// ERROR event carrying a 410 Expired Status, end of stream (not an HTTP 410).

import type { ServerResponse } from 'node:http';
import type { Resource } from './resources.ts';
import type { FieldSelector, Selector } from './selectors.ts';
import { ApiError, invalid, type Status, type StatusCause } from './status.ts';
import type { Change, Store } from './store.ts';
import type { KubeObject, StoredObject, WatchEvent } from './types.ts';
import { parseResourceVersion } from './list.ts';

export interface WatchParams {
  resource: Resource;
  namespace?: string;
  resourceVersion?: string;
  resourceVersionMatch?: string;
  labelSelector: Selector;
  fieldSelector: FieldSelector;
  allowWatchBookmarks: boolean;
  sendInitialEvents?: boolean;
  timeoutSeconds?: number;
}

/**
 * How to cut a watch: 'end' finishes the chunked response cleanly (what a server-side
 * timeout looks like), 'destroy' closes the socket mid-response (a crashed server or a
 * proxy dropping the connection), 'reset' sends a TCP RST.
 */
export type CutMode = 'end' | 'destroy' | 'reset';

export interface WatchHubOptions {
  /** Send BOOKMARK events this often to watchers that allow them; 0 = only on sendBookmarks(). */
  bookmarkIntervalMs: number;
  /** End watches that asked for no timeoutSeconds after this long; 0 = never (the real server picks 30-60 min). */
  defaultTimeoutMs: number;
}

/** Watch option validation (apimachinery validateWatchOptions): 422 Invalid. */
export function validateWatch(p: WatchParams): void {
  const causes: StatusCause[] = [];
  const forbid = (field: string, msg: string): void => {
    causes.push({ reason: 'FieldValueForbidden', message: `Forbidden: ${msg}`, field });
  };
  if (p.sendInitialEvents !== undefined) {
    if (p.resourceVersionMatch !== 'NotOlderThan')
      forbid('resourceVersionMatch', 'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan');
    if (!p.allowWatchBookmarks) forbid('allowWatchBookmarks', 'sendInitialEvents requires setting allowWatchBookmarks to true');
  } else if (p.resourceVersionMatch) {
    forbid('resourceVersionMatch', 'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided');
  }
  if (causes.length) throw invalid('ListOptions', 'meta.k8s.io', '', causes);
  if (p.resourceVersion) parseResourceVersion(p.resourceVersion);
}

class WatchStream {
  readonly params: WatchParams;
  readonly #res: ServerResponse;
  readonly #timers: NodeJS.Timeout[] = [];
  /** Changes at or before this were covered by the initial state or the requested RV. */
  #after = 0;
  closed = false;
  /** Set while the server is stalled: the stream stays open and says nothing, not even a bookmark. */
  muted = false;

  constructor(res: ServerResponse, params: WatchParams) {
    this.#res = res;
    this.params = params;
  }

  matches(o: StoredObject): boolean {
    const p = this.params;
    return (p.namespace === undefined || o.metadata.namespace === p.namespace) && p.labelSelector.matches(o) && p.fieldSelector.matches(o);
  }

  send(type: WatchEvent['type'], object: KubeObject | Status): void {
    if (this.muted || this.closed || this.#res.destroyed || this.#res.writableEnded) return;
    this.#res.write(JSON.stringify({ type, object }) + '\n');
  }

  start(store: Store, opts: WatchHubOptions, onClose: () => void): void {
    const p = this.params;
    this.#res.on('close', () => {
      this.closed = true;
      this.#timers.forEach(clearTimeout);
      onClose();
    });
    this.#res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
    // Headers go out at once, as the real server flushes them: the client's request
    // resolves even when no event is due for a long time.
    this.#res.flushHeaders();

    const rv = p.resourceVersion ?? '';
    if (p.sendInitialEvents || rv === '' || rv === '0') {
      // "Start at most recent" / "any": synthetic ADDED for the current state, then changes.
      this.#after = store.resourceVersion;
      for (const o of store.list(p.resource)) if (this.matches(o)) this.send('ADDED', o);
      if (p.sendInitialEvents) {
        this.send('BOOKMARK', bookmarkObject(p.resource, store.resourceVersion, { 'k8s.io/initial-events-end': 'true' }));
      }
    } else {
      const from = parseResourceVersion(rv);
      let changes: Change[];
      try {
        changes = store.changesAfter(p.resource, from);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        this.send('ERROR', err.status);
        this.end('end');
        return;
      }
      // A future RV waits: nothing at or before it is delivered.
      this.#after = from;
      for (const c of changes) this.deliver(c);
      this.#after = Math.max(from, store.resourceVersion);
    }

    const timeoutMs = p.timeoutSeconds ? p.timeoutSeconds * 1000 : opts.defaultTimeoutMs;
    if (timeoutMs > 0) this.#timers.push(setTimeout(() => this.end('end'), timeoutMs));
    if (p.allowWatchBookmarks && opts.bookmarkIntervalMs > 0) {
      // (clearTimeout in the close handler clears intervals too.)
      this.#timers.push(setInterval(() => this.bookmark(store.resourceVersion), opts.bookmarkIntervalMs));
    }
  }

  /** Translate a store change for this watcher; selectors turn updates into ADDED/DELETED at their edges, as the cacher does. */
  deliver(c: Change): void {
    if (c.resource !== this.params.resource || c.rv <= this.#after) return;
    const curPasses = c.type !== 'DELETED' && this.matches(c.object);
    const oldPasses = c.prev !== undefined && this.matches(c.prev);
    if (c.type === 'DELETED') {
      if (oldPasses) this.send('DELETED', c.object);
    } else if (curPasses && !oldPasses) {
      this.send('ADDED', c.object);
    } else if (curPasses && oldPasses) {
      this.send('MODIFIED', c.object);
    } else if (oldPasses) {
      // Left the selection: DELETED with the previous content at the change's resourceVersion.
      const prev = c.prev!;
      this.send('DELETED', { ...prev, metadata: { ...prev.metadata, resourceVersion: String(c.rv) } });
    }
  }

  bookmark(rv: number): boolean {
    if (!this.params.allowWatchBookmarks || this.closed) return false;
    this.send('BOOKMARK', bookmarkObject(this.params.resource, rv));
    return true;
  }

  end(mode: CutMode): void {
    if (this.closed) return;
    const socket = this.#res.socket;
    if (mode === 'end' || !socket) this.#res.end();
    else if (mode === 'reset') socket.resetAndDestroy();
    else socket.destroy();
  }
}

/** A BOOKMARK carries an object of the watched kind with only its resourceVersion set. */
function bookmarkObject(r: Resource, rv: number, annotations?: Record<string, string>): KubeObject {
  const metadata: KubeObject['metadata'] = { resourceVersion: String(rv) };
  if (annotations) metadata.annotations = annotations;
  return { kind: r.kind, apiVersion: r.apiVersion, metadata };
}

/** All open watch streams: fed from the store, and the handle for cutting them. */
export class WatchHub {
  readonly #streams = new Set<WatchStream>();
  readonly #store: Store;
  readonly #opts: WatchHubOptions;

  constructor(store: Store, opts: WatchHubOptions) {
    this.#store = store;
    this.#opts = opts;
    store.subscribe((c) => {
      for (const s of [...this.#streams]) s.deliver(c);
    });
  }

  get size(): number {
    return this.#streams.size;
  }

  /** Serve a watch on res (params already validated). */
  open(res: ServerResponse, params: WatchParams): void {
    const stream = new WatchStream(res, params);
    this.#streams.add(stream);
    stream.start(this.#store, this.#opts, () => this.#streams.delete(stream));
  }

  /** Every open watch goes silent (stall) or speaks again; the changes in between are lost to it, as to a hung server's. */
  mute(muted: boolean): void {
    for (const s of this.#streams) s.muted = muted;
  }

  /** Cut every open watch; returns how many. */
  cut(mode: CutMode): number {
    const all = [...this.#streams];
    for (const s of all) s.end(mode);
    return all.length;
  }

  /** A BOOKMARK at the current resourceVersion to every watcher that allows them; returns how many got one. */
  sendBookmarks(): number {
    let n = 0;
    for (const s of this.#streams) if (s.bookmark(this.#store.resourceVersion)) n++;
    return n;
  }
}
