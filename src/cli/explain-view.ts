// svcmap explain, the logic: what the datapath would do with a new
// connection to one VIP:port/proto, found by the lookups that bpf/lib/lb.h,
// sock_lb.h and tc_lb.h make, in their order. Pure: the command hands it
// readers of the pinned maps, the tests hand it fakes.
//
// Two paths, as in the datapath:
//  - socket (no client given): a connection made on this node, translated
//    at connect()/sendmsg() (sock4_xlate_fwd, sock6_xlate_fwd for an IPv6
//    frontend, read through that family's readers). A loopback address may hit
//    the wildcard NodePort entry; an ETP=Local frontend uses its internal
//    twin; the affinity client is the pod's network namespace, which no
//    address names, so every remembered client of the frontend is listed.
//  - tc (--from CLIENT): a packet from outside the node opening a flow
//    (lb4_tc_new_flow, lb6_tc_new_flow for an IPv6 frontend and client, read
//    through that family's readers): the external entry,
//    loadBalancerSourceRanges, and the affinity entry of that client (an
//    IPv6 client's is keyed by its /64 and folded interface id).
import type { AffinityKey, AffinityValue, BackendConns, BackendValue, SvcKey, SvcValue } from '../maps/codecs.ts';
import { tc6ClientText, tcAffinityKey } from '../maps/affinity-client.ts';
import {
  AFFINITY_ORIGIN_SOCK,
  AFFINITY_ORIGIN_SOCK6,
  AFFINITY_ORIGIN_TC,
  AFFINITY_ORIGIN_TC6,
  type LbAlgorithmName,
  lbAlgorithmName,
  SVC_F_AFFINITY,
  SVC_F_DSR,
  SVC_F_ETP_LOCAL,
  SVC_F_SRC_RANGES,
  SVC_F_TWO_SCOPES,
  SVC_F_WILDCARD,
  SVC_SCOPE_EXT,
  SVC_SCOPE_INT,
  flagNames,
  protoName,
} from '../maps/constants.ts';
import { type BackendView, type ZoneNameOf, backendView, hostPort } from './dump-view.ts';
import { type Column, PLAIN, type TableStyle, renderColumns } from './format.ts';
import { familyOf } from '../util/family.ts';

export interface ExplainReaders {
  service(key: SvcKey): SvcValue | undefined;
  backend(id: number): BackendValue | undefined;
  /** A backend's live connection counts; undefined when no count map is pinned. */
  connections?: ((id: number) => BackendConns | undefined) | undefined;
  /** The session affinity map; undefined when none is pinned. */
  affinity:
    | {
        get(key: AffinityKey): AffinityValue | undefined;
        entries(): ReadonlyArray<readonly [AffinityKey, AffinityValue]>;
      }
    | undefined;
  /** loadBalancerSourceRanges: does the frontend (by rev-NAT id) accept the client? undefined: no source range map pinned. */
  sourceAllowed: ((revNatId: number, client: string) => boolean) | undefined;
  /** Now, in ns on CLOCK_BOOTTIME: the clock of affinity_value.last_used. */
  nowNs: bigint;
  /** Zone names (svcmap_zones); undefined when no zone map is pinned. */
  zoneOf?: ZoneNameOf | undefined;
}

export interface ExplainQuery {
  addr: string;
  port: number;
  proto: number;
  /** A client outside the node (the tc path); absent: a connection made on this node (the socket path). */
  from?: string;
  /** The address was asked for as IPv4-mapped (::ffff:addr): the socket hooks translate it through the IPv4 frontend addr. */
  mapped?: boolean;
}

export interface AffinityEntryView {
  /** "netns 4097" (socket: the pod's network namespace cookie), the client address (tc), or "fd00:1::/64 fold 00020002" (tc, IPv6: its /64 and folded interface id). */
  client: string;
  origin: 'socket' | 'tc';
  backendId: number;
  /** address:port, or "backend N (gone)". */
  backend: string;
  slot: number;
  lastUsedSecondsAgo: number;
  /** Whether the datapath would use it now (lb4_affinity_current). */
  current: boolean;
  /** Why it would not. */
  stale?: string;
}

