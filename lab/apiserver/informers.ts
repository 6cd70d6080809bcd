// Client side, with the real @kubernetes/client-node: a KubeConfig for the server,
// paginating list functions, informers exactly as makeInformer builds them that record
// what they emit, and the restart-on-error loop a long-running consumer needs.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CoreV1Api,
  DiscoveryV1Api,
  KubeConfig,
  ListWatch,
  Watch,
  type KubernetesListObject,
  type KubernetesObject,
  type ListWatchOptions,
} from '@kubernetes/client-node';
import { writeKubeconfig } from './kubeconfig.ts';
import type { ApiServer } from './server.ts';
import type { Teardown } from './testing.ts';
import type { StoredObject } from './types.ts';

/** A KubeConfig loaded from a kubeconfig file written for the server (removed in teardown). */
export async function kubeConfigFor(t: Teardown, server: ApiServer): Promise<KubeConfig> {
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-apiserver-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = await writeKubeconfig(join(dir, 'kubeconfig'), server);
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}

export type Kind = 'Service' | 'EndpointSlice' | 'Node';

export interface ListOpts {
  namespace?: string;
  /** Page size: the list function follows continue tokens until the list is complete. */
  limit?: number;
  labelSelector?: string;
  fieldSelector?: string;
}

/** The watch path an informer for kind uses (cluster-wide unless a namespace is given). */
export function watchPath(kind: Kind, namespace?: string): string {
  const ns = namespace !== undefined ? `/namespaces/${namespace}` : '';
  if (kind === 'Service') return `/api/v1${ns}/services`;
  if (kind === 'EndpointSlice') return `/apis/discovery.k8s.io/v1${ns}/endpointslices`;
  return '/api/v1/nodes';
}

/** A paginating list function for makeInformer/ListWatch, built on the generated API clients. */
export function listFn(kc: KubeConfig, kind: Kind, o: ListOpts = {}): () => Promise<KubernetesListObject<KubernetesObject>> {
  const core = kc.makeApiClient(CoreV1Api);
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  const page = (cont: string | undefined): Promise<KubernetesListObject<KubernetesObject>> => {
    const p = {
      ...(o.limit !== undefined ? { limit: o.limit } : {}),
      ...(cont !== undefined ? { _continue: cont } : {}),
      ...(o.labelSelector !== undefined ? { labelSelector: o.labelSelector } : {}),
      ...(o.fieldSelector !== undefined ? { fieldSelector: o.fieldSelector } : {}),
    };
    if (kind === 'Node') return core.listNode(p);
    if (kind === 'Service')
      return o.namespace !== undefined ? core.listNamespacedService({ namespace: o.namespace, ...p }) : core.listServiceForAllNamespaces(p);
    return o.namespace !== undefined
      ? discovery.listNamespacedEndpointSlice({ namespace: o.namespace, ...p })
      : discovery.listEndpointSliceForAllNamespaces(p);
  };
  return async () => {
    const first = await page(undefined);
    const items = [...first.items];
    let cont = first.metadata?._continue;
    let last = first;
    while (cont) {
      last = await page(cont);
      items.push(...last.items);
      cont = last.metadata?._continue;
    }
    return { ...last, items };
  };
}

export interface Recorded {
  type: 'add' | 'update' | 'delete' | 'connect' | 'error';
  name?: string;
  rv?: string;
  obj?: KubernetesObject;
  err?: unknown;
}

export interface RecordingInformer {
  informer: ListWatch<KubernetesObject>;
  events: Recorded[];
  errors: () => unknown[];
  /** "ns/name@rv" of everything in the informer's cache, sorted. */
  cache: () => string[];
  stop: () => Promise<void>;
}

export interface InformerOpts extends ListOpts {
  /** Extra query for the watch path, e.g. "allowWatchBookmarks=true" (client-node 2.0.1 sends no such parameter itself). */
  watchQuery?: string;
  /** Passed to ListWatch (client-node uses it for the reconnect back-off sleep). */
  delayFn?: ListWatchOptions['delayFn'];
  /** Construct the Watch yourself (e.g. to shorten its private requestTimeoutMs). */
  watch?: Watch;
}

/**
 * A client-node informer exactly as makeInformer builds it (new ListWatch(path, new
 * Watch(kc), listFn, false, labelSelector)), plus the fieldSelector and delayFn arguments
 * makeInformer does not expose, recording every callback.
 */
export function recordingInformer(t: Teardown, kc: KubeConfig, kind: Kind, o: InformerOpts = {}): RecordingInformer {
  const path = watchPath(kind, o.namespace) + (o.watchQuery ? `?${o.watchQuery}` : '');
  const informer = new ListWatch<KubernetesObject>(
    path,
    o.watch ?? new Watch(kc),
    listFn(kc, kind, o),
    false,
    o.labelSelector,
    o.fieldSelector,
    o.delayFn ? { delayFn: o.delayFn } : undefined,
  );
  const events: Recorded[] = [];
  const objEvent = (type: Recorded['type']) => (obj: KubernetesObject) => {
    const r: Recorded = { type, obj };
    if (obj.metadata?.name !== undefined) r.name = obj.metadata.name;
    if (obj.metadata?.resourceVersion !== undefined) r.rv = obj.metadata.resourceVersion;
    events.push(r);
  };
  informer.on('add', objEvent('add'));
  informer.on('update', objEvent('update'));
  informer.on('delete', objEvent('delete'));
  informer.on('connect', () => events.push({ type: 'connect' }));
  informer.on('error', (err?: unknown) => events.push({ type: 'error', err }));
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await informer.stop();
  };
  const rec: RecordingInformer = {
    informer,
    events,
    errors: () => events.filter((e) => e.type === 'error').map((e) => e.err),
    cache: () =>
      informer
        .list()
        .map((x) => `${x.metadata?.namespace ?? ''}/${x.metadata?.name}@${x.metadata?.resourceVersion}`)
        .sort(),
    stop,
  };
  // Through rec, so that wrappers (restartOnError) are torn down too.
  t.teardown(() => rec.stop());
  return rec;
}

/** "ns/name@rv" of the server's objects of a kind, sorted, for comparison with RecordingInformer.cache(). */
export function serverState(server: ApiServer, kind: Kind, filter: (o: StoredObject) => boolean = () => true): string[] {
  return server
    .list(kind)
    .filter(filter)
    .map((x) => `${x.metadata.namespace ?? ''}/${x.metadata.name}@${x.metadata.resourceVersion}`)
    .sort();
}

/**
 * What a long-running consumer of client-node 2.0.1 informers must do: the informer stops
 * on any error other than 410 / client timeout, so restart it (after a pause) until it
 * runs again. Returns a function that turns the restarting off.
 */
export function restartOnError(rec: RecordingInformer, pauseMs = 20): () => void {
  let active = true;
  let timer: NodeJS.Timeout | undefined;
  rec.informer.on('error', () => {
    if (!active) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (active) void rec.informer.start();
    }, pauseMs);
  });
  const off = (): void => {
    active = false;
    clearTimeout(timer);
  };
  const stop = rec.stop;
  rec.stop = async () => {
    off();
    await stop();
  };
  return off;
}
