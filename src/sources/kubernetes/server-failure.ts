// Which failures mean "this API server stopped answering" (another one may
// answer), as opposed to failures every API server would answer the same way
// (401, 403, 404, a 410 that only asks for a relist). Only the former move
// the agent to the next API server.

/**
 * How long a watch may go without an event before the agent asks its API
 * server whether it still answers (server-bound.ts). The API server sends a
 * BOOKMARK about once a minute on a watch that allows them, as long as the
 * resource's resourceVersion moved (kube-apiserver's cacher:
 * defaultBookmarkFrequency = 1 min): the bound is that minute plus the 15 s
 * margin kube-apiserver itself allows past a bookmark
 * (DefaultEventFreshDuration = bookmark frequency + 15 s).
 */
export const DEFAULT_STALL_MS = 75_000;

/** A request to `server` got no usable answer: the informer's error when that server stopped answering. */
export class ServerFailure extends Error {
  readonly server: string;
  readonly reason: string;
  constructor(server: string, reason: string, cause?: unknown) {
    super(`${server}: ${reason}${cause instanceof Error && cause.message !== reason ? ` (${cause.message})` : ''}`, { cause });
    this.name = 'ServerFailure';
    this.server = server;
    this.reason = reason;
  }
}

const NO_CONNECTION: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection reset',
  UND_ERR_SOCKET: 'connection closed',
  UND_ERR_CLOSED: 'connection closed',
  EHOSTUNREACH: 'unreachable',
  ENETUNREACH: 'unreachable',
  EADDRNOTAVAIL: 'unreachable',
  ENOTFOUND: 'name not resolved',
  EAI_AGAIN: 'name not resolved',
  ETIMEDOUT: 'timed out',
  UND_ERR_CONNECT_TIMEOUT: 'timed out',
  UND_ERR_HEADERS_TIMEOUT: 'timed out',
  UND_ERR_BODY_TIMEOUT: 'timed out',
};

/**
 * Why `err` says the server stopped answering, or undefined when it does not:
 * no connection (refused, reset, unreachable), no answer in time (`timeout`
 * names the bound), or a 5xx (the server is there but cannot serve: shutting
 * down, its etcd gone, overloaded).
 */
export function whyUnanswered(err: unknown, timeout: string): string | undefined {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const x = e as { name?: string; code?: unknown; statusCode?: unknown };
    if (x.name === 'TimeoutError') return timeout;
    if (typeof x.code === 'string' && NO_CONNECTION[x.code]) return NO_CONNECTION[x.code];
    const status = typeof x.statusCode === 'number' ? x.statusCode : undefined;
    if (status !== undefined) return status >= 500 ? `HTTP ${status}` : undefined;
  }
  return undefined;
}
