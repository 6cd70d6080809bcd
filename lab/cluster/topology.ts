// The network of a lab cluster, like kind's: a "switch" namespace holding a
// bridge (the docker network), one namespace per node with eth0 on it, and an
// "outside" namespace on the same switch for clients that are not in the
// cluster (NodePort, externalIPs, the conformance tests, kubectl, helm). Each
// node routes the other nodes' pod CIDRs to them. The switch's address is every
// node's default gateway and forwards nothing: no route leads out of the lab.

import type { Lab, LabNs } from '../lab.ts';

export interface NodeNet {
  name: string;
  ns: LabNs;
  /** The node's InternalIP, on its eth0. */
  ip: string;
  /** Pod addresses on this node (the CNI bridge's range). */
  podCidr: string;
}

export interface ClusterNet {
  switch: LabNs;
  gateway: string;
  prefixLen: number;
  nodes: NodeNet[];
  outside: { ns: LabNs; ip: string };
  serviceCidr: string;
  clusterCidr: string;
}

const NET = '172.30.0';
const PREFIX = 24;

export const SERVICE_CIDR = '10.96.0.0/16';
export const CLUSTER_CIDR = '10.244.0.0/16';
/** First address of the Service range: the `kubernetes` Service. */
export const KUBERNETES_SERVICE_IP = '10.96.0.1';
export const CLUSTER_DNS_IP = '10.96.0.10';

async function plug(lab: Lab, sw: LabNs, ns: LabNs, ip: string, gateway: string): Promise<void> {
  const port = `s-${ns.name}`.slice(0, 15);
  await lab.ip(sw, 'link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns.ns);
  await lab.ip(sw, 'link', 'set', port, 'master', 'br0', 'up');
  await lab.ip(ns, 'addr', 'add', `${ip}/${PREFIX}`, 'dev', 'eth0');
  await lab.ip(ns, 'link', 'set', 'eth0', 'up');
  await lab.ip(ns, 'route', 'add', 'default', 'via', gateway);
}

export async function createClusterNet(lab: Lab, nodeNames: readonly string[]): Promise<ClusterNet> {
  const gateway = `${NET}.1`;
  const sw = await lab.netns('switch');
  await lab.ip(sw, 'link', 'add', 'br0', 'type', 'bridge');
  await lab.ip(sw, 'addr', 'add', `${gateway}/${PREFIX}`, 'dev', 'br0');
  await lab.ip(sw, 'link', 'set', 'br0', 'up');

  const nodes: NodeNet[] = [];
  for (const [i, name] of nodeNames.entries()) {
    const ns = await lab.netns(name);
    const node: NodeNet = { name, ns, ip: `${NET}.${10 + i}`, podCidr: `10.244.${i + 1}.0/24` };
    await plug(lab, sw, ns, node.ip, gateway);
    await lab.forward(ns);
    nodes.push(node);
  }
  for (const a of nodes) {
    for (const b of nodes) if (a !== b) await lab.route(a.ns, b.podCidr, b.ip);
  }
  const outsideNs = await lab.netns('outside');
  const outside = { ns: outsideNs, ip: `${NET}.100` };
  await plug(lab, sw, outsideNs, outside.ip, gateway);
  return { switch: sw, gateway, prefixLen: PREFIX, nodes, outside, serviceCidr: SERVICE_CIDR, clusterCidr: CLUSTER_CIDR };
}
