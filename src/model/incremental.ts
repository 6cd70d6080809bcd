// The desired state, kept up to date one object at a time: a change to a
// Service or an EndpointSlice recomputes that Service's frontends only, so an
// endpoint change costs the same with 10 or 100,000 Services. It applies the
// same rules as buildDesiredState (the tests' oracle, test/model/desired.ts: a property test holds the two equal),
// including who wins when two Services claim one frontend: the one whose
// namespace/name sorts first (claims.ts, shared with buildDesiredState).
import { isProxied, objectId, sliceService } from './proxied.ts';
import { type IpSlice, type ModelSlice, modelSlice } from './endpoints.ts';
import { serviceFrontends, type SourcedFrontend } from './frontends.ts';
import { keepClaimedFrontends } from './claims.ts';
import { sameFrontends } from './same.ts';
import { EVERY_NODE_ADDRESS, type NodePortAddressSpec, withNodePortAddresses } from './nodeport-addresses.ts';
import { DEFAULT_NODE_PORT_RANGE, type HostPortPod, hostPortFrontends, hostPortPod, type PortRange } from './host-ports.ts';
import { BypassModel } from './socket-lb-bypass.ts';
import { OneToMany } from '../util/one-to-many.ts';
import type { EndpointSlice, Pod, Service } from './schemas.ts';
import type { Frontend, NodeInfo, Problem } from './types.ts';

export interface ModelChanges {
  /** Services (and Pods' hostPorts, by host-ports.ts podOwner()) whose frontends changed, with all their frontends now (empty: none). */
  services: Map<string, Frontend[]>;
  /** Problems of the objects recomputed, by object ("Kind namespace/name"); an empty list means it is fine now. */
  problems: Map<string, Problem[]>;
}

function objectKey(kind: string, id: string): string {
  return `${kind} ${id}`;
}

/** The keys of the external frontends (a key twice when the Service lists one twice: claims are per key). */
function externalKeys(candidates: readonly SourcedFrontend[] | undefined): string[] {
  const keys: string[] = [];
  for (const c of candidates ?? []) if (c.frontend.scope === 'external') keys.push(c.frontend.key);
  return keys;
}

/** Membership in `keys`: a scan for a few, a Set for many. */
function membership(keys: readonly string[]): (key: string) => boolean {
  if (keys.length <= 16) return (key) => keys.includes(key);
  const set = new Set(keys);
  return (key) => set.has(key);
}

/** The value that sorts first (code-unit order, as Array.prototype.sort), or undefined when none. */
function firstSorted(values: Iterable<string>): string | undefined {
  let first: string | undefined;
  for (const v of values) if (first === undefined || v < first) first = v;
  return first;
}

export class IncrementalModel {
  readonly #services = new Map<string, Service>();
  /** What the model keeps of the slices that feed a Service (endpoints.ts ModelSlice), by slice id. */
  readonly #slices = new Map<string, ModelSlice>();
  /** Slice id -> the Service it feeds (only slices kube-proxy would use). */
  readonly #sliceOwner = new Map<string, string>();
  readonly #slicesBySvc = new OneToMany();
  /** The node as the source describes it. */
  #node: NodeInfo | undefined;
  /** Which of the node's addresses serve NodePorts (--nodeport-addresses), and the node's interfaces' addresses. */
  #nodePorts: { spec: NodePortAddressSpec; local: readonly string[] } = { spec: EVERY_NODE_ADDRESS, local: [] };
  /** #node with the addresses that serve NodePorts: what frontends are built from. */
  #effectiveNode: NodeInfo | undefined;

  /** Every frontend each Service would have if it won every conflict. */
  readonly #candidates = new Map<string, SourcedFrontend[]>();
  /** External frontend key -> the Services that claim it. */
  readonly #claims = new OneToMany();
  /** What the maps were last told, per Service. */
  readonly #emitted = new Map<string, Frontend[]>();

  /** This node's Pods with hostPorts to map (host-ports.ts), by namespace/name. */
  readonly #pods = new Map<string, HostPortPod>();
  #hostPorts: { enabled: boolean; nodePortRange: PortRange } = { enabled: true, nodePortRange: DEFAULT_NODE_PORT_RANGE };
  /** Every frontend key the Pods ask for: a Service claiming or leaving one recomputes the Pods. */
  #podKeys = new Set<string>();
  /** The Pods' hostPort frontends (or problems) may have changed. */
  #podsDirty = false;
  /** Pods whose problems were last reported non-empty (a Pod leaving the model clears them). */
  readonly #podProblems = new Set<string>();

  /** The Pods and Namespaces that say which Pods bypass the socket LB (socket-lb-bypass.ts): the agent reads it apart from the frontends. */
  readonly socketLb = new BypassModel();

  readonly #dirty = new Set<string>();
  readonly #problemDirty = new Map<string, Problem[]>();
  /** Problems of objects that failed validation (by object key), until a valid version or a delete arrives. */
  readonly #rejected = new Map<string, Problem[]>();

  get serviceCount(): number {
    return this.#services.size;
  }