export interface FrontendExplanation {
  /** The entry that was found, as dump names it. */
  frontend: string;
  /** How it was found, when not by the address itself. */
  matched?: string;
  flags: string[];
  /** Which entry picks the backend, and why when it is not the obvious one. */
  scope: 'external' | 'internal';
  scopeReason?: string;
  revNatId: number;
  algorithm: string;
  /** sessionAffinity ClientIP's timeout; null without affinity. */
  affinityTimeoutSeconds: number | null;
  /** The slots 1..count, in order: what a new connection chooses among. */
  backends: BackendView[];
  /** What a reader would trip over: missing slots or backends. */
  problems: string[];
}

export interface Verdict {
  kind: 'untouched' | 'refused' | 'dropped' | 'affinity' | 'random';
  text: string;
  /** kind affinity: the backend the client keeps. */
  backend?: BackendView;
  /** kind random: how many slots the choice is among. */
  among?: number;
}

export interface Explanation {
  /** VIP:PORT/PROTO as asked. */
  query: string;
  path: 'socket' | 'tc';
  /** --from, or null. */
  client: string | null;
  /** tc path: each external device and what meets the packet there first (svcmap status's list; absent: not read). */
  devices?: Array<{ device: string; runs: string }>;
  /** tc path with a frontend: how a backend on another node is reached (the master entry's SVC_F_DSR), in words. */
  mode?: { mode: 'snat' | 'dsr'; text: string };
  frontend: FrontendExplanation | null;
  /** tc with affinity: the client's own entry (null: it has none). */
  clientAffinity?: AffinityEntryView | null;
  /** Every affinity entry of the frontend, most recently used first. */
  remembered: AffinityEntryView[];
  verdict: Verdict;
}

export const UNTOUCHED = 'not a service frontend: traffic passes untouched';
export const NO_ENDPOINTS = 'refused: no endpoints (ECONNREFUSED at connect / dropped at tc)';

const NSEC_PER_SEC = 1_000_000_000n;

/** Per family: a loopback address, and the wildcard NodePort entry it finds (sock4_xlate_addr, sock6_xlate_fwd). */
const isLoopback = (addr: string) => addr.startsWith('127.') || addr === '::1';
const wildcardOf = (addr: string) => (familyOf(addr) === 6 ? '::' : '0.0.0.0');
/** The affinity origins of the socket hooks and of tc for a frontend of the address's family (ids are per family). */
const originsOf = (addr: string): readonly number[] =>
  familyOf(addr) === 6 ? [AFFINITY_ORIGIN_SOCK6, AFFINITY_ORIGIN_TC6] : [AFFINITY_ORIGIN_SOCK, AFFINITY_ORIGIN_TC];
const isSocketOrigin = (origin: number) => origin === AFFINITY_ORIGIN_SOCK || origin === AFFINITY_ORIGIN_SOCK6;

const ALGORITHM_TEXT: Record<LbAlgorithmName, string> = {
  random: 'random (uniform)',
  rr: 'rr (round robin)',
  sh: 'sh (source hash)',
  lc: 'lc (least connections)',
  sed: 'sed (shortest expected delay)',
  nq: 'nq (never queue)',
  dh: 'dh (destination hash)',
  maglev: 'maglev (consistent hashing)',
};

export function algorithmName(alg: number): string {
  const name = lbAlgorithmName(alg);
  return name ? ALGORITHM_TEXT[name] : `algorithm ${alg} (unknown to this svcmap)`;
}

/**
 * One affinity entry as the datapath judges it (lb4_affinity_current): too
 * old, a slot past the count, a slot that now holds another backend, or a
 * backend that is gone, and it is not used. `key` names the frontend entry
 * whose slots are checked.
 */
