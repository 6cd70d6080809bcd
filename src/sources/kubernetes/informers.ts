// List+watch of the three kinds the agent needs, with the real client-node
// ListWatch (the informer). Services and EndpointSlices that belong to
// another proxy, and headless Services' slices, are filtered at the API
// server, as kube-proxy does. Each informer reports when its first list has
// been delivered, so the agent prunes nothing before it has seen everything.
import { type KubeConfig, type KubernetesObject, ListWatch, Watch } from '@kubernetes/client-node';
import { listAll } from './list.ts';

export type InformerKind = 'Service' | 'EndpointSlice' | 'Node';

export interface InformerHandlers {
  upsert(kind: InformerKind, raw: KubernetesObject): void;
  remove(kind: InformerKind, raw: KubernetesObject): void;
  listed(kind: InformerKind): void;
  error(kind: InformerKind, err: unknown): void;
}

export interface RunningInformer {
  kind: InformerKind;
  informer: ListWatch<KubernetesObject>;
}

const NOT_OTHER_PROXY = '!service.kubernetes.io/service-proxy-name';
const NOT_HEADLESS = '!service.kubernetes.io/headless';

interface Spec {
  kind: InformerKind;
  apiVersion: string;
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export function makeInformers(kc: KubeConfig, nodeName: string | undefined, h: InformerHandlers): RunningInformer[] {
  const watch = new Watch(kc);
  const specs: Spec[] = [
    { kind: 'Service', apiVersion: 'v1', path: '/api/v1/services', labelSelector: NOT_OTHER_PROXY },
    {
      kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', path: '/apis/discovery.k8s.io/v1/endpointslices',
      labelSelector: `${NOT_OTHER_PROXY},${NOT_HEADLESS}`,
    },
  ];
  if (nodeName) specs.push({ kind: 'Node', apiVersion: 'v1', path: '/api/v1/nodes', fieldSelector: `metadata.name=${nodeName}` });
  return specs.map((s) => {
    // List items come without kind/apiVersion (as the API server sends them);
    // the validation downstream wants them, and they are known here.
    const typed = (o: KubernetesObject): KubernetesObject => ({ ...o, kind: s.kind, apiVersion: s.apiVersion });
    const list = async () => {
      const result = await listAll(kc, s.path, { labelSelector: s.labelSelector, fieldSelector: s.fieldSelector });
      // The informer applies the list right after this promise resolves, in
      // the same turn; by the next macrotask every item has been delivered.
      setImmediate(() => h.listed(s.kind));
      return result as never;
    };
    // The query in the path survives into the watch request; client-node sends no
    // allowWatchBookmarks itself, and without bookmarks a quiet resource's watch
    // is re-opened every 30 s from an ever older resourceVersion.
    const informer = new ListWatch<KubernetesObject>(`${s.path}?allowWatchBookmarks=true`, watch, list, false, s.labelSelector, s.fieldSelector);
    informer.on('add', (o) => h.upsert(s.kind, typed(o)));
    informer.on('update', (o) => h.upsert(s.kind, typed(o)));
    informer.on('delete', (o) => h.remove(s.kind, typed(o)));
    informer.on('error', (err) => h.error(s.kind, err));
    return { kind: s.kind, informer };
  });
}
