// The hostPort mappings of this node's Pods, as frontends whose only backend
// is the Pod: what the CNI's portmap plugin does with iptables DNAT, served
// by the socket LB and tc like a NodePort with externalTrafficPolicy Local
// (the client's source is kept, as portmap keeps it).
//  - Only Running Pods with an IP, on this node, not on the host network (a
//    host-network Pod listens on the node's port itself), TCP and UDP.
//  - Per family: a mapping reaches the Pod's IP of the family of its
//    address. hostIP "" serves every node address of both families (those
//    NodePorts could use: the Node's and the interfaces', never loopback)
//    and, through the wildcard entry, 127.0.0.1 and [::1] for the node's
//    own processes; "0.0.0.0" and "::" the same for one family; any other
//    hostIP that address only (127.0.0.1 too: the datapath serves loopback
//    frontends to the node's own sockets only).
//  - A hostPort inside the NodePort range is ignored (HostPortIgnored), as
//    Cilium does: that port belongs to NodePorts on every node address.
//  - A frontend key held by a Service stays the Service's; one that two
//    Pods claim goes to the older (creationTimestamp, then namespace/name);
//    the other Pod's mapping is skipped whole, with a FrontendConflict.
import { EVERY_NODE_ADDRESS, nodePortIPs } from './nodeport-addresses.ts';
import { frontendConflict, problemAbout } from './problems.ts';
import { frontendKey, WILDCARD_IP, WILDCARD_IP6 } from './frontends.ts';
import type { Pod, PodHostPort } from './schemas.ts';
import type { Frontend, NodeInfo, Problem, ServiceRef } from './types.ts';
import { type Family, familyOf } from '../util/family.ts';

export interface PortRange {
  min: number;
  max: number;
}

/** kube-apiserver's default --service-node-port-range. */
export const DEFAULT_NODE_PORT_RANGE: PortRange = { min: 30000, max: 32767 };

/** "30000-32767" (kube-apiserver's --service-node-port-range). Throws an Error naming what is wrong. */
export function parsePortRange(text: string): PortRange {
  const m = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(text);
  const min = Number(m?.[1]);
  const max = Number(m?.[2]);
  if (!m || min < 1 || max > 65535 || min > max) {
    throw new Error(`${JSON.stringify(text)} is not a port range such as 30000-32767 (1-65535, first <= last)`);
  }
  return { min, max };
}

/** What the model keeps of a Pod whose hostPorts may be mapped. */
export interface HostPortPod {
  kind: 'Pod';
  metadata: { namespace: string; name: string; creationTimestamp: string };
  nodeName: string;
  /** Its IPs, at most one per family (the first of each, as the CNI gives them). */
  ips: string[];
  hostPorts: PodHostPort[];
}

/** The Pod's mappings as the model keeps them, or undefined when it has none to serve (not Running, no IP, host network). */
export function hostPortPod(pod: Pod): HostPortPod | undefined {
  if (pod.hostPorts.length === 0 || pod.hostNetwork || pod.phase !== 'Running') return undefined;
  const ips: string[] = [];
  for (const ip of pod.podIPs) if (!ips.some((x) => familyOf(x) === familyOf(ip))) ips.push(ip);
  if (ips.length === 0) return undefined;
  return { kind: 'Pod', metadata: { ...pod.metadata }, nodeName: pod.nodeName, ips, hostPorts: pod.hostPorts };
}

/** The owner key of a Pod's frontends, apart from Services' ("namespace/name" has no space). */
export function podOwner(namespace: string, name: string): string {
  return `Pod ${namespace}/${name}`;
}

export interface HostPortContext {
  node: NodeInfo | undefined;
  /** The node's interfaces' addresses (see nodeport-addresses.ts). */
  local: readonly string[];
  nodePortRange: PortRange;
  /** The Service holding an external frontend key, if any. */
  serviceHolding: (key: string) => string | undefined;
}

export interface HostPortResult {
  /** By owner (podOwner()): every Pod given, [] for those with nothing served. */
  frontends: Map<string, Frontend[]>;
  /** By Pod (namespace/name): [] for those without problems. */
  problems: Map<string, Problem[]>;
  /** Every key the Pods asked for (won or not): a Service taking or leaving one changes the result. */
  keys: Set<string>;
}

