// ApiServer: the store, the watch hub, the HTTP listener and the fault switches put
// together behind the handle tests use. Programmatic writes go straight to the store
// (they work while the server is stopped, which is how "changed while down" is staged).

import { Listener, HOST } from './listener.ts';
import { resourceFor, type Resource } from './resources.ts';
import { createHandler, type RequestRecord } from './router.ts';
import { cloneJson, Store } from './store.ts';
import type { KubeObject, StoredObject } from './types.ts';
import { WatchHub, type CutMode } from './watch.ts';

export interface ApiServerOptions {
  /** Port to listen on (127.0.0.1). Default 0: a random free port. */
  port?: number;
  /** Objects present at start. */
  objects?: readonly object[];
  /** The resourceVersion counter starts here (first write gets +1). Default 1000. */
  initialResourceVersion?: number;
  /** Changes kept for resuming watches; older ones are compacted. Default 10000. */
  historyLimit?: number;
  /** BOOKMARK interval for watches with allowWatchBookmarks=true. Default 60000 (the real server: about a minute); 0 = only sendBookmarks(). */
  bookmarkIntervalMs?: number;
  /** End watches that send no timeoutSeconds after this many seconds. Default 0 = never (the real server: random 30-60 min). */
  watchTimeoutSeconds?: number;
  /** How long a list for a future resourceVersion waits before 504. Default 3000 (the watch cache's wait). */
  tooLargeWaitMs?: number;
  /** Require "Authorization: Bearer <token>" (401 otherwise). Default: accept anything. */
  token?: string;
  /**
   * HTTP keep-alive. Default false: every response says "Connection: close", so that a
   * client in the same process never reuses a pooled socket that stop()/restart()/an
   * outage destroyed before it noticed (undici then fails with "other side closed").
   * Set true to test exactly that.
   */
  keepAlive?: boolean;
  /**
   * Serve the objects of this other server (its store: objects, resourceVersions,
   * history), as two kube-apiservers on one etcd: a write through either is
   * seen by the watches of both. Not with `objects` or the store's options.
   */
  sameStoreAs?: ApiServer;
}

export interface RestartOptions {
  /** Replace every object, as after restoring or swapping etcd. Default: the store is kept. */
  objects?: readonly object[];
  /** Advance the resourceVersion counter by this much while down. Default 0: it continues. */
  resourceVersionJump?: number;
  /**
   * Keep the change history. Default false: a restarted apiserver's watch cache starts
   * empty, so a watch resuming from before the restart gets 410 Expired and relists.
   */
  keepHistory?: boolean;
}

export interface OutageOptions {
  /** 'refuse' (default): the port is closed, connects get ECONNREFUSED, open connections are destroyed. '503': every request answers 503 ServiceUnavailable and open watches are cut. */
  mode?: 'refuse' | '503';
}

export interface RequestFilter {
  method?: string;
  kind?: string;
  watch?: boolean;
  namespace?: string;
  name?: string;
  /** Only requests after this mark (see mark()). */
  since?: number;
}

export class ApiServer {
  readonly #store: Store;
  readonly #hub: WatchHub;
  readonly #listener: Listener;
  readonly #log: RequestRecord[] = [];
  readonly #logWaiters = new Set<(r: RequestRecord) => void>();
  #seq = 0;
  #unavailableUntil = 0;
  #outageTimer: NodeJS.Timeout | undefined;
  #outageCancel: (() => void) | undefined;
  #outageEnd: (() => void) | undefined;
  #closed = false;
  #stalled = false;

