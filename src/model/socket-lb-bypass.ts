// Which of this node's Pods the socket LB leaves alone: svcmap.io/socket-lb
// on the Pod, else on its Namespace ("bypass" or "on"; the Pod's own value
// wins). An annotation, not a label: it is a setting, read on one object
// each, not something anything selects by, and one key on both kinds keeps
// one place to look. Those Pods' traffic is translated per packet at their
// veths instead, so a service mesh's sidecar sees the ClusterIP; that needs
// the veth datapath, and without it the Pod keeps the socket LB (its traffic
// would otherwise leave untranslated) with a warning naming the flag.
// Host-network Pods are the node's own sockets: they keep the socket LB.
// Pure: the agent resolves the Pods to their cgroups (agent/datapath).
import { METADATA_KEYS } from './metadata-keys.ts';
import { problemAbout } from './problems.ts';
import type { Problem } from './types.ts';

const KEY = METADATA_KEYS.socketLb.key;
const FIELD = `metadata.annotations[${KEY}]`;
const VALUES = ['bypass', 'on'] as const;
type Value = (typeof VALUES)[number];

/** What is read of a Pod for the bypass (schemas.ts PodSchema keeps it). */
export interface BypassPodInput {
  kind: 'Pod';
  metadata: { namespace: string; name: string; uid: string; socketLb?: string };
  nodeName: string;
  hostNetwork: boolean;
  phase: string;
}

/** What is read of a Namespace: its svcmap.io/socket-lb annotation. */
export interface BypassNamespaceInput {
  kind: 'Namespace';
  metadata: { name: string; socketLb?: string };
}

/** A Pod whose sockets the socket LB leaves alone. */
export interface BypassedPod {
  namespace: string;
  name: string;
  uid: string;
}

export interface BypassResult {
  /** By namespace/name, in that order. */
  pods: BypassedPod[];
  /** By object key ("Pod ns/name", "Namespace name"): [] for those without problems. */
  problems: Map<string, Problem[]>;
}

function valueOf(
  raw: string | undefined,
  obj: { kind: string; metadata: { name: string; namespace?: string } },
  out: Problem[],
): Value | undefined {
  if (raw === undefined) return undefined;
  if ((VALUES as readonly string[]).includes(raw)) return raw as Value;
  out.push(problemAbout(obj, 'warning', FIELD, `${JSON.stringify(raw)} is not one of ${VALUES.join(', ')}; ignored`));
  return undefined;
}

/**
 * The bypassed Pods of this node (nodeName; undefined: every Pod given) and
 * the problems of each Pod and Namespace with the annotation. vethOn: the
 * veth datapath translates what the socket LB leaves alone.
 */
export function socketLbBypass(
  pods: Iterable<BypassPodInput>,
  namespaces: ReadonlyMap<string, BypassNamespaceInput>,
  opts: { nodeName: string | undefined; vethOn: boolean },
): BypassResult {
  const problems = new Map<string, Problem[]>();
  const nsValue = new Map<string, Value | undefined>();
  for (const [name, ns] of namespaces) {
    const own: Problem[] = [];
    nsValue.set(name, valueOf(ns.metadata.socketLb, ns, own));
    problems.set(`Namespace ${name}`, own);
  }
  const out: BypassedPod[] = [];
  for (const pod of pods) {
    const { namespace, name, uid } = pod.metadata;
    const own: Problem[] = [];
    problems.set(`Pod ${namespace}/${name}`, own);
    if (opts.nodeName !== undefined && pod.nodeName !== opts.nodeName) continue;
    const value = valueOf(pod.metadata.socketLb, pod, own) ?? nsValue.get(namespace);
    if (value !== 'bypass' || pod.hostNetwork) continue;
    if (pod.phase === 'Succeeded' || pod.phase === 'Failed') continue; // its processes are gone
    if (!opts.vethOn) {
      const from = pod.metadata.socketLb === 'bypass' ? 'the Pod' : `its Namespace ${namespace}`;
      own.push({
        ...problemAbout(
          pod,
          'warning',
          FIELD,
          `bypass (from ${from}) needs per-packet translation at the pods' veths: the Pod keeps the socket LB until the agent runs with --veth-lb (chart value socketLB.vethTranslation: true)`,
        ),
        reason: 'SocketLbBypassIgnored',
      });
      continue;
    }
    if (uid === '') {
      // A manifest's Pod (file source) may lack it; the API server always sets it.
      own.push(problemAbout(pod, 'warning', 'metadata.uid', "missing: the Pod's cgroup is found by it, so the Pod keeps the socket LB"));
      continue;
    }
    out.push({ namespace, name, uid });
  }
  out.sort((a, b) => (a.namespace !== b.namespace ? (a.namespace < b.namespace ? -1 : 1) : a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { pods: out, problems };
}

/**
 * The Pods and Namespaces the sources deliver, kept for socketLbBypass():
 * take() answers only when something changed since the last take().
 */
export class BypassModel {
  readonly #pods = new Map<string, BypassPodInput>();
  readonly #namespaces = new Map<string, BypassNamespaceInput>();
  #dirty = true;

  upsertPod(pod: BypassPodInput): void {
    this.#pods.set(`${pod.metadata.namespace}/${pod.metadata.name}`, pod);
    this.#dirty = true;
  }

  deletePod(namespace: string, name: string): void {
    if (this.#pods.delete(`${namespace}/${name}`)) this.#dirty = true;
  }

  upsertNamespace(ns: BypassNamespaceInput): void {
    this.#namespaces.set(ns.metadata.name, ns);
    this.#dirty = true;
  }

  deleteNamespace(name: string): void {
    if (this.#namespaces.delete(name)) this.#dirty = true;
  }

  /** The result, when it may have changed since the last take(); undefined otherwise. */
  take(opts: { nodeName: string | undefined; vethOn: boolean }): BypassResult | undefined {
    if (!this.#dirty) return undefined;
    this.#dirty = false;
    return socketLbBypass(this.#pods.values(), this.#namespaces, opts);
  }
}
