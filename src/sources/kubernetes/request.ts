// One request to the API server, made the way client-node's Watch makes its
// own: the KubeConfig authenticates a RequestContext (credentials, CA, client
// certificate, its undici dispatcher), then undici's fetch sends it. The
// answer is returned as it is; the caller checks the status and validates
// the body.
import { fetch, type Response } from 'undici';
import { HttpMethod, type KubeConfig, RequestContext } from './client-node.ts';

export interface ApiRequest {
  method: 'GET' | 'POST' | 'PATCH';
  /** Path and query, appended to the current cluster's server URL. */
  url: URL | string;
  body?: unknown;
  contentType?: string;
  /** Ends the request (a timeout, a move to another API server). */
  signal?: AbortSignal;
}

/** The current cluster's server URL + path. */
export function apiUrl(kc: KubeConfig, path: string): URL {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  return new URL(cluster.server + path);
}

export async function apiRequest(kc: KubeConfig, r: ApiRequest): Promise<Response> {
  const url = typeof r.url === 'string' ? apiUrl(kc, r.url) : r.url;
  const ctx = new RequestContext(url.toString(), HttpMethod[r.method]);
  await kc.applySecurityAuthentication(ctx);
  const headers: Record<string, string> = { ...ctx.getHeaders(), accept: 'application/json' };
  if (r.body !== undefined) headers['content-type'] = r.contentType ?? 'application/json';
  return fetch(url, {
    method: r.method,
    headers,
    ...(r.body === undefined ? {} : { body: JSON.stringify(r.body) }),
    dispatcher: ctx.getDispatcher() as never,
    ...(r.signal ? { signal: r.signal } : {}),
  });
}
