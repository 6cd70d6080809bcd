// HTTP routing: turns a request into a store read/write, a list or a watch, answers
// errors as Status objects, and logs every request so tests can assert on client
// behaviour ("it relisted", "it resumed the watch from RV x").

import type { IncomingMessage, ServerResponse } from 'node:http';
import { listObjects } from './list.ts';
import { parsePath, type ParsedPath } from './resources.ts';
import { parseFieldSelector, parseLabelSelector } from './selectors.ts';
import {
  ApiError,
  badRequest,
  deleted,
  internalError,
  methodNotAllowed,
  notFound,
  pathNotFound,
  serviceUnavailable,
  unauthorized,
  unsupportedMediaType,
} from './status.ts';
import type { Store } from './store.ts';
import type { KubeObject } from './types.ts';
import { validateWatch, type WatchHub, type WatchParams } from './watch.ts';

export interface RequestRecord {
  /** 1, 2, 3, ... across the server's life (restarts included). */
  seq: number;
  time: number;
  method: string;
  path: string;
  query: Record<string, string>;
  /** A GET with watch=true|1. */
  watch: boolean;
  /** Kind of the addressed resource ("Service"), when the path names one. */
  kind?: string;
  namespace?: string;
  name?: string;
  /** HTTP status answered; for watches 200 as soon as the stream opens. */
  status?: number;
  authorization?: string;
}

export interface RouterContext {
  store: Store;
  hub: WatchHub;
  record(rec: RequestRecord): void;
  nextSeq(): number;
  tooLargeWaitMs: number;
  /** When set, requests must carry "Authorization: Bearer <token>". */
  token?: string;
  /** True while the server simulates an outage by answering 503. */
  unavailable(): boolean;
  /** True while the server is stalled: a request is taken and never answered. */
  stalled(): boolean;
}

const MAX_BODY = 16 * 1024 * 1024;

/** strconv.ParseBool, which the real server uses for boolean query parameters. */
function parseBool(name: string, v: string | null): boolean | undefined {
  if (v === null) return undefined;
  if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(v)) return true;
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(v)) return false;
  throw badRequest(`invalid boolean value for ${name}: ${JSON.stringify(v)}`);
}

function parseInteger(name: string, v: string | null): number | undefined {
  if (v === null || v === '') return undefined;
  if (!/^-?\d+$/.test(v)) throw badRequest(`invalid integer value for ${name}: ${JSON.stringify(v)}`);
  return Number(v);
}