/** The addresses one mapping serves, of `family`, with whether each is the wildcard entry. */
function addressesOf(hostIP: string, family: Family, ctx: HostPortContext): Array<{ ip: string; wildcard: boolean }> {
  const any = family === 4 ? WILDCARD_IP : WILDCARD_IP6;
  if (hostIP === '' || hostIP === any) {
    const ips = nodePortIPs(EVERY_NODE_ADDRESS, family, ctx.node, ctx.local).map((ip) => ({ ip, wildcard: false }));
    return [...ips, { ip: any, wildcard: true }];
  }
  return familyOf(hostIP) === family && hostIP !== WILDCARD_IP && hostIP !== WILDCARD_IP6 ? [{ ip: hostIP, wildcard: false }] : [];
}

const olderFirst = (a: HostPortPod, b: HostPortPod): number =>
  a.metadata.creationTimestamp !== b.metadata.creationTimestamp
    ? a.metadata.creationTimestamp < b.metadata.creationTimestamp
      ? -1
      : 1
    : `${a.metadata.namespace}/${a.metadata.name}` < `${b.metadata.namespace}/${b.metadata.name}`
      ? -1
      : 1;

/** The frontends of every Pod's hostPorts on this node, older Pods first. */
export function hostPortFrontends(pods: Iterable<HostPortPod>, ctx: HostPortContext): HostPortResult {
  const frontends = new Map<string, Frontend[]>();
  const problems = new Map<string, Problem[]>();
  const keys = new Set<string>();
  /** Key -> the Pod (namespace/name) holding it. */
  const held = new Map<string, string>();
  const { min, max } = ctx.nodePortRange;
  for (const pod of [...pods].sort(olderFirst)) {
    const { namespace, name } = pod.metadata;
    const id = `${namespace}/${name}`;
    const out: Frontend[] = [];
    const own: Problem[] = [];
    frontends.set(podOwner(namespace, name), out);
    problems.set(id, own);
    if (ctx.node && pod.nodeName !== ctx.node.name) continue; // another node's Pod (a manifest's)
    const service: ServiceRef = { namespace, name, portName: '', kind: 'Pod' };
    for (const hp of pod.hostPorts) {
      const path = `${hp.path}.hostPort`;
      if (hp.protocol === 'SCTP') {
        own.push(problemAbout(pod, 'warning', `${hp.path}.protocol`, 'SCTP hostPorts are not served; mapping ignored'));
        continue;
      }
      if (hp.hostPort >= min && hp.hostPort <= max) {
        own.push(problemAbout(pod, 'warning', path, `${hp.hostPort} is inside the NodePort range ${min}-${max}: the hostPort is ignored`));
        continue;
      }
      const mine: Frontend[] = [];
      for (const podIP of pod.ips) {
        const family = familyOf(podIP);
        for (const a of addressesOf(hp.hostIP, family, ctx)) {
          mine.push({
            key: frontendKey(a.ip, hp.hostPort, hp.protocol, 'external'),
            ip: a.ip,
            port: hp.hostPort,
            protocol: hp.protocol,
            scope: 'external',
            type: 'HostPort',
            service,
            // The backend is on this node: tc keeps the client's source, as portmap does.
            externalLocal: true,
            internalLocal: false,
            wildcard: a.wildcard,
            twoScopes: false,
            sourceHashPort: false,
            affinityTimeoutSeconds: 0,
            sourceRanges: [],
            backends: [{ ip: podIP, port: hp.containerPort, protocol: hp.protocol, state: 'active', nodeName: pod.nodeName, local: true }],
          });
        }
      }
      for (const f of mine) keys.add(f.key);
      const holder = (key: string) => {
        const svc = ctx.serviceHolding(key);
        return svc === undefined ? held.get(key) : `Service ${svc}`;
      };
      const taken = mine.map((f) => ({ key: f.key, by: holder(f.key) })).find((x) => x.by !== undefined);
      if (taken) {
        own.push(frontendConflict(pod, path, `${taken.key} is already used by ${taken.by}; this hostPort is not served`));
        continue;
      }
      for (const f of mine) held.set(f.key, `Pod ${id}`);
      out.push(...mine);
    }
  }
  return { frontends, problems, keys };
}
