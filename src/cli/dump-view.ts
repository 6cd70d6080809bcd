// The maps decoded into what a person wants to read: each frontend with its
// flags and its backends in slot order. Pure.
import type { BackendConns, BackendValue, RevNatValue, SvcKey, SvcValue, ZoneName } from '../maps/codecs.ts';
import { BACKEND_F_LOCAL, BACKEND_STATE_TERMINATING, SVC_SCOPE_INT, flagNames, lbAlgorithmName, protoName } from '../maps/constants.ts';
import { ipv4ToU32 } from '../util/ipv4.ts';
import { ipv6SortKey } from '../util/ipv6.ts';
import { familyOf } from '../util/family.ts';
import { type Column, PLAIN, type TableStyle, printed, renderColumns } from './format.ts';

/** "10.0.0.1:80", "[fd00::1]:80". */
export function hostPort(addr: string, port: number): string {
  return familyOf(addr) === 6 ? `[${addr}]:${port}` : `${addr}:${port}`;
}

export interface BackendView {
  slot: number;
  id: number;
  address: string;
  state: string;
  local: boolean;
  /** Live connections the datapath counts for it (socket LB + tc, what lc/sed/nq read); absent when no count map is pinned. */
  connections?: number;
  /** The zone its EndpointSlice gave it (svcmap_zones), `zone#<id>` for an id without a name; absent when none was given. */
  zone?: string;
}

/** What a backend's zone id is called, or undefined for 0 (none given); absent when no zone map is pinned. */
export type ZoneNameOf = (id: number) => string | undefined;

/** Zone ids to names from svcmap_zones' entries. */
export function zoneNames(entries: ReadonlyArray<readonly [number, ZoneName]>): ZoneNameOf {
  const names = new Map(entries.map(([id, v]) => [id, v.name]));
  return (id) => (id === 0 ? undefined : (names.get(id) ?? `zone#${id}`));
}

/** A backend's live connections as lc/sed/nq see them (conns_active(): a negative field counts as 0). */
export function activeConnections(c: BackendConns | undefined): number {
  if (!c) return 0;
  const pos = (v: bigint) => (v > 0n ? Number(v) : 0);
  return pos(c.sock) + pos(c.tc);
}

export interface FrontendView {
  frontend: string;
  address: string;
  port: number;
  protocol: string;
  scope: 'external' | 'internal';
  flags: string[];
  /** The load-balancing algorithm by name (random, rr, sh, ...), or `alg<id>` for one this svcmap does not know. */
  algorithm: string;
  revNatId: number;
  backends: BackendView[];
  /** Problems a reader would hit: missing slots or backends. */
  problems: string[];
}

/** One backend slot as both dump and explain show it. */
export function backendView(
  slot: number,
  id: number,
  b: BackendValue,
  conns?: (id: number) => BackendConns | undefined,
  zoneOf?: ZoneNameOf,
): BackendView {
  const zone = zoneOf?.(b.zone);
  return {
    slot,
    id,
    address: hostPort(b.addr, b.port),
    state: b.state === BACKEND_STATE_TERMINATING ? 'terminating' : 'active',
    local: (b.flags & BACKEND_F_LOCAL) !== 0,
    ...(conns ? { connections: activeConnections(conns(id)) } : {}),
    ...(zone !== undefined ? { zone } : {}),
  };
}

export function buildDumpView(
  services: ReadonlyArray<readonly [SvcKey, SvcValue]>,
  backends: ReadonlyArray<readonly [number, BackendValue]>,
  revNat: ReadonlyArray<readonly [number, RevNatValue]>,
  conns?: ReadonlyArray<readonly [number, BackendConns]>,
  zoneOf?: ZoneNameOf,
): FrontendView[] {
  const be = new Map(backends);
  const live = conns ? new Map(conns) : undefined;
  const connsOf = live ? (bid: number) => live.get(bid) : undefined;
  const rn = new Map(revNat);
  const slots = new Map<string, Map<number, number>>();
  const id = (k: SvcKey) => `${k.addr}:${k.port}/${k.proto}/${k.scope}`;
  for (const [k, v] of services) {
    if (k.slot === 0) continue;
    let m = slots.get(id(k));
    if (!m) slots.set(id(k), (m = new Map()));
    m.set(k.slot, v.backend_id);
  }
  const out: FrontendView[] = [];
  for (const [k, v] of services) {
    if (k.slot !== 0) continue;
    const problems: string[] = [];
    const list: BackendView[] = [];
    const mine = slots.get(id(k)) ?? new Map<number, number>();
    for (let s = 1; s <= v.count; s++) {
      const bid = mine.get(s);
      if (bid === undefined) {
        problems.push(`slot ${s} missing`);
        continue;
      }
      const b = be.get(bid);
      if (!b) {
        problems.push(`slot ${s} refers to missing backend ${bid}`);
        continue;
      }
      list.push(backendView(s, bid, b, connsOf, zoneOf));
    }
    if (!rn.has(v.rev_nat_id)) problems.push(`reverse NAT ${v.rev_nat_id} missing`);
    const proto = protoName(k.proto);
    const scope = k.scope === SVC_SCOPE_INT ? 'internal' : 'external';
    out.push({
      frontend: `${hostPort(k.addr, k.port)}/${proto}${scope === 'internal' ? ' (internal)' : ''}`,
      address: k.addr,
      port: k.port,
      protocol: proto,
      scope,
      flags: flagNames(v.flags),
      algorithm: lbAlgorithmName(v.algorithm) ?? `alg${v.algorithm}`,
      revNatId: v.rev_nat_id,
      backends: list,
      problems,
    });
  }
  return out.sort(
    (a, b) => cmpAddr(a.address, b.address) || a.port - b.port || a.protocol.localeCompare(b.protocol) || a.scope.localeCompare(b.scope),
  );
}

/** IPv4 before IPv6, each in numeric order. */
function cmpAddr(a: string, b: string): number {
  const [a6, b6] = [familyOf(a) === 6, familyOf(b) === 6];
  if (a6 !== b6) return a6 ? 1 : -1;
  if (!a6) return ipv4ToU32(a) - ipv4ToU32(b);
  const [x, y] = [ipv6SortKey(a), ipv6SortKey(b)];
  return x < y ? -1 : x > y ? 1 : 0;
}

const DUMP_COLUMNS: readonly Column[] = [
  { header: 'FRONTEND' },
  { header: 'FLAGS' },
  { header: 'ALG' },
  { header: 'N' },
  { header: 'REV-NAT', wide: true },
  { header: 'BACKEND-IDS', wide: true },
  { header: 'BACKENDS', free: true },
];

/**
 * A table: one row per frontend, backends listed in the last column (its
 * problems after them). -o wide adds the rev-NAT id and the backend ids in
 * slot order.
 */
export function renderTable(views: readonly FrontendView[], style: TableStyle = PLAIN): string {
  const rows = views.map((v) =>
    [
      v.frontend,
      v.flags.join(',') || '-',
      v.algorithm,
      String(v.backends.length),
      String(v.revNatId),
      v.backends.map((b) => b.id).join(',') || '-',
      v.backends.length
        ? v.backends
            .map(
              (b) =>
                `${b.address}${b.state === 'active' ? '' : ` (${b.state})`}${b.local ? ' [local]' : ''}${b.zone === undefined ? '' : ` zone=${b.zone}`}${b.connections === undefined ? '' : ` conns=${b.connections}`}`,
            )
            .join(', ')
        : '(none: connections are refused)',
    ].concat(v.problems.length ? [`!! ${v.problems.join('; ')}`] : []),
  );
  return printed(renderColumns(DUMP_COLUMNS, rows, style));
}