function entryView(k: AffinityKey, v: AffinityValue, key: SvcKey, svc: SvcValue, r: ExplainReaders): AffinityEntryView {
  const age = r.nowNs > v.last_used ? r.nowNs - v.last_used : 0n;
  let stale: string | undefined;
  if (age > BigInt(svc.affinity_timeout) * NSEC_PER_SEC) {
    stale = `expired: unused for more than the ${svc.affinity_timeout}s timeout`;
  } else if (v.slot === 0 || v.slot > svc.count) {
    stale = `its slot ${v.slot} is past the frontend's ${svc.count} slots`;
  } else if (r.service({ ...key, slot: v.slot })?.backend_id !== v.backend_id) {
    stale = `slot ${v.slot} no longer holds backend ${v.backend_id}`;
  } else if (!r.backend(v.backend_id)) {
    stale = `backend ${v.backend_id} is gone`;
  }
  const b = r.backend(v.backend_id);
  return {
    client: isSocketOrigin(k.origin) ? `netns ${k.netns_cookie}` : k.origin === AFFINITY_ORIGIN_TC6 ? tc6ClientText(k) : k.client_addr,
    origin: isSocketOrigin(k.origin) ? 'socket' : 'tc',
    backendId: v.backend_id,
    backend: b ? hostPort(b.addr, b.port) : `backend ${v.backend_id} (gone)`,
    slot: v.slot,
    // Tenths of a second: /proc/uptime, the command's clock, has 10 ms steps.
    lastUsedSecondsAgo: Math.round(Number(age / 100_000_000n)) / 10,
    current: stale === undefined,
    ...(stale ? { stale } : {}),
  };
}

/**
 * What a flow from outside gets on its way to a backend on another node
 * with SVC_F_DSR the client's address is kept and the
 * backend's node answers the client directly; else SNAT to this node. A
 * backend on this node is only DNATed either way.
 */
export function modeOf(flags: number): NonNullable<Explanation['mode']> {
  const local = (flags & SVC_F_ETP_LOCAL) !== 0 ? "; externalTrafficPolicy Local: only this node's backends, DNAT only" : '';
  return (flags & SVC_F_DSR) !== 0
    ? {
        mode: 'dsr',
        text: `dsr (a backend on another node sees the client's address; its node answers the client directly, from the frontend's address)${local}`,
      }
    : { mode: 'snat', text: `snat (a backend on another node sees this node's address; its replies return through this node)${local}` };
}

/** VIP:PORT/PROTO as asked ([::ffff:a.b.c.d]:PORT for an IPv4-mapped one). */
export function queryText(q: ExplainQuery): string {
  return `${hostPort(q.mapped ? `::ffff:${q.addr}` : q.addr, q.port)}/${protoName(q.proto)}`;
}