  upsertService(svc: Service): void {
    const id = objectId(svc);
    this.#services.set(id, svc);
    this.#dirty.add(id);
  }

  deleteService(namespace: string, name: string): void {
    const id = `${namespace}/${name}`;
    this.#services.delete(id);
    this.#dirty.add(id);
    this.#problemDirty.set(objectKey('Service', id), []);
  }

  /** Returns the Service (namespace/name) the slice feeds, or undefined when kube-proxy would not use it. */
  upsertSlice(slice: EndpointSlice): string | undefined {
    const id = objectId(slice);
    this.#unlinkSlice(id);
    const problems: Problem[] = [];
    const owner = sliceService(slice, problems);
    this.#problemDirty.set(objectKey('EndpointSlice', id), problems);
    if (owner === undefined) {
      this.#slices.delete(id);
      return undefined;
    }
    // An IP slice (sliceService leaves FQDN ones out), kept compact.
    this.#slices.set(id, modelSlice(slice as IpSlice));
    this.#sliceOwner.set(id, owner);
    this.#slicesBySvc.add(owner, id);
    this.#dirty.add(owner);
    return owner;
  }

  deleteSlice(namespace: string, name: string): void {
    const id = `${namespace}/${name}`;
    this.#unlinkSlice(id);
    this.#slices.delete(id);
    this.#problemDirty.set(objectKey('EndpointSlice', id), []);
  }

