// kube-proxy's iptables mode, as iptables-restore input: the nat-table layout
// pkg/proxy/iptables writes (KUBE-SERVICES -> KUBE-SVC-* with the
// `-m statistic --mode random --probability 1/k` cascade -> KUBE-SEP-* with
// KUBE-MARK-MASQ and DNAT, KUBE-POSTROUTING masquerade), its filter-table
// chains, and the jumps from the built-in chains that it installs once.
// Chain names are kube-proxy's own hashes. Above 1000 endpoints kube-proxy's
// "large cluster mode" drops the per-endpoint comments, and so do we.
import { iptExtChain, iptSepChain, iptSvcChain } from './kubehash.ts';
import type { LineFile } from './textfile.ts';
import { CLUSTER_CIDR, NAMESPACE, PORT, PORT_NAME, TARGET_PORT, type BenchService } from './workload.ts';

const LARGE_CLUSTER_ENDPOINTS = 1000;
const MASQ_MARK = '0x4000';

const FILTER_JUMPS = [
  '-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
  '-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS',
  '-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
  '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
  '-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD',
  '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
  '-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
  '-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
];
const NAT_JUMPS = [
  '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
];

/** The jumps kube-proxy adds to the built-in chains (with iptables -I, once, before its first sync). */
export function iptablesBase(out: LineFile): void {
  out.line('*filter');
  for (const c of ['KUBE-PROXY-FIREWALL', 'KUBE-NODEPORTS', 'KUBE-EXTERNAL-SERVICES', 'KUBE-FORWARD', 'KUBE-SERVICES'])
    out.line(`:${c} - [0:0]`);
  for (const l of FILTER_JUMPS) out.line(l);
  out.line('COMMIT');
  out.line('*nat');
  for (const c of ['KUBE-SERVICES', 'KUBE-POSTROUTING']) out.line(`:${c} - [0:0]`);
  for (const l of NAT_JUMPS) out.line(l);
  out.line('COMMIT');
}

interface SvcNames {
  portName: string;
  svcChain: string;
  extChain: string;
  seps: Array<{ ip: string; chain: string }>;
}

function names(s: BenchService): SvcNames {
  const portName = `${NAMESPACE}/${s.name}:${PORT_NAME}`;
  return {
    portName,
    svcChain: iptSvcChain(portName, 'tcp'),
    extChain: iptExtChain(portName, 'tcp'),
    seps: s.endpoints.map((ip) => ({ ip, chain: iptSepChain(portName, 'tcp', `${ip}:${TARGET_PORT}`) })),
  };
}

/** 1/k as kube-proxy prints it (fmt "%0.10f"). */
export function probability(k: number): string {
  return (1 / k).toFixed(10);
}

function filterTable(out: LineFile, jumps = false): void {
  out.line('*filter');
  for (const c of ['KUBE-NODEPORTS', 'KUBE-SERVICES', 'KUBE-EXTERNAL-SERVICES', 'KUBE-FORWARD', 'KUBE-PROXY-FIREWALL'])
    out.line(`:${c} - [0:0]`);
  if (jumps) for (const l of FILTER_JUMPS) out.line(l);
  out.line('-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP');
  out.line(`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark ${MASQ_MARK}/${MASQ_MARK} -j ACCEPT`);
  out.line(
    '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
  );
  out.line('COMMIT');
}

