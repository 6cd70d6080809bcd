// List+watch of the kinds the agent needs (Services, EndpointSlices, its Node and, for hostPorts and socket-LB bypass, its Pods and the Namespaces), with the real client-node
// ListWatch (the informer). Services and EndpointSlices that belong to
// another proxy or carry the headless label are filtered at the API server,
// with kube-proxy's label selector. An object that gains such a label leaves
// the selection: the watch delivers it as DELETED (and as ADDED when the
// label goes), so the agent drops it and takes it back like any removal. Each informer reports when its first list has
// been delivered, so the agent prunes nothing before it has seen everything.
//
// One copy of each object: as client-go's SetTransform, every object is
// transformed as it arrives (each list page, each watch event) before the
// informer caches it. The transform validates it (once) and keeps only its
// identity and the validated result, which the source hands to the model and
// then drops (the model keeps a compact record of what it reads); the
// raw JSON (managedFields, annotations, selectors, status the model does not
// read) is dropped at once.
import { type KubeConfig, type KubernetesObject, ListWatch, type Watch } from './client-node.ts';
import { type ValidationResult } from '../../model/schemas.ts';
import { validateObject } from '../../model/validate.ts';
import { NOT_PROXIED_LABELS } from '../../model/proxied.ts';
import { listAll } from './list.ts';
import type { ServerBound } from './server-bound.ts';

export type InformerKind = 'Service' | 'EndpointSlice' | 'Node' | 'Pod' | 'Namespace';

/** What the informer caches for one object: kind, identity (the informer keys by it) and, unless it was deleted, its validation. */
export interface CachedObject {
  kind: string;
  apiVersion: string;
  metadata: { name?: string; namespace?: string; resourceVersion?: string };
  /** The object validated as it arrived (absent on a deletion, which needs no validation). */
  validated?: ValidationResult;
}

export interface InformerHandlers {
  upsert(kind: InformerKind, obj: CachedObject): void;
  remove(kind: InformerKind, obj: CachedObject): void;
  listed(kind: InformerKind): void;
  error(kind: InformerKind, err: unknown): void;
  /** The API server answered: a list page, a watch event or bookmark. */
  progress(): void;
}

export interface RunningInformer {
  kind: InformerKind;
  informer: ListWatch<CachedObject & KubernetesObject>;
  /** The informer's next watch lists first, whatever resourceVersion it holds (after a move to another API server). */
  relist(): void;
}

/** kube-proxy's selection for both informers: neither label present. */
const PROXIED_SELECTOR = NOT_PROXIED_LABELS.map((l) => `!${l}`).join(',');

interface Spec {
  kind: InformerKind;
  apiVersion: string;
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
}

/** As the API server answers a watch from a resourceVersion it no longer has: the informer relists. */
const GONE = Object.assign(new Error('relist'), { statusCode: 410 });

/** bound: the API servers, and the lists and watches bound to the one in use. pods: this node's Pods too (for their hostPorts). */
export function makeInformers(
  kc: KubeConfig,
  nodeName: string | undefined,
  h: InformerHandlers,
  bound: ServerBound,
  pods = false,
): RunningInformer[] {
  const specs: Spec[] = [
    { kind: 'Service', apiVersion: 'v1', path: '/api/v1/services', labelSelector: PROXIED_SELECTOR },
    {
      kind: 'EndpointSlice',
      apiVersion: 'discovery.k8s.io/v1',
      path: '/apis/discovery.k8s.io/v1/endpointslices',
      labelSelector: PROXIED_SELECTOR,
    },
  ];
  if (nodeName) specs.push({ kind: 'Node', apiVersion: 'v1', path: '/api/v1/nodes', fieldSelector: `metadata.name=${nodeName}` });
  // This node's Pods only, for their hostPorts (as the kubelet watches them).
  if (nodeName && pods) specs.push({ kind: 'Pod', apiVersion: 'v1', path: '/api/v1/pods', fieldSelector: `spec.nodeName=${nodeName}` });
  // With the Pods, the Namespaces: their svcmap.io/socket-lb applies to their Pods.
  if (nodeName && pods) specs.push({ kind: 'Namespace', apiVersion: 'v1', path: '/api/v1/namespaces' });
  return specs.map((s) => {
    const transform = (raw: KubernetesObject, validate: boolean): CachedObject & KubernetesObject => {
      // List items come without kind/apiVersion (as the API server sends them);
      // validation wants them, and they are known here. The raw object is
      // this informer's own (parsed JSON), so it is set in place.
      raw.kind = s.kind;
      raw.apiVersion = s.apiVersion;
      const m = raw.metadata ?? {};
      const metadata: CachedObject['metadata'] = {};
      if (m.name !== undefined) metadata.name = m.name;
      if (m.namespace !== undefined) metadata.namespace = m.namespace;
      if (m.resourceVersion !== undefined) metadata.resourceVersion = m.resourceVersion;
      // validated in the literal (undefined when not validated): a property
      // added later lives outside the object (~80 bytes more each at 10k x 2).
      const out: CachedObject = {
        kind: s.kind,
        apiVersion: s.apiVersion,
        metadata,
        validated: validate ? validateObject(raw, 'api') : undefined,
      };
      return out as CachedObject & KubernetesObject;
    };
    // Set after a move to another API server: the next watch lists first (a list clears it).
    let relist = false;
    const list = async () => {
      relist = false;
      const server = bound.servers.current;
      let result;
      try {
        result = await listAll(
          kc,
          s.path,
          { labelSelector: s.labelSelector, fieldSelector: s.fieldSelector },
          (item) => transform(item, true),
          () => bound.listSignal(),
        );
      } catch (err) {
        throw bound.listFailure(server, err);
      }
      // Listed from a server the agent has left meanwhile: the informer lists again from the new one.
      if (server !== bound.servers.current) throw bound.listFailure(server, undefined);
      h.progress();
      // The informer applies the list right after this promise resolves, in
      // the same turn; by the next macrotask every item has been delivered.
      setImmediate(() => h.listed(s.kind));
      return result as never;
    };
    // The query in the path survives into the watch request; client-node sends no
    // allowWatchBookmarks itself, and without bookmarks a quiet watch says
    // nothing that tells a live API server from a stalled one (server-bound.ts).
    // The watch events go through the transform before the informer sees them.
    const transforming = {
      watch: (
        path: string,
        query: Parameters<Watch['watch']>[1],
        cb: Parameters<Watch['watch']>[2],
        done: Parameters<Watch['watch']>[3],
      ) => {
        if (relist) {
          relist = false;
          setImmediate(() => done(GONE));
          return Promise.resolve(new AbortController());
        }
        return bound.watch(
          path,
          query,
          (phase, obj, raw) => {
            const known = phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED';
            cb(phase, known && obj && typeof obj === 'object' ? transform(obj as KubernetesObject, phase !== 'DELETED') : obj, raw);
          },
          done,
          () => h.progress(),
        );
      },
    } as Watch;
    const informer = new ListWatch<CachedObject & KubernetesObject>(
      `${s.path}?allowWatchBookmarks=true`,
      transforming,
      list,
      false,
      s.labelSelector,
      s.fieldSelector,
    );
    informer.on('add', (o) => h.upsert(s.kind, o));
    informer.on('update', (o) => h.upsert(s.kind, o));
    informer.on('delete', (o) => h.remove(s.kind, o));
    informer.on('error', (err) => h.error(s.kind, err));
    return { kind: s.kind, informer, relist: () => (relist = true) };
  });
}
