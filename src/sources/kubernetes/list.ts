// The list half of list+watch, done the way client-node's Watch does its
// requests (same authentication, same undici dispatcher) but returning the
// API server's JSON as it is: client-node's typed list calls turn every item
// into generated class instances, which at 10k Services and EndpointSlices
// costs memory and time for nothing (the model validates plain JSON anyway).
// Pages of 500, as client-go's reflector asks for, so a big list is never
// one huge response; each page's items go through `transform` as it arrives
// (the informer's SetTransform), so the raw JSON of a big list is never held
// whole.
import type { KubeConfig, KubernetesObject } from './client-node.ts';
import { apiRequest, apiUrl } from './request.ts';

export interface ListResult<T = KubernetesObject> {
  items: T[];
  metadata: { resourceVersion?: string };
}

/** An error the informer understands: statusCode 410 makes it relist, anything else is restarted by the source. */
export class ListError extends Error {
  readonly statusCode: number;
  readonly code: number;
  readonly body: string;
  constructor(path: string, statusCode: number, body: string) {
    super(`list ${path}: HTTP ${statusCode}: ${body.slice(0, 300)}`);
    this.name = 'ListError';
    this.statusCode = statusCode;
    this.code = statusCode;
    this.body = body;
  }
}

export const PAGE_SIZE = 500;

export async function listAll<T = KubernetesObject>(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | undefined>,
  transform: (item: KubernetesObject) => T = (item) => item as T,
  /** Each page's request (and its body) ends when this asks: a page that takes too long, a move to another API server. */
  signal: () => AbortSignal | undefined = () => undefined,
): Promise<ListResult<T>> {
  const items: T[] = [];
  let cont: string | undefined;
  let resourceVersion: string | undefined;
  do {
    const url = apiUrl(kc, path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, v);
    url.searchParams.set('limit', String(PAGE_SIZE));
    if (cont) url.searchParams.set('continue', cont);
    const sig = signal();
    const res = await apiRequest(kc, { method: 'GET', url, ...(sig ? { signal: sig } : {}) });
    if (res.status !== 200) throw new ListError(path, res.status, await res.text());
    const body = (await res.json()) as { items?: KubernetesObject[] | null; metadata?: { resourceVersion?: string; continue?: string } };
    for (const item of body.items ?? []) items.push(transform(item));
    cont = body.metadata?.continue || undefined;
    resourceVersion = body.metadata?.resourceVersion;
  } while (cont);
  return { items, metadata: resourceVersion === undefined ? {} : { resourceVersion } };
}