  constructor(opts: ApiServerOptions = {}) {
    if (opts.sameStoreAs && (opts.objects || opts.initialResourceVersion !== undefined || opts.historyLimit !== undefined))
      throw new Error("test API server: sameStoreAs serves the other server's store; objects and the store options belong to that one");
    this.#store = opts.sameStoreAs
      ? opts.sameStoreAs.#store
      : new Store({
          ...(opts.initialResourceVersion !== undefined ? { initialResourceVersion: opts.initialResourceVersion } : {}),
          ...(opts.historyLimit !== undefined ? { historyLimit: opts.historyLimit } : {}),
        });
    if (opts.objects) for (const o of opts.objects) this.create(o);
    this.#hub = new WatchHub(this.#store, {
      bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 60_000,
      defaultTimeoutMs: (opts.watchTimeoutSeconds ?? 0) * 1000,
    });
    this.#listener = new Listener(
      createHandler({
        store: this.#store,
        hub: this.#hub,
        record: (rec) => {
          this.#log.push(rec);
          for (const w of [...this.#logWaiters]) w(rec);
        },
        nextSeq: () => ++this.#seq,
        tooLargeWaitMs: opts.tooLargeWaitMs ?? 3000,
        ...(opts.token !== undefined ? { token: opts.token } : {}),
        unavailable: () => Date.now() < this.#unavailableUntil,
        stalled: () => this.#stalled,
      }),
      { keepAlive: opts.keepAlive ?? false },
    );
  }

  /** Start listening (startApiServer does this). */
  async listen(port = 0): Promise<this> {
    await this.#listener.listen(port);
    return this;
  }

  get port(): number {
    return this.#listener.port;
  }

  /** http://127.0.0.1:PORT */
  get url(): string {
    return `http://${HOST}:${this.port}`;
  }

  get listening(): boolean {
    return this.#listener.listening;
  }

  /** The current (latest) resourceVersion, as a string like the API's. */
  get resourceVersion(): string {
    return String(this.#store.resourceVersion);
  }

  /** Watches resuming from an RV older than this get 410 Expired. */
  get oldestResourceVersion(): string {
    return String(this.#store.oldestResourceVersion);
  }

  /** Watch streams open right now. */
  get openWatches(): number {
    return this.#hub.size;
  }

  // ---- objects -------------------------------------------------------------------

  #resourceOf(obj: object): Resource {
    const kind = (obj as KubeObject).kind;
    if (typeof kind !== 'string') throw new Error('test API server: object needs a kind (Service, EndpointSlice, Node)');
    return resourceFor(kind);
  }

  /** Create (namespace defaults to "default"); returns the stored object. Throws ApiError (409 AlreadyExists, ...). */
  create(obj: object): StoredObject {
    return cloneJson(this.#store.create(this.#resourceOf(obj), obj as KubeObject));
  }

  /** Update; a metadata.resourceVersion in obj must be current (else ApiError 409 Conflict). Throws 404 if absent. */
  update(obj: object): StoredObject {
    return cloneJson(this.#store.update(this.#resourceOf(obj), obj as KubeObject));
  }

  /** Create, or update unconditionally (ignoring any resourceVersion in obj), like kubectl apply. */
  apply(obj: object): StoredObject {
    const r = this.#resourceOf(obj);
    const o = cloneJson(obj) as KubeObject;
    const meta = o.metadata ?? {};
    if (meta.name && this.#store.get(r, r.namespaced ? (meta.namespace ?? 'default') : undefined, meta.name)) {
      delete meta.resourceVersion;
      delete meta.uid;
      return cloneJson(this.#store.update(r, o));
    }
    return cloneJson(this.#store.create(r, o));
  }

  /** Delete at once; returns the object as it was. namespace is ignored for Nodes. Throws ApiError 404 if absent. */
  delete(kind: string, namespace: string | undefined, name: string): StoredObject {
    const r = resourceFor(kind);
    return cloneJson(this.#store.delete(r, r.namespaced ? (namespace ?? 'default') : undefined, name));
  }

  get(kind: string, namespace: string | undefined, name: string): StoredObject | undefined {
    const r = resourceFor(kind);
    const o = this.#store.get(r, r.namespaced ? (namespace ?? 'default') : undefined, name);
    return o ? cloneJson(o) : undefined;
  }

  /** Current objects of a kind (all namespaces unless given), in key order, with kind/apiVersion. */
  list(kind: string, namespace?: string): StoredObject[] {
    return cloneJson(this.#store.list(resourceFor(kind), namespace));
  }

  // ---- faults --------------------------------------------------------------------

  /** Drop the change history: every watch resuming from an older RV gets ERROR 410 Expired (open watches go on). */
  compact(): void {
    this.#store.compact();
  }

  /** Cut every open watch. Default 'destroy' (socket closed mid-response); 'reset' = TCP RST; 'end' = clean end of stream. Returns how many. */
  cutWatches(mode: CutMode = 'destroy'): number {
    return this.#hub.cut(mode);
  }

  /** Send a BOOKMARK (current RV) to every watch that allowed them, now; returns how many. */
  sendBookmarks(): number {
    return this.#hub.sendBookmarks();
  }

  /**
   * Hang like a stopped (SIGSTOP) process: connections are still accepted,
   * no request is answered, open watches stay open and send nothing (no
   * events, no bookmarks). stall(false) resumes; what changed meanwhile is
   * not sent to the watches that were open.
   */
  stall(stalled = true): void {
    this.#stalled = stalled;
    this.#hub.mute(stalled);
  }

  /** Stop like a killed process: the port closes, every connection is destroyed. The store is kept in memory. */
  async stop(): Promise<void> {
    this.#cancelOutage();
    await this.#listener.close();
  }

  /** Start again on the same port: after stop(), or to end an outage early (if running, it stops first). */
  async restart(opts: RestartOptions = {}): Promise<void> {
    if (this.#closed) throw new Error('test API server: closed');
    this.#cancelOutage();
    if (this.#listener.listening) await this.stop();
    if (opts.resourceVersionJump) this.#store.jump(opts.resourceVersionJump);
    if (opts.objects) this.#store.replaceAll(opts.objects as KubeObject[]);
    else if (!opts.keepHistory) this.#store.compact();
    await this.#listener.listen(this.port);
  }

  /**
   * An outage of ms milliseconds. Resolves when it is over (or was ended early by
   * stop/restart/close/another outage). Writes through the programmatic API keep working
   * meanwhile: that is how "changed while down" is staged.
   */
  async unavailable(ms: number, opts: OutageOptions = {}): Promise<void> {
    this.#cancelOutage();
    // Armed before the first await, so that a stop()/restart() right away cancels it.
    let cancel: (() => void) | undefined;
    const over = new Promise<boolean>((resolve) => {
      this.#outageTimer = setTimeout(() => resolve(false), ms);
      this.#outageCancel = cancel = () => resolve(true);
      this.#outageEnd = () => resolve(false);
    });
    if (opts.mode === '503') {
      this.#unavailableUntil = Date.now() + ms;
      this.#hub.cut('destroy');
    } else {
      await this.#listener.close();
    }
    const cancelled = await over;
    // A cancelled outage may already have been replaced by the next one: leave that alone.
    if (this.#outageCancel !== cancel) return;
    if (this.#outageTimer) clearTimeout(this.#outageTimer);
    this.#outageTimer = undefined;
    this.#outageCancel = undefined;
    this.#outageEnd = undefined;
    this.#unavailableUntil = 0;
    if (!cancelled && opts.mode !== '503' && !this.#closed && !this.#listener.listening) await this.#listener.listen(this.port);
  }

  /** Ends the outage now, as if its time had run out (a test ends it on an event, not on a clock). */
  endOutage(): void {
    this.#outageEnd?.();
  }

  #cancelOutage(): void {
    if (this.#outageTimer) clearTimeout(this.#outageTimer);
    const cancel = this.#outageCancel;
    this.#outageTimer = undefined;
    this.#outageCancel = undefined;
    this.#outageEnd = undefined;
    this.#unavailableUntil = 0;
    cancel?.();
  }

  // ---- request log ---------------------------------------------------------------

  /** A mark for `since`: requests logged after this call have a larger seq. */
  mark(): number {
    return this.#seq;
  }

  /** Logged requests, oldest first, filtered. */
  requests(f: RequestFilter = {}): RequestRecord[] {
    return this.#log.filter((r) => matchesFilter(r, f)).map((r) => ({ ...r, query: { ...r.query } }));
  }

  /** LIST requests (GET of a collection without watch). */
  lists(kind?: string, since?: number): RequestRecord[] {
    return this.requests({
      method: 'GET',
      watch: false,
      ...(kind ? { kind: resourceFor(kind).kind } : {}),
      ...(since !== undefined ? { since } : {}),
    }).filter((r) => r.name === undefined);
  }

  /** WATCH requests. */
  watches(kind?: string, since?: number): RequestRecord[] {
    return this.requests({ watch: true, ...(kind ? { kind: resourceFor(kind).kind } : {}), ...(since !== undefined ? { since } : {}) });
  }

  /** Resolves with the first request (already logged after `since`, or future) matching the filter. */
  waitForRequest(f: RequestFilter & { where?: (r: RequestRecord) => boolean } = {}): Promise<RequestRecord> {
    const ok = (r: RequestRecord): boolean => matchesFilter(r, f) && (f.where ? f.where(r) : true);
    const found = this.#log.find(ok);
    if (found) return Promise.resolve({ ...found });
    return new Promise((resolve) => {
      const w = (r: RequestRecord): void => {
        if (!ok(r)) return;
        this.#logWaiters.delete(w);
        resolve({ ...r });
      };
      this.#logWaiters.add(w);
    });
  }

  /** Stop for good. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#cancelOutage();
    this.#logWaiters.clear();
    await this.#listener.close();
  }
}

function matchesFilter(r: RequestRecord, f: RequestFilter): boolean {
  if (f.since !== undefined && r.seq <= f.since) return false;
  if (f.method !== undefined && r.method !== f.method) return false;
  if (f.kind !== undefined && r.kind !== resourceFor(f.kind).kind) return false;
  if (f.watch !== undefined && r.watch !== f.watch) return false;
  if (f.namespace !== undefined && r.namespace !== f.namespace) return false;
  if (f.name !== undefined && r.name !== f.name) return false;
  return true;
}

/** Start a test API server on 127.0.0.1 (random port unless opts.port). */
export async function startApiServer(opts: ApiServerOptions = {}): Promise<ApiServer> {
  return new ApiServer(opts).listen(opts.port ?? 0);
}