export function explain(q: ExplainQuery, r: ExplainReaders): Explanation {
  const path = q.from === undefined ? 'socket' : 'tc';
  const proto = protoName(q.proto);
  const base = { query: queryText(q), path, client: q.from ?? null, remembered: [] } as const;
  const key: SvcKey = { addr: q.addr, port: q.port, proto: q.proto, scope: SVC_SCOPE_EXT, slot: 0 };

  let master = r.service(key);
  let matched: string | undefined = q.mapped
    ? 'an IPv4-mapped address: the socket hooks translate it through the IPv4 frontend'
    : undefined;
  if (!master && path === 'socket' && isLoopback(q.addr)) {
    // sock4_xlate_addr / sock6_xlate_fwd: 127.0.0.1:NodePort, [::1]:NodePort are the wildcard NodePort entry.
    const wildcard = r.service({ ...key, addr: wildcardOf(q.addr) });
    if (wildcard && (wildcard.flags & SVC_F_WILDCARD) !== 0) {
      master = wildcard;
      key.addr = wildcardOf(q.addr);
      matched = `${matched ? `${matched}; ` : ''}the wildcard NodePort entry, which the socket hooks use for a loopback address`;
    }
  }
  if (!master) return { ...base, remembered: [], frontend: null, verdict: { kind: 'untouched', text: UNTOUCHED } };

  const frontendName = `${hostPort(key.addr, key.port)}/${proto}`;
  let svc = master;
  let scopeReason: string | undefined;
  if ((master.flags & SVC_F_TWO_SCOPES) !== 0) {
    if (path === 'tc') {
      scopeReason = "traffic from outside uses the external entry: only this node's endpoints (externalTrafficPolicy Local)";
    } else {
      // lb4_internal_scope()
      const twin = r.service({ ...key, scope: SVC_SCOPE_INT });
      if (twin) {
        svc = twin;
        key.scope = SVC_SCOPE_INT;
        scopeReason = 'traffic from this node uses the internal twin, which holds every endpoint (externalTrafficPolicy Local)';
      } else {
        scopeReason = 'the internal twin is missing: the external entry is used';
      }
    }
  }

  const backends: BackendView[] = [];
  const problems: string[] = [];
  for (let s = 1; s <= svc.count; s++) {
    const slot = r.service({ ...key, slot: s });
    const b = slot && r.backend(slot.backend_id);
    if (!slot) problems.push(`slot ${s} missing`);
    else if (!b) problems.push(`slot ${s} refers to missing backend ${slot.backend_id}`);
    else backends.push(backendView(s, slot.backend_id, b, r.connections, r.zoneOf));
  }
  const affinity = (svc.flags & SVC_F_AFFINITY) !== 0;
  const frontend: FrontendExplanation = {
    frontend: frontendName,
    ...(matched ? { matched } : {}),
    flags: flagNames(master.flags),
    scope: key.scope === SVC_SCOPE_INT ? 'internal' : 'external',
    ...(scopeReason ? { scopeReason } : {}),
    revNatId: svc.rev_nat_id,
    algorithm: algorithmName(svc.algorithm),
    affinityTimeoutSeconds: affinity ? svc.affinity_timeout : null,
    backends,
    problems,
  };
  // Entries are keyed by the rev-NAT id of the entry that chose (the twin's,
  // on the socket path of an ETP=Local frontend).
  const remembered =
    affinity && r.affinity
      ? r.affinity
          .entries()
          .filter(([k]) => k.rev_nat_id === svc.rev_nat_id && originsOf(key.addr).includes(k.origin))
          .map(([k, v]) => entryView(k, v, key, svc, r))
          .sort((a, b) => a.lastUsedSecondsAgo - b.lastUsedSecondsAgo || a.client.localeCompare(b.client))
      : [];
  const out = { ...base, frontend, remembered, ...(path === 'tc' ? { mode: modeOf(master.flags) } : {}) };

  if (path === 'tc' && (svc.flags & SVC_F_SRC_RANGES) !== 0 && r.sourceAllowed && !r.sourceAllowed(svc.rev_nat_id, q.from!)) {
    return { ...out, verdict: { kind: 'dropped', text: `dropped at tc: ${q.from} is not in the frontend's loadBalancerSourceRanges` } };
  }
  if (svc.count === 0) return { ...out, verdict: { kind: 'refused', text: NO_ENDPOINTS } };

  // kind 'random': the frontend's algorithm chooses (the text names it).
  const how =
    {
      rr: 'round robin',
      sh: 'source hash',
      dh: 'destination hash',
      lc: 'least connections',
      sed: 'shortest expected delay',
      nq: 'never queue',
    }[lbAlgorithmName(svc.algorithm) as 'rr' | 'sh' | 'dh' | 'lc' | 'sed' | 'nq'] ?? 'random';
  const random = (why: string): Verdict => ({ kind: 'random', among: svc.count, text: `${how} among ${svc.count}${why}` });
  if (!affinity) return { ...out, verdict: random('') };
  const remember = `; the choice is remembered for ${svc.affinity_timeout}s`;
  if (path === 'socket') {
    // The client is the connecting socket's network namespace (a pod; the
    // node's own processes share one): no address names it, so no one entry.
    const current = remembered.filter((e) => e.origin === 'socket' && e.current).length;
    return {
      ...out,
      verdict: random(
        `, unless the connecting pod has a current affinity entry (${current} ha${current === 1 ? 's' : 've'} one, see Remembered)${remember}`,
      ),
    };
  }
  const akey = tcAffinityKey(q.from!, svc.rev_nat_id);
  const v = r.affinity?.get(akey);
  const mine = v ? entryView(akey, v, key, svc, r) : null;
  const kept = mine?.current ? backends.find((b) => b.slot === mine.slot && b.id === mine.backendId) : undefined;
  if (mine && kept) {
    const backend = kept;
    return {
      ...out,
      clientAffinity: mine,
      verdict: {
        kind: 'affinity',
        backend,
        text: `${backend.address} (slot ${mine.slot}): the affinity entry of ${q.from}, last used ${mine.lastUsedSecondsAgo}s ago`,
      },
    };
  }
  // (A current entry whose slot the walk above did not see: the maps changed in between; it chooses again too.)
  const why = mine
    ? `: the affinity entry of ${q.from} is stale (${mine.stale ?? 'changed while read'})`
    : `: ${q.from} has no affinity entry`;
  return { ...out, clientAffinity: mine, verdict: random(`${why}${remember}`) };
}

