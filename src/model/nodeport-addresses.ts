// Which of the node's addresses serve NodePorts, by kube-proxy's rules for
// --nodeport-addresses (v1.34, pkg/proxy/util/nodeport_addresses.go), and
// whether 127.0.0.1 and [::1] do (its --iptables-localhost-nodeports rule).
//  - Not given: every address of the node (kube-proxy: every local address).
//  - CIDRs: the node's addresses inside them, per family; a family without
//    a CIDR of its own keeps every address (kube-proxy adds 0.0.0.0/0 or
//    ::/0 for it).
//  - "primary": the Node object's primary address of each family (its first
//    InternalIP, else ExternalIP), as /32 and /128 CIDRs; a family without
//    one keeps every address, as above.
// The node's addresses are the Node object's InternalIP and ExternalIP ones
// and those of the node's interfaces (when the agent runs in the node's
// network namespace); loopback is never one of them: 127.0.0.1 and [::1]
// reach NodePorts through the wildcard entry, only for the node's own
// sockets, and only where localhostNodePorts() says so.
import { canonicalCidrv4, cidrv4Network } from '../util/ipv4.ts';
import { canonicalCidrv6, cidrv6Network } from '../util/ipv6.ts';
import { type Family, familyOf } from '../util/family.ts';
import type { NodeInfo } from './types.ts';

export type NodePortAddressSpec = { kind: 'all' } | { kind: 'primary' } | { kind: 'cidrs'; cidrs: readonly string[] };

/** The default: every address of the node. */
export const EVERY_NODE_ADDRESS: NodePortAddressSpec = { kind: 'all' };

export const PRIMARY = 'primary';

/**
 * The flag's value: comma-separated CIDRs of either family, or "primary"
 * alone. Throws an Error naming the value that is wrong.
 */
export function parseNodePortAddresses(text: string): NodePortAddressSpec {
  const items = text.split(',').map((s) => s.trim());
  if (items.some((s) => s === '')) throw new Error(`${JSON.stringify(text)} has an empty item (a comma too many?)`);
  if (items.includes(PRIMARY)) {
    if (items.length > 1) throw new Error(`"${PRIMARY}" stands alone: it cannot be combined with CIDRs (${JSON.stringify(text)})`);
    return { kind: 'primary' };
  }
  const cidrs = items.map((s) => {
    const cidr = canonicalCidrv4(s) ?? canonicalCidrv6(s);
    if (cidr === undefined) throw new Error(`${JSON.stringify(s)} is not a CIDR (e.g. 10.0.0.0/8 or fd00::/64) nor "${PRIMARY}"`);
    return cidr;
  });
  return { kind: 'cidrs', cidrs };
}

/** The network of a CIDR of either family ("10.1.2.3/8" -> "10.0.0.0/8"). */
function network(cidr: string): string {
  return familyOf(cidr) === 4 ? cidrv4Network(cidr) : cidrv6Network(cidr);
}

/** The address is inside the CIDR (of its family). */
export function cidrContains(cidr: string, ip: string): boolean {
  if (familyOf(cidr) !== familyOf(ip)) return false;
  const len = cidr.slice(cidr.indexOf('/'));
  return network(`${ip}${len}`) === network(cidr);
}

const isLoopback = (ip: string) => (familyOf(ip) === 4 ? ip.startsWith('127.') : ip === '::1');

/** The spec's CIDRs of the family, with "primary" as the node's primary address; undefined: every address (none of the family given). */
function familyCidrs(spec: NodePortAddressSpec, family: Family, node: NodeInfo | undefined): string[] | undefined {
  let cidrs: readonly string[];
  if (spec.kind === 'all') return undefined;
  if (spec.kind === 'primary') {
    const primary = (family === 4 ? node?.addresses : node?.addresses6)?.[0];
    cidrs = primary === undefined ? [] : [`${primary}/${family === 4 ? 32 : 128}`];
  } else {
    cidrs = spec.cidrs.filter((c) => familyOf(c) === family);
  }
  return cidrs.length ? [...cidrs] : undefined;
}

/**
 * The addresses of `family` that serve NodePorts: of the Node object's
 * (node.addresses or addresses6) and the node's interfaces' (`local`,
 * either family), those the spec selects; loopback ones never. The Node's
 * come first, in their order.
 */
export function nodePortIPs(spec: NodePortAddressSpec, family: Family, node: NodeInfo | undefined, local: readonly string[]): string[] {
  const own = (family === 4 ? node?.addresses : node?.addresses6) ?? [];
  const candidates = [...new Set([...own, ...local])].filter((ip) => familyOf(ip) === family && !isLoopback(ip));
  const cidrs = familyCidrs(spec, family, node);
  return cidrs === undefined ? candidates : candidates.filter((ip) => cidrs.some((c) => cidrContains(c, ip)));
}

/**
 * The node with the addresses that serve NodePorts in place of the Node
 * object's (what the model builds NodePort frontends from).
 */
export function withNodePortAddresses(
  node: NodeInfo | undefined,
  spec: NodePortAddressSpec,
  local: readonly string[],
): NodeInfo | undefined {
  if (!node) return undefined;
  const { addresses6: _, ...rest } = node;
  const v6 = nodePortIPs(spec, 6, node, local);
  return { ...rest, addresses: nodePortIPs(spec, 4, node, local), ...(v6.length ? { addresses6: v6 } : {}) };
}

/** The family's loopback address a CIDR must contain (kube-proxy tests 127.0.0.0 for IPv4, or a CIDR whose own address is loopback). */
const LOOPBACK: Record<Family, string> = { 4: '127.0.0.0', 6: '::1' };

/**
 * 127.0.0.1:NodePort (family 4) or [::1]:NodePort (6) reaches NodePorts:
 * `enabled` (--localhost-nodeports) and the family's set takes loopback in
 * (no CIDR of the family given, or one that contains it; never with
 * "primary"). kube-proxy serves IPv4 only; svcmap serves [::1] by the same
 * rule over the IPv6 CIDRs.
 */
export function localhostNodePorts(spec: NodePortAddressSpec, family: Family, enabled: boolean): boolean {
  if (!enabled || spec.kind === 'primary') return false;
  if (spec.kind === 'all') return true;
  const cidrs = spec.cidrs.filter((c) => familyOf(c) === family);
  return cidrs.length === 0 || cidrs.some((c) => isLoopback(c.slice(0, c.indexOf('/'))) || cidrContains(c, LOOPBACK[family]));
}
