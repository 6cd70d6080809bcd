// The agent's own node, reduced to what the model needs: its name (to tell
// local endpoints apart) and the IPv4 addresses NodePort frontends listen on.

import type { NodeInfo } from './types.ts';
import type { Node } from './schemas.ts';
import { ipFamily } from './ip.ts';

export const ZONE_LABEL = 'topology.kubernetes.io/zone';

/** InternalIP then ExternalIP IPv4 addresses, in that order, without duplicates. */
export function nodeInfoFromNode(node: Node): NodeInfo {
  const addresses: string[] = [];
  for (const type of ['InternalIP', 'ExternalIP']) {
    for (const a of node.status.addresses) {
      if (a.type === type && ipFamily(a.address) === 4 && !addresses.includes(a.address)) addresses.push(a.address);
    }
  }
  const zone = node.metadata.labels[ZONE_LABEL];
  return zone ? { name: node.metadata.name, addresses, zone } : { name: node.metadata.name, addresses };
}