const backendColumns = (conns: boolean): Column[] => [
  { header: 'SLOT' },
  { header: 'ID' },
  { header: 'BACKEND' },
  { header: 'STATE' },
  { header: 'LOCAL' },
  ...(conns ? [{ header: 'CONNS' }] : []),
  { header: 'ZONE', wide: true },
];
const REMEMBERED_COLUMNS: readonly Column[] = [
  { header: 'CLIENT' },
  { header: 'BACKEND' },
  { header: 'BACKEND ID', wide: true },
  { header: 'SLOT' },
  { header: 'LAST USED' },
  { header: 'CURRENT' },
];

/** Where a packet from outside is translated, by the device it comes in on. */
export function hookText(devices: NonNullable<Explanation['devices']>): string {
  if (!devices.length) return 'none: no external device has svcmap_tc_in (the agent has not attached, or found no device)';
  return devices
    .map(({ device, runs }) =>
      runs === 'tc only'
        ? `${device}: tc ingress`
        : `${device}: ${runs.split('; ')[0]!.replace('xdp ', 'XDP in ')} mode (what XDP passes on: tc ingress${runs.includes('; ') ? `; ${runs.split('; ')[1]}` : ''})`,
    )
    .join('; ');
}

/**
 * `kubectl describe`-like text: one fact per line, then the verdict. The
 * backends and the remembered clients are tables: -o wide adds the
 * backends' zones and the backend id each client keeps; --no-headers drops
 * their header lines.
 */
export function renderExplanation(e: Explanation, style: TableStyle = PLAIN): string {
  const lines: string[] = [];
  const row = (name: string, value: string) => lines.push(`${`${name}:`.padEnd(12)}${value}`);
  const table = (columns: readonly Column[], rows: string[][]) => lines.push(...renderColumns(columns, rows, style, '  '));
  row('Frontend', e.frontend ? `${e.frontend.frontend}${e.frontend.matched ? ` (${e.query}: ${e.frontend.matched})` : ''}` : e.query);
  row('Path', e.path === 'socket' ? 'socket hooks (a connection made on this node)' : `tc (a packet from ${e.client}, outside the node)`);
  if (e.devices) row('Hook', hookText(e.devices));
  if (e.mode) row('Mode', e.mode.text);
  const f = e.frontend;
  if (f) {
    row('Flags', f.flags.join(', ') || '-');
    row('Scope', `${f.scope}${f.scopeReason ? ` (${f.scopeReason})` : ''}`);
    row('Algorithm', f.algorithm);
    row('Affinity', f.affinityTimeoutSeconds === null ? 'none' : `ClientIP, timeout ${f.affinityTimeoutSeconds}s`);
    row('Backends', String(f.backends.length));
    if (f.backends.length) {
      const conns = f.backends.some((b) => b.connections !== undefined);
      table(
        backendColumns(conns),
        f.backends.map((b) => [
          String(b.slot),
          String(b.id),
          b.address,
          b.state,
          b.local ? 'yes' : 'no',
          ...(conns ? [String(b.connections ?? 0)] : []),
          b.zone ?? '-',
        ]),
      );
    }
    if (f.problems.length) row('Problems', f.problems.join('; '));
    if (f.affinityTimeoutSeconds !== null) {
      row('Remembered', `${e.remembered.length} client${e.remembered.length === 1 ? '' : 's'}`);
      const shown = e.remembered.slice(0, 20);
      if (shown.length) {
        table(
          REMEMBERED_COLUMNS,
          shown.map((a) => [
            `${a.origin} ${a.client}`,
            a.backend,
            String(a.backendId),
            String(a.slot),
            `${a.lastUsedSecondsAgo}s ago`,
            a.current ? 'yes' : `no: ${a.stale}`,
          ]),
        );
      }
      if (e.remembered.length > shown.length) lines.push(`  ... and ${e.remembered.length - shown.length} more (-o json lists them all)`);
    }
  }
  row('Verdict', e.verdict.text);
  return `${lines.join('\n')}\n`;
}