  #unlinkSlice(id: string): void {
    const owner = this.#sliceOwner.get(id);
    if (owner === undefined) return;
    this.#sliceOwner.delete(id);
    this.#slicesBySvc.remove(owner, id);
    this.#dirty.add(owner);
  }

  /**
   * A Pod of this node (only hostPorts are read of it): its mappings, if it
   * has any to serve, recompute the Pods' frontends.
   */
  upsertPod(pod: Pod): void {
    this.socketLb.upsertPod(pod);
    const id = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const kept = hostPortPod(pod);
    if (kept) this.#pods.set(id, kept);
    else if (!this.#pods.delete(id)) return;
    this.#podsDirty = true;
  }

  deletePod(namespace: string, name: string): void {
    this.socketLb.deletePod(namespace, name);
    if (this.#pods.delete(`${namespace}/${name}`)) this.#podsDirty = true;
  }

  /** Whether Pods' hostPorts are served (--host-ports), and the NodePort range they must stay out of. */
  setHostPorts(enabled: boolean, nodePortRange: PortRange): void {
    this.#hostPorts = { enabled, nodePortRange };
    this.#podsDirty = true;
  }

  /**
   * An object failed validation (the source has removed any earlier version):
   * its problems are reported with the model's own, and stay known until
   * accept() is called for it.
   */
  reject(kind: string, namespace: string, name: string, problems: Problem[]): void {
    const key = objectKey(kind, `${namespace}/${name}`);
    this.#rejected.set(key, problems);
    this.#problemDirty.set(key, problems);
  }

  /** A valid version of the object, or its deletion, arrived: what reject() recorded is over. */
  accept(kind: string, namespace: string, name: string): void {
    const key = objectKey(kind, `${namespace}/${name}`);
    if (this.#rejected.delete(key)) this.#problemDirty.set(key, []);
  }

  /**
   * Problems the source found that belong to no object the model holds (a
   * manifest file that does not parse, an object defined twice), reported
   * with the model's own under the source's key; [] means they are over.
   */
  sourceProblems(key: string, problems: Problem[]): void {
    this.#problemDirty.set(key, problems);
  }

  /** The node's name and addresses decide NodePort frontends and local endpoints: every Service is recomputed. */
  setNode(node: NodeInfo | undefined): void {
    if (JSON.stringify(node) === JSON.stringify(this.#node)) return;
    this.#node = node;
    this.#nodeChanged();
  }

  /**
   * Which of the node's addresses serve NodePorts (nodeport-addresses.ts),
   * and the addresses of the node's interfaces (empty where the agent does
   * not run in the node's network namespace): every Service whose NodePort
   * addresses change is recomputed.
   */
  setNodePortAddresses(spec: NodePortAddressSpec, local: readonly string[]): void {
    this.#nodePorts = { spec, local: [...local] };
    this.#nodeChanged();
  }

  #nodeChanged(): void {
    const effective = withNodePortAddresses(this.#node, this.#nodePorts.spec, this.#nodePorts.local);
    if (JSON.stringify(effective) === JSON.stringify(this.#effectiveNode)) return;
    this.#effectiveNode = effective;
    for (const id of this.#services.keys()) this.#dirty.add(id);
    this.#podsDirty = true;
  }

  /** Marks every Service for recomputation (a periodic full resync). */
  markAllDirty(): void {
    for (const id of this.#services.keys()) this.#dirty.add(id);
    for (const id of this.#emitted.keys()) this.#dirty.add(id);
    this.#podsDirty = true;
  }

  /** All frontends, by Service, as last computed (for a full sync). */
  allFrontends(): Map<string, Frontend[]> {
    return new Map(this.#emitted);
  }

  /** Recomputes the Services changed since the last call and returns what differs. */
  takeChanges(): ModelChanges {
    const problems = new Map(this.#problemDirty);
    this.#problemDirty.clear();
    const dirty = [...this.#dirty];
    this.#dirty.clear();

    // 1. New candidates for the changed Services, and every Service whose claim on a frontend changed.
    const affected = new Set<string>(dirty);
    for (const id of dirty) {
      const own: Problem[] = [];
      const next = this.#compute(id, own);
      const key = objectKey('Service', id);
      const rejected = this.#rejected.get(key);
      problems.set(key, rejected ? [...rejected, ...own] : own);
      // A Service has a handful of external frontends: lists, not Sets (unless it has many).
      const before = externalKeys(this.#candidates.get(id));
      const after = externalKeys(next);
      const wasClaimed = membership(before);
      const isClaimed = membership(after);
      for (const key of before) {
        if (isClaimed(key)) continue;
        if (this.#podKeys.has(key)) this.#podsDirty = true;
        this.#claims.remove(key, id);
        for (const other of this.#claims.values(key)) affected.add(other);
      }
      for (const key of after) {
        if (wasClaimed(key)) continue;
        if (this.#podKeys.has(key)) this.#podsDirty = true;
        for (const other of this.#claims.values(key)) affected.add(other);
        this.#claims.add(key, id);
      }
      // Kept at their exact size: lists grown by push keep room for 16 more (~130 bytes a Service at 10k).
      if (next.length) this.#candidates.set(id, next.slice());
      else this.#candidates.delete(id);
    }

    // 2. Each affected Service keeps the frontends it wins.
    const services = new Map<string, Frontend[]>();
    for (const id of [...affected].sort()) {
      const conflicts: Problem[] = [];
      const won = this.#resolve(id, conflicts);
      if (conflicts.length) {
        const key = objectKey('Service', id);
        problems.set(key, [...(problems.get(key) ?? []), ...conflicts]);
      }
      if (!sameFrontends(this.#emitted.get(id), won)) {
        const kept = won.slice();
        services.set(id, kept);
        if (kept.length) this.#emitted.set(id, kept);
        else this.#emitted.delete(id);
      }
    }
    if (this.#podsDirty) this.#takePodChanges(services, problems);
    return { services, problems };
  }

  /** 3. The Pods' hostPort frontends, all recomputed (a node holds a handful), after the Services' claims are settled. */
  #takePodChanges(services: Map<string, Frontend[]>, problems: Map<string, Problem[]>): void {
    this.#podsDirty = false;
    const result = hostPortFrontends(this.#hostPorts.enabled ? this.#pods.values() : [], {
      node: this.#node,
      local: this.#nodePorts.local,
      nodePortRange: this.#hostPorts.nodePortRange,
      serviceHolding: (key) => firstSorted(this.#claims.values(key)),
    });
    this.#podKeys = result.keys;
    for (const [owner, list] of result.frontends) {
      if (sameFrontends(this.#emitted.get(owner), list)) continue;
      services.set(owner, list);
      if (list.length) this.#emitted.set(owner, list);
      else this.#emitted.delete(owner);
    }
    // Pods gone from the model: their frontends removed, their problems cleared.
    for (const owner of [...this.#emitted.keys()]) {
      if (!owner.startsWith('Pod ') || result.frontends.has(owner)) continue;
      services.set(owner, []);
      this.#emitted.delete(owner);
    }
    for (const id of [...this.#podProblems]) {
      if (!result.problems.has(id)) {
        problems.set(objectKey('Pod', id), []);
        this.#podProblems.delete(id);
      }
    }
    for (const [id, list] of result.problems) {
      const key = objectKey('Pod', id);
      const rejected = this.#rejected.get(key);
      problems.set(key, rejected ? [...rejected, ...list] : list);
      if (list.length) this.#podProblems.add(id);
      else this.#podProblems.delete(id);
    }
  }

  #compute(id: string, problems: Problem[]): SourcedFrontend[] {
    const svc = this.#services.get(id);
    if (!svc || !isProxied(svc, problems)) return [];
    const slices = [...this.#slicesBySvc.values(id)].sort().map((s) => this.#slices.get(s)!);
    return serviceFrontends(svc, slices, this.#effectiveNode, problems);
  }

  /** The candidates of one Service minus the frontends another Service (sorting first) owns. */
  #resolve(id: string, problems: Problem[]): Frontend[] {
    const svc = this.#services.get(id);
    if (!svc) return []; // a deleted Service has no candidates left (takeChanges dropped them)
    return keepClaimedFrontends(
      svc,
      this.#candidates.get(id) ?? [],
      (key) => {
        const owner = firstSorted(this.#claims.values(key));
        if (owner === undefined || owner === id) return undefined;
        const type = this.#candidates.get(owner)?.find((c) => c.frontend.key === key)?.frontend.type;
        return type ? { id: owner, type } : { id: owner };
      },
      problems,
    );
  }
}
