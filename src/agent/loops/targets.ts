// The model's frontends turned into what the services map should hold: map
// keys, master flags and backend values. Pure. It lives here, above both the
// model and the sync engine, so that neither has to know the other.
import { flat } from '../../util/flat-string.ts';
import { cidrv4Network } from '../../util/ipv4.ts';
import { cidrv6Network } from '../../util/ipv6.ts';
import {
  BACKEND_F_LOCAL,
  BACKEND_STATE_ACTIVE,
  BACKEND_STATE_TERMINATING,
  type LbAlgorithmName,
  LB_ALGORITHMS,
  SVCMAP_MAGLEV_DEFAULT_M,
  SVC_F_AFFINITY,
  SVC_F_CLUSTERIP,
  SVC_F_ETP_LOCAL,
  SVC_F_EXTERNALIP,
  SVC_F_HOSTPORT,
  SVC_F_ITP_LOCAL,
  SVC_F_LOADBALANCER,
  SVC_F_NODEPORT,
  SVC_F_SH_PORT,
  SVC_F_SRC_RANGES,
  SVC_F_TWO_SCOPES,
  SVC_F_WILDCARD,
  SVC_SCOPE_EXT,
  SVC_SCOPE_INT,
  protoNumber,
} from '../../maps/constants.ts';
import type { DesiredState, Frontend } from '../../model/types.ts';
import { podOwner } from '../../model/host-ports.ts';
import { type FrontendKey, frontendId } from '../../sync/state.ts';
import type { FrontendTarget } from '../../sync/targets.ts';
import { familyOf } from '../../util/family.ts';

const TYPE_FLAGS: Record<Frontend['type'], number> = {
  ClusterIP: SVC_F_CLUSTERIP,
  NodePort: SVC_F_NODEPORT,
  ExternalIP: SVC_F_EXTERNALIP,
  LoadBalancer: SVC_F_LOADBALANCER,
  HostPort: SVC_F_HOSTPORT,
};

/** The node-wide algorithm (--lb-algorithm) when a Service names none. */
export const DEFAULT_LB_ALGORITHM: LbAlgorithmName = 'random';

export function frontendAlgorithm(fe: Frontend, nodeDefault: LbAlgorithmName = DEFAULT_LB_ALGORITHM): LbAlgorithmName {
  return fe.algorithm ?? nodeDefault;
}

export function frontendFlags(fe: Frontend, nodeDefault: LbAlgorithmName = DEFAULT_LB_ALGORITHM): number {
  let flags = TYPE_FLAGS[fe.type];
  if (fe.externalLocal) flags |= SVC_F_ETP_LOCAL;
  if (fe.internalLocal) flags |= SVC_F_ITP_LOCAL;
  if (fe.affinityTimeoutSeconds > 0) flags |= SVC_F_AFFINITY;
  if (fe.wildcard) flags |= SVC_F_WILDCARD;
  if (fe.sourceRanges.length > 0) flags |= SVC_F_SRC_RANGES;
  if (fe.twoScopes && fe.scope === 'external') flags |= SVC_F_TWO_SCOPES;
  if (fe.sourceHashPort && frontendAlgorithm(fe, nodeDefault) === 'sh') flags |= SVC_F_SH_PORT;
  return flags;
}

/** A zone name's id in svcmap_zones (src/sync/zones.ts); without one every backend's zone is 0. */
export type ZoneIdOf = (zone: string | undefined) => number;

export function toTarget(fe: Frontend, nodeDefault: LbAlgorithmName = DEFAULT_LB_ALGORITHM, zoneId?: ZoneIdOf): FrontendTarget {
  const key: FrontendKey = {
    addr: fe.ip,
    port: fe.port,
    proto: protoNumber(fe.protocol),
    scope: fe.scope === 'internal' ? SVC_SCOPE_INT : SVC_SCOPE_EXT,
  };
  return {
    id: frontendId(key),
    key,
    flags: frontendFlags(fe, nodeDefault),
    algorithm: LB_ALGORITHMS[frontendAlgorithm(fe, nodeDefault)],
    affinityTimeout: fe.affinityTimeoutSeconds,
    // Each family's tables are keyed by its own reverse-NAT ids (svcmap_maglev, svcmap_maglev6).
    ...(frontendAlgorithm(fe, nodeDefault) === 'maglev' ? { maglevSize: fe.maglevTableSize ?? SVCMAP_MAGLEV_DEFAULT_M } : {}),
    backends: fe.backends.map((b) => ({
      addr: b.ip,
      port: b.port,
      proto: protoNumber(b.protocol),
      state: b.state === 'terminating' ? BACKEND_STATE_TERMINATING : BACKEND_STATE_ACTIVE,
      flags: b.local ? BACKEND_F_LOCAL : 0,
      zone: zoneId ? zoneId(b.zone) : 0,
    })),
    // The model gives only ranges of the frontend's family (src/model/frontends.ts).
    sourceRanges: fe.sourceRanges.length === 0 ? [] : [...new Set(fe.sourceRanges.map(normalizeCidr))].sort(),
    // A Pod's hostPorts are owned apart from a Service of the same name (host-ports.ts podOwner()).
    owner: fe.service.kind === 'Pod' ? podOwner(fe.service.namespace, fe.service.name) : flat(fe.service.namespace, '/', fe.service.name),
    label:
      fe.service.kind === 'Pod'
        ? `Pod ${fe.service.namespace}/${fe.service.name} hostPort ${fe.port}`
        : `${fe.service.namespace}/${fe.service.name}${fe.service.portName ? `:${fe.service.portName}` : ''}`,
  };
}

/** "10.1.2.3/8" -> "10.0.0.0/8", "fd00::1/64" -> "fd00::/64": the LPM trie matches on the network part only. */
export function normalizeCidr(cidr: string): string {
  return familyOf(cidr) === 6 ? cidrv6Network(cidr) : cidrv4Network(cidr);
}

export function toTargets(state: DesiredState, nodeDefault: LbAlgorithmName = DEFAULT_LB_ALGORITHM): FrontendTarget[] {
  return [...state.frontends.values()].map((fe) => toTarget(fe, nodeDefault)).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
