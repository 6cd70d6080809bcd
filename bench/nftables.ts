// kube-proxy's nftables mode, as `nft -f` input: table ip kube-proxy with
// its base chains (nat and filter hooks), the service-ips verdict map on
// daddr . l4proto . dport -> one chain per service port, `numgen random mod
// n` -> one chain per endpoint with the masquerade mark and dnat, and the
// cluster-ips / no-endpoint checks in the filter hooks - the layout
// pkg/proxy/nftables writes, with its chain names. An endpoint change is a
// delta transaction, as kube-proxy sends it: new endpoint chains, the
// service chain flushed and rewritten, stale endpoint chains deleted.
import { nftEpChain, nftSvcChain } from './kubehash.ts';
import type { LineFile } from './textfile.ts';
import { CLUSTER_CIDR, NAMESPACE, PORT, PORT_NAME, SERVICE_CIDR, TARGET_PORT, type BenchService } from './workload.ts';

const T = 'ip kube-proxy';

/** The table and what does not depend on services (kube-proxy's setupNFTables). */
function base(out: Pick<LineFile, 'line'>): void {
  out.line(`add table ${T} { comment "rules for kube-proxy" ; }`);
  const chains: Array<[string, string?]> = [
    ['nat-prerouting', 'type nat hook prerouting priority -100'],
    ['nat-output', 'type nat hook output priority -100'],
    ['nat-postrouting', 'type nat hook postrouting priority 100'],
    ['filter-prerouting', 'type filter hook prerouting priority -110'],
    ['filter-input', 'type filter hook input priority -110'],
    ['filter-forward', 'type filter hook forward priority -110'],
    ['filter-output', 'type filter hook output priority -110'],
    ['filter-output-post-dnat', 'type filter hook output priority -90'],
    ['mark-for-masquerade'],
    ['masquerading'],
    ['services'],
    ['service-endpoints-check'],
    ['nodeport-endpoints-check'],
    ['firewall-check'],
    ['cluster-ips-check'],
  ];
  for (const [c, hook] of chains) out.line(hook ? `add chain ${T} ${c} { ${hook} ; }` : `add chain ${T} ${c}`);
  out.line(`add set ${T} cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }`);
  out.line(`add set ${T} nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }`);
  out.line(
    `add map ${T} no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }`,
  );
  out.line(
    `add map ${T} no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }`,
  );
  out.line(
    `add map ${T} firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }`,
  );
  out.line(
    `add map ${T} service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }`,
  );
  out.line(`add map ${T} service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }`);
  out.line(`add rule ${T} nat-prerouting jump services`);
  out.line(`add rule ${T} nat-output jump services`);
  out.line(`add rule ${T} nat-postrouting jump masquerading`);
  out.line(`add rule ${T} filter-prerouting ct state new jump firewall-check`);
  out.line(`add rule ${T} filter-input ct state new jump nodeport-endpoints-check`);
  out.line(`add rule ${T} filter-input ct state new jump service-endpoints-check`);
  out.line(`add rule ${T} filter-forward ct state new jump service-endpoints-check`);
  out.line(`add rule ${T} filter-forward ct state new jump cluster-ips-check`);
  out.line(`add rule ${T} filter-output ct state new jump service-endpoints-check`);
  out.line(`add rule ${T} filter-output ct state new jump firewall-check`);
  out.line(`add rule ${T} filter-output-post-dnat ct state new jump cluster-ips-check`);
  out.line(`add rule ${T} mark-for-masquerade mark set mark or 0x4000`);
  out.line(`add rule ${T} masquerading mark and 0x4000 == 0 return`);
  out.line(`add rule ${T} masquerading mark set mark xor 0x4000`);
  out.line(`add rule ${T} masquerading masquerade fully-random`);
  out.line(`add rule ${T} service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services`);
  out.line(`add rule ${T} nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports`);
  out.line(`add rule ${T} firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips`);
  out.line(`add rule ${T} cluster-ips-check ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"`);
  out.line(`add rule ${T} cluster-ips-check ip daddr { ${SERVICE_CIDR} } drop comment "Drop traffic to unallocated ClusterIPs"`);
  out.line(`add rule ${T} services ip daddr . meta l4proto . th dport vmap @service-ips`);
  out.line(`add rule ${T} services fib daddr type local ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports`);
}

function svcChain(s: BenchService): string {
  return nftSvcChain(NAMESPACE, s.name, 'tcp', PORT_NAME);
}

function epChain(s: BenchService, ip: string): string {
  return nftEpChain(NAMESPACE, s.name, 'tcp', PORT_NAME, ip, TARGET_PORT);
}

function endpointChain(out: Pick<LineFile, 'line'>, s: BenchService, ip: string): void {
  const c = epChain(s, ip);
  out.line(`add chain ${T} ${c}`);
  out.line(`add rule ${T} ${c} ip saddr ${ip} jump mark-for-masquerade`);
  out.line(`add rule ${T} ${c} meta l4proto tcp dnat to ${ip}:${TARGET_PORT}`);
}

function serviceRules(out: Pick<LineFile, 'line'>, s: BenchService, chain: string): void {
  out.line(`add rule ${T} ${chain} ip daddr ${s.vip} tcp dport ${PORT} ip saddr != ${CLUSTER_CIDR} jump mark-for-masquerade`);
  const arms = s.endpoints.map((ip, i) => `${i} : goto ${epChain(s, ip)}`).join(' , ');
  out.line(`add rule ${T} ${chain} numgen random mod ${s.endpoints.length} vmap { ${arms} }`);
}

/** Everything, from an empty namespace: kube-proxy's first sync. */
export function nftFull(out: Pick<LineFile, 'line'>, services: readonly BenchService[]): void {
  base(out);
  for (const s of services) {
    const chain = svcChain(s);
    for (const ip of s.endpoints) endpointChain(out, s, ip);
    out.line(`add chain ${T} ${chain}`);
    serviceRules(out, s, chain);
    out.line(`add element ${T} cluster-ips { ${s.vip} }`);
    out.line(`add element ${T} service-ips { ${s.vip} . tcp . ${PORT} : goto ${chain} }`);
  }
}

/** One service's endpoints changed from prev to next: kube-proxy's delta transaction. */
export function nftDelta(out: Pick<LineFile, 'line'>, prev: BenchService, next: BenchService): void {
  const had = new Set(prev.endpoints);
  const keep = new Set(next.endpoints);
  for (const ip of next.endpoints) if (!had.has(ip)) endpointChain(out, next, ip);
  const chain = svcChain(next);
  out.line(`flush chain ${T} ${chain}`);
  serviceRules(out, next, chain);
  for (const ip of prev.endpoints) {
    if (keep.has(ip)) continue;
    const c = epChain(prev, ip);
    out.line(`flush chain ${T} ${c}`);
    out.line(`delete chain ${T} ${c}`);
  }
}

/** Chains and rules a full sync writes (counted from nftFull's own lines): for the report. */
export function nftObjectCount(services: readonly BenchService[]): { chains: number; rules: number } {
  const n = { chains: 0, rules: 0 };
  nftFull(
    {
      line: (l) => {
        if (l.startsWith('add chain ')) n.chains++;
        else if (l.startsWith('add rule ')) n.rules++;
      },
    },
    services,
  );
  return n;
}
