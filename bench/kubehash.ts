// The chain names kube-proxy derives from service and endpoint names:
// base32(sha256(...)) prefixes, exactly as pkg/proxy/iptables and
// pkg/proxy/nftables compute them.
import { createHash } from 'node:crypto';

const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32 (Go's base32.StdEncoding), without padding (callers truncate). */
export function base32(buf: Uint8Array): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const b of buf) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += B32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  if (bits > 0) out += B32[(value << (5 - bits)) & 31];
  return out;
}

export function sha256b32(s: string): string {
  return base32(createHash('sha256').update(s).digest());
}

/** iptables: KUBE-SVC-<16>, from "ns/name:port" + "tcp". */
export function iptSvcChain(svcPortName: string, proto: string): string {
  return `KUBE-SVC-${sha256b32(svcPortName + proto).slice(0, 16)}`;
}

/** iptables: KUBE-EXT-<16>, the external (NodePort, LoadBalancer) chain: KUBE-SVC-'s hash. */
export function iptExtChain(svcPortName: string, proto: string): string {
  return `KUBE-EXT-${sha256b32(svcPortName + proto).slice(0, 16)}`;
}

/** iptables: KUBE-SEP-<16>, from "ns/name:port" + "tcp" + "ip:port". */
export function iptSepChain(svcPortName: string, proto: string, endpoint: string): string {
  return `KUBE-SEP-${sha256b32(svcPortName + proto + endpoint).slice(0, 16)}`;
}

const NFT_CHAIN_MAX = 256;

function hashAndTruncate(name: string): string {
  const s = `${sha256b32(name).slice(0, 8)}-${name}`;
  return s.length > NFT_CHAIN_MAX ? `${s.slice(0, NFT_CHAIN_MAX - 3)}...` : s;
}

/** nftables: service-<8>-ns/name/tcp/port. */
export function nftSvcChain(ns: string, name: string, proto: string, port: string): string {
  return `service-${hashAndTruncate(`${ns}/${name}/${proto}/${port}`)}`;
}

/** nftables: endpoint-<8>-ns/name/tcp/port__ip/port. */
export function nftEpChain(ns: string, name: string, proto: string, port: string, ip: string, targetPort: number): string {
  return `endpoint-${hashAndTruncate(`${ns}/${name}/${proto}/${port}__${ip}/${targetPort}`)}`;
}
