// IPv4 text <-> number, the one parser for every address svcmap reads:
// Kubernetes objects (validated by the model's schemas), the map codecs and
// the CLI. Parsed by hand: a full sync converts hundreds of thousands.
//
// Kubernetes accepts what kube-proxy parses with k8s.io/utils/net
// ParseIPSloppy (Go's net.ParseIP before 1.17): an octet may have leading
// zeros, read as DECIMAL ("010.96.0.1" is 10.96.0.1, not octal 8), and the
// API server (legacy validation, the default in v1.34) stores such
// addresses in Services and EndpointSlices. So the same address must mean
// the same thing here: parsed that way, and written back canonical.

/**
 * The address as an unsigned 32-bit number, or -1 when the text is not
 * IPv4 as ParseIPSloppy reads it: four dot-separated decimal octets of any
 * number of digits, each at most 255, and nothing else (no sign, no blank,
 * no hex, no shorter forms).
 */
export function parseIpv4(text: string): number {
  let n = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 46 /* . */) {
      if (digits === 0 || dots === 3) return -1;
      n = n * 256 + octet;
      octet = 0;
      digits = 0;
      dots++;
    } else if (c >= 48 && c <= 57) {
      octet = octet * 10 + (c - 48);
      digits++;
      if (octet > 255) return -1;
    } else {
      return -1;
    }
  }
  if (dots !== 3 || digits === 0) return -1;
  return n * 256 + octet;
}

/** parseIpv4 for text already known to be an address (it throws otherwise). */
export function ipv4ToU32(ip: string): number {
  const n = parseIpv4(ip);
  if (n < 0) throw new Error(`not an IPv4 address: ${JSON.stringify(ip)}`);
  return n;
}

const OCTETS = Array.from({ length: 256 }, (_, i) => String(i));

/** Dotted decimal, as one flat string (see flat-string.ts: the model and the sync state keep these by the hundred thousand). */
export function u32ToIpv4(n: number): string {
  return [OCTETS[(n >>> 24) & 255], OCTETS[(n >>> 16) & 255], OCTETS[(n >>> 8) & 255], OCTETS[n & 255]].join('.');
}

/** No octet of a parsed address starts with a 0 followed by another digit. */
function noLeadingZeros(text: string): boolean {
  for (let i = 0; i < text.length - 1; i++) {
    if (text.charCodeAt(i) === 48 /* 0 */ && (i === 0 || text.charCodeAt(i - 1) === 46) && text.charCodeAt(i + 1) !== 46) return false;
  }
  return true;
}

/**
 * The canonical dotted-decimal form ("010.96.0.01" -> "10.96.0.1"), or
 * undefined when it is not IPv4. Text that is canonical already (nearly
 * always) is returned as it is rather than rebuilt.
 */
export function canonicalIpv4(text: string): string | undefined {
  const n = parseIpv4(text);
  if (n < 0) return undefined;
  return noLeadingZeros(text) ? text : u32ToIpv4(n);
}

/**
 * An IPv4 CIDR as ParseCIDRSloppy reads it ("010.0.0.0/08" -> "10.0.0.0/8";
 * the address is kept as written, host bits and all), or undefined.
 */
export function canonicalCidrv4(text: string): string | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const addr = canonicalIpv4(text.slice(0, slash));
  const len = text.slice(slash + 1);
  if (addr === undefined || !/^[0-9]+$/.test(len) || Number(len) > 32) return undefined;
  return `${addr}/${Number(len)}`;
}

/** The network of a CIDR the schemas accepted ("10.1.2.3/8" -> "10.0.0.0/8"): an LPM trie key holds no host bits. */
export function cidrv4Network(cidr: string): string {
  const slash = cidr.indexOf('/');
  const len = Number(cidr.slice(slash + 1));
  const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
  return `${u32ToIpv4((ipv4ToU32(cidr.slice(0, slash)) & mask) >>> 0)}/${len}`;
}
