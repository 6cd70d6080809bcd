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
  type LbMode,
  LB_ALGORITHMS,
  SVCMAP_MAGLEV_DEFAULT_M,
  SVC_F_AFFINITY,
  SVC_F_CLUSTERIP,
  SVC_F_DSR,
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

/** What applies to a frontend whose Service does not say: the node's --lb-algorithm and --lb-mode. */
export interface NodeDefaults {
  algorithm: LbAlgorithmName;
  lbMode: LbMode;
}

export const DEFAULT_LB_ALGORITHM: LbAlgorithmName = 'random';
export const DEFAULT_LB_MODE: LbMode = 'snat';
export const NODE_DEFAULTS: NodeDefaults = { algorithm: DEFAULT_LB_ALGORITHM, lbMode: DEFAULT_LB_MODE };

export function frontendAlgorithm(fe: Frontend, defaults: NodeDefaults = NODE_DEFAULTS): LbAlgorithmName {
  return fe.algorithm ?? defaults.algorithm;
}

/** Frontend types that traffic from outside the node reaches, translated at tc/XDP. */
const FROM_OUTSIDE: ReadonlySet<Frontend['type']> = new Set(['NodePort', 'LoadBalancer', 'ExternalIP']);

/**
 * Whether a frontend's entries carry SVC_F_DSR: dsr on NodePort, LoadBalancer
 * and externalIP frontends of both protocols, hybrid on their TCP ones only
 * (UDP keeps SNAT). ClusterIP and hostPort frontends never: the socket LB
 * translates ClusterIP traffic before a packet exists, and a hostPort's
 * backend is on this node. An ETP=Local frontend gets it too: it has no remote
 * backend, so nothing changes, and its flags say the mode asked for.
 */
export function frontendDsr(fe: Frontend, defaults: NodeDefaults = NODE_DEFAULTS): boolean {
  if (!FROM_OUTSIDE.has(fe.type)) return false;
  const mode = fe.lbMode ?? defaults.lbMode;
  return mode === 'dsr' || (mode === 'hybrid' && fe.protocol === 'TCP');
}

export function frontendFlags(fe: Frontend, defaults: NodeDefaults = NODE_DEFAULTS): number {
  let flags = TYPE_FLAGS[fe.type];
  if (fe.externalLocal) flags |= SVC_F_ETP_LOCAL;
  if (fe.internalLocal) flags |= SVC_F_ITP_LOCAL;
  if (fe.affinityTimeoutSeconds > 0) flags |= SVC_F_AFFINITY;
  if (fe.wildcard) flags |= SVC_F_WILDCARD;
  if (fe.sourceRanges.length > 0) flags |= SVC_F_SRC_RANGES;
  if (fe.twoScopes && fe.scope === 'external') flags |= SVC_F_TWO_SCOPES;
  if (fe.sourceHashPort && frontendAlgorithm(fe, defaults) === 'sh') flags |= SVC_F_SH_PORT;
  if (frontendDsr(fe, defaults)) flags |= SVC_F_DSR;
  return flags;
}

/** A zone name's id in svcmap_zones (src/sync/zones.ts); without one every backend's zone is 0. */
export type ZoneIdOf = (zone: string | undefined) => number;

export function toTarget(fe: Frontend, defaults: NodeDefaults = NODE_DEFAULTS, zoneId?: ZoneIdOf): FrontendTarget {
  const key: FrontendKey = {
    addr: fe.ip,
    port: fe.port,
    proto: protoNumber(fe.protocol),
    scope: fe.scope === 'internal' ? SVC_SCOPE_INT : SVC_SCOPE_EXT,
  };
  return {
    id: frontendId(key),
    key,
    flags: frontendFlags(fe, defaults),
    algorithm: LB_ALGORITHMS[frontendAlgorithm(fe, defaults)],
    affinityTimeout: fe.affinityTimeoutSeconds,
    // Each family's tables are keyed by its own reverse-NAT ids (svcmap_maglev, svcmap_maglev6).
    ...(frontendAlgorithm(fe, defaults) === 'maglev' ? { maglevSize: fe.maglevTableSize ?? SVCMAP_MAGLEV_DEFAULT_M } : {}),
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

export function toTargets(state: DesiredState, defaults: NodeDefaults = NODE_DEFAULTS): FrontendTarget[] {
  return [...state.frontends.values()].map((fe) => toTarget(fe, defaults)).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