function send(res: ServerResponse, rec: RequestRecord, code: number, body: unknown): void {
  rec.status = code;
  if (res.headersSent) {
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

async function readJson(req: IncomingMessage): Promise<{ type: string; body: unknown }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw badRequest('request body too large');
    chunks.push(chunk as Buffer);
  }
  const type = (req.headers['content-type'] ?? 'application/json').split(';')[0]!.trim();
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return { type, body: undefined };
  try {
    return { type, body: JSON.parse(text) };
  } catch (err) {
    throw badRequest(`the request body is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return patch;
  const out: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function requireObject(body: unknown): KubeObject {
  if (!isPlainObject(body)) throw badRequest('the request body must be a JSON object');
  return body as KubeObject;
}

async function handleResource(
  req: IncomingMessage,
  res: ServerResponse,
  rec: RequestRecord,
  url: URL,
  parsed: ParsedPath,
  ctx: RouterContext,
): Promise<void> {
  const { resource: r, namespace, name, subresource } = parsed;
  const q = url.searchParams;
  const method = req.method ?? 'GET';

  if (name === undefined) {
    if (method === 'GET') {
      const labelSelector = parseLabelSelector(q.get('labelSelector') ?? undefined);
      const fieldSelector = parseFieldSelector(q.get('fieldSelector') ?? undefined, r);
      const common = {
        labelSelector,
        fieldSelector,
        ...(namespace !== undefined ? { namespace } : {}),
        ...(q.get('resourceVersion') !== null ? { resourceVersion: q.get('resourceVersion')! } : {}),
        ...(q.get('resourceVersionMatch') ? { resourceVersionMatch: q.get('resourceVersionMatch')! } : {}),
      };
      if (rec.watch) {
        const sendInitialEvents = parseBool('sendInitialEvents', q.get('sendInitialEvents'));
        const timeoutSeconds = parseInteger('timeoutSeconds', q.get('timeoutSeconds'));
        const params: WatchParams = {
          resource: r,
          ...common,
          allowWatchBookmarks: parseBool('allowWatchBookmarks', q.get('allowWatchBookmarks')) ?? false,
          ...(sendInitialEvents !== undefined ? { sendInitialEvents } : {}),
          ...(timeoutSeconds !== undefined ? { timeoutSeconds } : {}),
        };
        validateWatch(params);
        rec.status = 200;
        ctx.hub.open(res, params);
        return;
      }
      const limit = parseInteger('limit', q.get('limit'));
      const cont = q.get('continue');
      const body = await listObjects(
        ctx.store,
        r,
        { ...common, ...(limit !== undefined ? { limit } : {}), ...(cont ? { continue: cont } : {}) },
        {
          tooLargeWaitMs: ctx.tooLargeWaitMs,
        },
      );
      send(res, rec, 200, body);
      return;
    }
    if (method === 'POST' && (namespace !== undefined || !r.namespaced)) {
      const obj = requireObject((await readJson(req)).body);
      if (r.namespaced && obj.metadata?.namespace !== undefined && obj.metadata.namespace !== namespace) {
        throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
      }
      const created = ctx.store.create(r, obj, { http: true, ...(namespace !== undefined ? { defaultNamespace: namespace } : {}) });
      send(res, rec, 201, created);
      return;
    }
    throw methodNotAllowed();
  }

  const current = (): KubeObject => {
    const o = ctx.store.get(r, namespace, name);
    if (!o) throw notFound(r, name);
    return o;
  };

  switch (method) {
    case 'GET':
      send(res, rec, 200, current());
      return;
    case 'PUT': {
      const obj = requireObject((await readJson(req)).body);
      const meta = obj.metadata ?? {};
      if (meta.name !== undefined && meta.name !== name)
        throw badRequest(`the name of the object (${meta.name}) does not match the name on the URL (${name})`);
      if (r.namespaced && meta.namespace !== undefined && meta.namespace !== namespace) {
        throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
      }
      const withName: KubeObject = { ...obj, metadata: { ...meta, name, ...(namespace !== undefined ? { namespace } : {}) } };
      const updated = ctx.store.update(r, withName, { http: true, statusOnly: subresource === 'status' });
      send(res, rec, 200, updated);
      return;
    }
    case 'PATCH': {
      const { type, body } = await readJson(req);
      if (type !== 'application/merge-patch+json') throw unsupportedMediaType(type);
      const patched = mergePatch(current(), requireObject(body)) as KubeObject;
      const updated = ctx.store.update(r, patched, { http: true, statusOnly: subresource === 'status' });
      send(res, rec, 200, updated);
      return;
    }
    case 'DELETE': {
      if (subresource) throw methodNotAllowed();
      const opts = (await readJson(req)).body;
      const pre =
        isPlainObject(opts) && isPlainObject(opts['preconditions'])
          ? (opts['preconditions'] as { uid?: string; resourceVersion?: string })
          : {};
      const old = ctx.store.delete(r, namespace, name, pre);
      send(res, rec, 200, r.returnDeletedObject ? old : deleted(r, name, old.metadata.uid));
      return;
    }
    default:
      throw methodNotAllowed();
  }
}

/** The request handler for node:http. */
export function createHandler(ctx: RouterContext): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const url = new URL(req.url ?? '/', 'http://apiserver.invalid');
    const parsed = parsePath(url.pathname);
    const rec: RequestRecord = {
      seq: ctx.nextSeq(),
      time: Date.now(),
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      watch: false,
    };
    if (req.headers.authorization !== undefined) rec.authorization = req.headers.authorization;
    if (parsed) {
      // Decided before logging, so that waitForRequest({ watch: true }) sees it; a bad
      // value is answered 400 below.
      try {
        rec.watch = req.method === 'GET' && parsed.name === undefined && (parseBool('watch', url.searchParams.get('watch')) ?? false);
      } catch {
        rec.watch = false;
      }
      rec.kind = parsed.resource.kind;
      if (parsed.namespace !== undefined) rec.namespace = parsed.namespace;
      if (parsed.name !== undefined) rec.name = parsed.name;
    }
    ctx.record(rec);
    if (ctx.stalled()) return; // a hung server: the connection stays open, nothing comes back

    const run = async (): Promise<void> => {
      if (ctx.unavailable()) throw serviceUnavailable();
      if (ctx.token !== undefined && req.headers.authorization !== `Bearer ${ctx.token}`) throw unauthorized();
      if (req.method === 'GET' && ['/healthz', '/readyz', '/livez'].includes(url.pathname)) {
        rec.status = 200;
        res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok');
        return;
      }
      if (req.method === 'GET' && url.pathname === '/version') {
        send(res, rec, 200, { major: '1', minor: '34', gitVersion: 'v1.34.0-svcmap-test', platform: 'linux/amd64' });
        return;
      }
      if (!parsed) throw pathNotFound();
      if (req.method === 'GET') parseBool('watch', url.searchParams.get('watch'));
      await handleResource(req, res, rec, url, parsed, ctx);
    };
    run().catch((err: unknown) => {
      const e = err instanceof ApiError ? err : internalError(err);
      if (!res.destroyed) send(res, rec, e.code, e.status);
    });
  };
}
