// The agent's own node, reduced to what the model needs: its name (to tell
// local endpoints apart) and the addresses NodePort frontends listen on.

import type { NodeInfo } from './types.ts';
import type { Node } from './schemas.ts';
import { METADATA_KEYS } from './metadata-keys.ts';
import { type Family, familyOf } from '../util/family.ts';

export const ZONE_LABEL = METADATA_KEYS.zone.key;
/** The cluster autoscaler's taint on a node it is about to delete. */
export const TO_BE_DELETED_TAINT = 'ToBeDeletedByClusterAutoscaler';

/** kube-proxy's node eligibility: neither being deleted nor tainted for deletion. */
export function nodeEligible(node: Node): boolean {
  return !node.metadata.deletionTimestamp && !node.spec.taints.some((t) => t.key === TO_BE_DELETED_TAINT);
}

/** InternalIP then ExternalIP addresses of one family, in that order, without duplicates. */
function addressesOf(node: Node, family: Family): string[] {
  const addresses: string[] = [];
  for (const type of ['InternalIP', 'ExternalIP']) {
    for (const a of node.status.addresses) {
      if (a.type === type && familyOf(a.address) === family && !addresses.includes(a.address)) addresses.push(a.address);
    }
  }
  return addresses;
}

export function nodeInfoFromNode(node: Node): NodeInfo {
  const v6 = addressesOf(node, 6);
  const zone = node.metadata.labels[ZONE_LABEL];
  return {
    name: node.metadata.name,
    addresses: addressesOf(node, 4),
    ...(v6.length > 0 ? { addresses6: v6 } : {}),
    ...(zone ? { zone } : {}),
  };
}
