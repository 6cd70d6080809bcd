// The network of a lab cluster, like kind's: a "switch" namespace holding a
// bridge (the docker network), one namespace per node with eth0 on it, and an
// "outside" namespace on the same switch for clients that are not in the
// cluster (NodePort, externalIPs, the conformance tests, kubectl, helm). Each
// node routes the other nodes' pod CIDRs to them. The switch's address is every
// node's default gateway and forwards nothing: no route leads out of the lab.
//
// Dual-stack, as a kind cluster with ipFamily: dual: every node, the outside
// namespace and the switch have an IPv4 address and an IPv6 unique local
// address (fd00::/8) beside it, pods get one of each family, and Services one
// of each range. IPv6 lives only in these namespaces (no route out either).

import type { Lab, LabNs } from '../lab.ts';
import { bridgeMac } from '../names.ts';

export interface NodeNet {
  name: string;
  ns: LabNs;
  /** The node's IPv4 InternalIP, on its eth0. */
  ip: string;
  /** The node's IPv6 InternalIP, on its eth0 beside `ip`. */
  ip6: string;
  /** IPv4 pod addresses on this node (the CNI bridge's range). */
  podCidr: string;
  /** IPv6 pod addresses on this node. */
  podCidr6: string;
}

export interface ClusterNet {
  switch: LabNs;
  gateway: string;
  gateway6: string;
  prefixLen: number;
  nodes: NodeNet[];
  outside: { ns: LabNs; ip: string; ip6: string };
  /** The Service ranges, IPv4 first (the primary family): kube-apiserver --service-cluster-ip-range. */
  serviceCidrs: readonly [string, string];
  /** The pod ranges, IPv4 first: kube-proxy --cluster-cidr. */
  clusterCidrs: readonly [string, string];
}

const NET = '172.30.0';
const PREFIX = 24;
/** The switch's IPv6 /64 (Lab.ipv6 adds /64 addresses). */
const NET6 = 'fd00:172:30:';

export const SERVICE_CIDR = '10.96.0.0/16';
export const CLUSTER_CIDR = '10.244.0.0/16';
/** /112: the API server's IPv6 Service range may be at most 20 bits wide. */
export const SERVICE_CIDR6 = 'fd00:10:96::/112';
/** Node i's pods get fd00:10:244:i::/64 of it. */
export const CLUSTER_CIDR6 = 'fd00:10:244::/56';
/** First address of the Service range: the `kubernetes` Service. */
export const KUBERNETES_SERVICE_IP = '10.96.0.1';
export const CLUSTER_DNS_IP = '10.96.0.10';

async function plug(lab: Lab, sw: LabNs, ns: LabNs, ip: string, ip6: string): Promise<void> {
  const port = `s-${ns.name}`.slice(0, 15);
  await lab.ip(sw, 'link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns.ns);
  await lab.ip(sw, 'link', 'set', port, 'master', 'br0', 'up');
  await lab.ip(ns, 'addr', 'add', `${ip}/${PREFIX}`, 'dev', 'eth0');
  await lab.ip(ns, 'link', 'set', 'eth0', 'up');
  await lab.ip(ns, 'route', 'add', 'default', 'via', `${NET}.1`);
  await lab.ipv6(ns, ip6, { dev: 'eth0', gateway: `${NET6}:1` });
}

/**
 * A node forwards both families. No duplicate address detection in it: the
 * CNI bridge's gateway address on cni0 (and every veth the bridge plugin adds)
 * is usable at once, instead of tentative for the first second or so of every
 * pod. Router advertisements are not accepted (none is sent in the lab either).
 */
async function nodeSysctls(lab: Lab, ns: LabNs): Promise<void> {
  await lab.forward(ns);
  for (const conf of ['all', 'default']) {
    await lab.sysctl(ns, `net.ipv6.conf.${conf}.disable_ipv6`, 0);
    await lab.sysctl(ns, `net.ipv6.conf.${conf}.accept_dad`, 0);
    await lab.sysctl(ns, `net.ipv6.conf.${conf}.accept_ra`, 0);
  }
  await lab.sysctl(ns, 'net.ipv6.conf.all.forwarding', 1);
}

export async function createClusterNet(lab: Lab, nodeNames: readonly string[]): Promise<ClusterNet> {
  const gateway = `${NET}.1`;
  const gateway6 = `${NET6}:1`;
  const sw = await lab.netns('switch');
  await lab.ip(sw, 'link', 'add', 'br0', 'address', bridgeMac(), 'type', 'bridge');
  await lab.ip(sw, 'addr', 'add', `${gateway}/${PREFIX}`, 'dev', 'br0');
  await lab.ip(sw, 'link', 'set', 'br0', 'up');
  // The switch forwards neither family (IPv6 forwarding is off in a new namespace).
  await lab.ipv6(sw, gateway6, { dev: 'br0' });

  const nodes: NodeNet[] = [];
  for (const [i, name] of nodeNames.entries()) {
    const ns = await lab.netns(name);
    const node: NodeNet = {
      name,
      ns,
      ip: `${NET}.${10 + i}`,
      ip6: `${NET6}:${10 + i}`,
      podCidr: `10.244.${i + 1}.0/24`,
      podCidr6: `fd00:10:244:${i + 1}::/64`,
    };
    await nodeSysctls(lab, ns);
    await plug(lab, sw, ns, node.ip, node.ip6);
    // The CNI bridge plugin takes cni0 as it finds it; made here, it keeps its
    // own MAC while pods come and go (bridgeMac says why that matters).
    await lab.ip(ns, 'link', 'add', 'cni0', 'address', bridgeMac(), 'type', 'bridge');
    nodes.push(node);
  }
  for (const a of nodes) {
    for (const b of nodes) {
      if (a === b) continue;
      await lab.route(a.ns, b.podCidr, b.ip);
      await lab.ip(a.ns, '-6', 'route', 'replace', b.podCidr6, 'via', b.ip6, 'dev', 'eth0');
    }
  }
  const outsideNs = await lab.netns('outside');
  const outside = { ns: outsideNs, ip: `${NET}.100`, ip6: `${NET6}:100` };
  await plug(lab, sw, outsideNs, outside.ip, outside.ip6);
  return {
    switch: sw,
    gateway,
    gateway6,
    prefixLen: PREFIX,
    nodes,
    outside,
    serviceCidrs: [SERVICE_CIDR, SERVICE_CIDR6],
    clusterCidrs: [CLUSTER_CIDR, CLUSTER_CIDR6],
  };
}
