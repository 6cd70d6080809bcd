// Test plumbing around the server: one per test with teardown, and a bounded poll.

import { startApiServer, type ApiServer, type ApiServerOptions } from './server.ts';

/** What tap's `t` offers that the helpers need (keeps them independent of tap's types). */
export interface Teardown {
  teardown(fn: () => unknown): void;
}

/** Start a server that is closed in t's teardown. */
export async function startServer(t: Teardown, opts: ApiServerOptions = {}): Promise<ApiServer> {
  const server = await startApiServer(opts);
  t.teardown(() => server.close());
  return server;
}

/**
 * Poll until cond() holds. The limit only guards against a hang (a failure names what
 * was awaited); no test asserts how fast anything happens.
 */
export async function waitFor(cond: () => boolean, what: string, limitMs = 15_000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > limitMs) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
