// Raw HTTP against the server, without a Kubernetes client: one request, or a watch
// stream collected event by event.

import type { ApiServer } from './server.ts';
import { waitFor } from './testing.ts';

export interface HttpResult {
  status: number;
  headers: Headers;
  body: any;
}

/** One HTTP request to the server; JSON bodies in and out. */
export async function http(
  server: ApiServer,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<HttpResult> {
  const init: RequestInit = { method, headers: { 'Content-Type': contentType } };
  if (body !== undefined) init.body = JSON.stringify(body);
  const res = await fetch(server.url + path, init);
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

export interface RawWatch {
  status: number;
  events: Array<{ type: string; object: any }>;
  /** Resolves when the server ends the stream (cleanly), rejects if it breaks. */
  ended: Promise<void>;
  until(n: number): Promise<void>;
  close(): void;
}

/** A raw watch over HTTP: newline-delimited JSON events collected as they arrive. */
export async function rawWatch(server: ApiServer, path: string): Promise<RawWatch> {
  const ac = new AbortController();
  const res = await fetch(server.url + path, { signal: ac.signal });
  const events: RawWatch['events'] = [];
  const ended = (async () => {
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        events.push(JSON.parse(buf.slice(0, nl)));
        buf = buf.slice(nl + 1);
      }
    }
  })();
  ended.catch(() => {});
  return {
    status: res.status,
    events,
    ended,
    until: (n) => waitFor(() => events.length >= n, `${n} watch events on ${path}`),
    close: () => ac.abort(),
  };
}
