// The services a benchmark programs: N ClusterIP services (TCP port 80 ->
// 8080), each with E endpoints. Every address is a lab address: VIPs in
// 10.96.0.0/12 (no route, no owner: only a translation makes them work),
// filler endpoints in 10.128.0.0/10 (nothing answers them; they only make
// the tables big), and the measured service - the last one programmed -
// points at the real pods of the bench's node. The cluster CIDR (for
// kube-proxy's masquerade rules) is 10.128.0.0/9, which holds them all.
// makeServices6: the same for IPv6-only Services (fd00::/8, lab only).
import { formatIpv6 } from '../src/util/ipv6.ts';

export const NAMESPACE = 'bench';
export const SERVICE_CIDR = '10.96.0.0/12';
export const CLUSTER_CIDR = '10.128.0.0/9';
export const PORT = 80;
export const TARGET_PORT = 8080;
export const PORT_NAME = 'http';

const FILLER_BASE = ipNum('10.128.0.0'); // .. 10.191.255.255: 4M addresses
const CHANGE_BASE = ipNum('10.192.0.0'); // addresses that endpoint changes bring in

export interface BenchService {
  index: number;
  name: string;
  vip: string;
  endpoints: string[];
  /** A NodePort too (externalTrafficPolicy Cluster): only the SNAT bench's service has one. */
  nodePort?: number;
  /** metadata.annotations (e.g. svcmap.io/lb-algorithm); none when absent. */
  annotations?: Record<string, string>;
}

export function ipNum(ip: string): number {
  const p = ip.split('.').map(Number);
  return ((p[0]! << 24) >>> 0) + (p[1]! << 16) + (p[2]! << 8) + p[3]!;
}

export function ipStr(n: number): string {
  return [(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

export function vipOf(i: number): string {
  return ipStr(ipNum('10.96.0.0') + 1 + i);
}

export function serviceName(i: number): string {
  return `svc-${i}`;
}

/**
 * N services with `perService` endpoints; the last one's endpoints are
 * `measured` (the real pods) when given.
 */
export function makeServices(n: number, perService: number, measured?: readonly string[]): BenchService[] {
  if (n * perService > 4_000_000) throw new Error('too many endpoints for the filler range');
  const out: BenchService[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const endpoints =
      i === n - 1 && measured ? [...measured] : Array.from({ length: perService }, (_, k) => ipStr(FILLER_BASE + i * perService + k));
    out[i] = { index: i, name: serviceName(i), vip: vipOf(i), endpoints };
  }
  return out;
}

/** A fresh address for the c-th endpoint change (never used by makeServices). */
export function changedEndpoint(c: number): string {
  return ipStr(CHANGE_BASE + (c % 4_000_000));
}

/** The service with its first endpoint replaced by a fresh address: one endpoint change. */
export function withChangedEndpoint(s: BenchService, c: number): BenchService {
  return { ...s, endpoints: [changedEndpoint(c), ...s.endpoints.slice(1)] };
}

/**
 * The IPv6 twin of makeServices (IPv6-only Services): VIPs in
 * fd00:10:96::/112's neighbourhood (fd00:10:96::<i+1>), filler endpoints in
 * fd00:10:128::/64, the last service on `measured` (the pods' IPv6
 * addresses). Every address in canonical text, as the API server writes it.
 */
export function makeServices6(n: number, perService: number, measured?: readonly string[]): BenchService[] {
  const v6 = (prefix: readonly number[], x: number) => formatIpv6([...prefix, Math.floor(x / 0x10000) & 0xffff, x & 0xffff]);
  const out: BenchService[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const endpoints =
      i === n - 1 && measured
        ? [...measured]
        : Array.from({ length: perService }, (_, k) => v6([0xfd00, 0x10, 0x128, 0, 0, 0], i * perService + k));
    out[i] = { index: i, name: serviceName(i), vip: v6([0xfd00, 0x10, 0x96, 0, 0, 0], i + 1), endpoints };
  }
  return out;
}