function natHeader(out: LineFile): void {
  out.line('*nat');
  for (const c of ['KUBE-SERVICES', 'KUBE-NODEPORTS', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ']) out.line(`:${c} - [0:0]`);
}

function natJumps(out: LineFile): void {
  for (const l of NAT_JUMPS) out.line(l);
}

function natFixedRules(out: LineFile): void {
  out.line(`-A KUBE-POSTROUTING -m mark ! --mark ${MASQ_MARK}/${MASQ_MARK} -j RETURN`);
  out.line(`-A KUBE-POSTROUTING -j MARK --xor-mark ${MASQ_MARK}`);
  out.line('-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully');
  out.line(`-A KUBE-MARK-MASQ -j MARK --or-mark ${MASQ_MARK}`);
}

function servicesRule(s: BenchService, n: SvcNames): string {
  return `-A KUBE-SERVICES -m comment --comment "${n.portName} cluster IP" -m tcp -p tcp -d ${s.vip}/32 --dport ${PORT} -j ${n.svcChain}`;
}

function svcChainRules(out: LineFile, s: BenchService, n: SvcNames, large: boolean): void {
  out.line(
    `-A ${n.svcChain} -m comment --comment "${n.portName} cluster IP" -m tcp -p tcp -d ${s.vip}/32 --dport ${PORT} ! -s ${CLUSTER_CIDR} -j KUBE-MARK-MASQ`,
  );
  const k = n.seps.length;
  n.seps.forEach((sep, i) => {
    const comment = large ? '' : ` -m comment --comment "${n.portName} -> ${sep.ip}:${TARGET_PORT}"`;
    const stat = i < k - 1 ? ` -m statistic --mode random --probability ${probability(k - i)}` : '';
    out.line(`-A ${n.svcChain}${comment}${stat} -j ${sep.chain}`);
  });
}

/** A NodePort with externalTrafficPolicy Cluster: KUBE-NODEPORTS -> KUBE-EXT-* (masquerade, then the service chain). */
function nodePortRules(out: LineFile, s: BenchService, n: SvcNames): void {
  if (s.nodePort === undefined) return;
  out.line(`-A KUBE-NODEPORTS -m comment --comment ${n.portName} -m tcp -p tcp --dport ${s.nodePort} -j ${n.extChain}`);
  out.line(`-A ${n.extChain} -m comment --comment "masquerade traffic for ${n.portName} external destinations" -j KUBE-MARK-MASQ`);
  out.line(`-A ${n.extChain} -j ${n.svcChain}`);
}

function sepChainRules(out: LineFile, n: SvcNames, large: boolean): void {
  const comment = large ? '' : ` -m comment --comment ${n.portName}`;
  for (const sep of n.seps) {
    out.line(`-A ${sep.chain}${comment} -s ${sep.ip}/32 -j KUBE-MARK-MASQ`);
    out.line(`-A ${sep.chain}${comment} -m tcp -p tcp -j DNAT --to-destination ${sep.ip}:${TARGET_PORT}`);
  }
}

const NODEPORTS_LAST =
  '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS';

function isLarge(services: readonly BenchService[]): boolean {
  let total = 0;
  for (const s of services) total += s.endpoints.length;
  return total > LARGE_CLUSTER_ENDPOINTS;
}

/**
 * A full sync, as kube-proxy writes it for `iptables-restore --noflush`:
 * every KUBE-* chain declared (which flushes it) and rewritten; `stale`
 * chains (gone since the last sync) declared and deleted with -X. With
 * `jumps`, the built-in chains' jumps are in it too, for a restore that
 * replaces whole tables (no --noflush).
 */
export function iptablesFull(
  out: LineFile,
  services: readonly BenchService[],
  stale: readonly string[] = [],
  opts: { jumps?: boolean } = {},
): void {
  const large = isLarge(services);
  filterTable(out, opts.jumps);
  natHeader(out);
  if (opts.jumps) natJumps(out);
  const all = services.map(names);
  services.forEach((s, i) => {
    const n = all[i]!;
    out.line(`:${n.svcChain} - [0:0]`);
    if (s.nodePort !== undefined) out.line(`:${n.extChain} - [0:0]`);
    for (const sep of n.seps) out.line(`:${sep.chain} - [0:0]`);
  });
  for (const c of stale) out.line(`:${c} - [0:0]`);
  natFixedRules(out);
  services.forEach((s, i) => {
    const n = all[i]!;
    out.line(servicesRule(s, n));
    nodePortRules(out, s, n);
    svcChainRules(out, s, n, large);
    sepChainRules(out, n, large);
  });
  out.line(NODEPORTS_LAST);
  for (const c of stale) out.line(`-X ${c}`);
  out.line('COMMIT');
}

/**
 * A partial sync (kube-proxy >= 1.27, MinimizeIPTablesRestore): KUBE-SERVICES
 * and the other top-level chains in full, but only the chains of the changed
 * services; stale chains deleted.
 */
export function iptablesPartial(
  out: LineFile,
  services: readonly BenchService[],
  changed: ReadonlySet<number>,
  stale: readonly string[],
): void {
  const large = isLarge(services);
  filterTable(out);
  natHeader(out);
  const changedNames = new Map<number, SvcNames>();
  for (const i of changed) {
    const n = names(services[i]!);
    changedNames.set(i, n);
    out.line(`:${n.svcChain} - [0:0]`);
    for (const sep of n.seps) out.line(`:${sep.chain} - [0:0]`);
  }
  for (const c of stale) out.line(`:${c} - [0:0]`);
  natFixedRules(out);
  for (const s of services) {
    const n = changedNames.get(s.index);
    if (n) {
      out.line(servicesRule(s, n));
      svcChainRules(out, s, n, large);
      sepChainRules(out, n, large);
    } else {
      const portName = `${NAMESPACE}/${s.name}:${PORT_NAME}`;
      out.line(servicesRule(s, { portName, svcChain: iptSvcChain(portName, 'tcp'), extChain: iptExtChain(portName, 'tcp'), seps: [] }));
    }
  }
  out.line(NODEPORTS_LAST);
  for (const c of stale) out.line(`-X ${c}`);
  out.line('COMMIT');
}

/** The KUBE-SEP chains of a service's endpoints that `next` no longer has. */
export function staleSepChains(prev: BenchService, next: BenchService): string[] {
  const portName = `${NAMESPACE}/${prev.name}:${PORT_NAME}`;
  const keep = new Set(next.endpoints);
  return prev.endpoints.filter((ip) => !keep.has(ip)).map((ip) => iptSepChain(portName, 'tcp', `${ip}:${TARGET_PORT}`));
}

/** Rules (-A lines) a full sync of these services writes: for the report. */
export function iptablesRuleCount(services: readonly BenchService[]): number {
  let n = 4 + 1 + 3;
  for (const s of services) n += 1 + 1 + s.endpoints.length + 2 * s.endpoints.length;
  return n;
}
