// IPv6 text <-> 16 bytes, the one IPv6 parser (as ipv4.ts is for IPv4):
// Kubernetes objects (validated by the model's schemas), the map codecs and
// the CLI. Every IPv6 address is kept in the canonical text form of RFC 5952
// (lowercase, no leading zeros, the longest run of two or more zero groups
// written "::", the first one on a tie), which is what the API server writes
// for the addresses it allocates, so "FD00:0::1" and "fd00::1" are one
// address everywhere after validation.

/**
 * The eight 16-bit groups, or undefined when the text is not an IPv6 address:
 * hex groups of 1..4 digits, at most one "::", an optional trailing dotted
 * IPv4 part (counting as two groups); no zone ("%eth0"), no brackets, no blanks.
 */
export function parseIpv6(text: string): number[] | undefined {
  if (text.length < 2 || text.length > 45) return undefined;
  const double = text.indexOf('::');
  if (double >= 0 && text.indexOf('::', double + 1) >= 0) return undefined;
  const head = double >= 0 ? text.slice(0, double) : text;
  const tail = double >= 0 ? text.slice(double + 2) : '';
  const left = groupsOf(head, double < 0);
  const right = double >= 0 ? groupsOf(tail, true) : [];
  if (left === undefined || right === undefined) return undefined;
  const missing = 8 - left.length - right.length;
  if (double >= 0 ? missing < 1 : missing !== 0) return undefined;
  return [...left, ...new Array<number>(missing).fill(0), ...right];
}

/** Groups of one side of "::" ('' is none); `last` allows a trailing dotted IPv4 part. */
function groupsOf(part: string, last: boolean): number[] | undefined {
  if (part === '') return [];
  const out: number[] = [];
  const fields = part.split(':');
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]!;
    if (last && i === fields.length - 1 && f.includes('.')) {
      const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(f);
      if (!v4) return undefined;
      const o = v4.slice(1).map(Number);
      if (o.some((x) => x > 255)) return undefined;
      out.push(o[0]! * 256 + o[1]!, o[2]! * 256 + o[3]!);
    } else {
      if (!/^[0-9a-fA-F]{1,4}$/.test(f)) return undefined;
      out.push(parseInt(f, 16));
    }
  }
  return out;
}

/** RFC 5952 text of eight groups. */
export function formatIpv6(groups: readonly number[]): string {
  let bestAt = -1;
  let bestLen = 1; // a single zero group is written as 0, not ::
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestAt = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (from: number, to: number) =>
    groups
      .slice(from, to)
      .map((g) => g.toString(16))
      .join(':');
  if (bestAt < 0) return hex(0, 8);
  return `${hex(0, bestAt)}::${hex(bestAt + bestLen, 8)}`;
}

/** An IPv4-mapped address (::ffff:a.b.c.d) is an IPv4 address to Kubernetes, never an IPv6 one. */
export function isV4Mapped(groups: readonly number[]): boolean {
  return groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
}

/** The canonical form, or undefined when the text is not an IPv6 address (or is IPv4-mapped). */
export function canonicalIpv6(text: string): string | undefined {
  const g = parseIpv6(text);
  if (g === undefined || isV4Mapped(g)) return undefined;
  const out = formatIpv6(g);
  return out === text ? text : out;
}

/** An IPv6 CIDR with its address made canonical ("FD00:0::/8" -> "fd00::/8"), or undefined. */
export function canonicalCidrv6(text: string): string | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const addr = canonicalIpv6(text.slice(0, slash));
  const len = text.slice(slash + 1);
  if (addr === undefined || !/^[0-9]{1,3}$/.test(len) || Number(len) > 128) return undefined;
  return `${addr}/${Number(len)}`;
}

/** The network of a CIDR the schemas accepted ("fd00::1:2/112" -> "fd00::1:0/112"), in canonical form: an LPM trie key holds no host bits. */
export function cidrv6Network(cidr: string): string {
  const slash = cidr.indexOf('/');
  const len = Number(cidr.slice(slash + 1));
  const g = parseIpv6(cidr.slice(0, slash));
  if (g === undefined || !(len >= 0 && len <= 128)) throw new Error(`not an IPv6 CIDR: ${JSON.stringify(cidr)}`);
  // Each 16-bit group keeps its first len - 16 * i bits (all of them, none, or a prefix).
  const net = g.map((v, i) => v & (0xffff << (16 - Math.max(0, Math.min(16, len - 16 * i)))) & 0xffff);
  return `${formatIpv6(net)}/${len}`;
}

/** Network byte order, for the map codecs; throws on text that is not IPv6. */
export function ipv6ToBytes(ip: string): Uint8Array {
  const g = parseIpv6(ip);
  if (g === undefined) throw new Error(`not an IPv6 address: ${JSON.stringify(ip)}`);
  const out = new Uint8Array(16);
  g.forEach((v, i) => {
    out[2 * i] = v >> 8;
    out[2 * i + 1] = v & 255;
  });
  return out;
}

/** Canonical text of 16 bytes in network order. */
export function bytesToIpv6(b: Uint8Array): string {
  const g: number[] = [];
  for (let i = 0; i < 8; i++) g.push(b[2 * i]! * 256 + b[2 * i + 1]!);
  return formatIpv6(g);
}

/** 32 hex digits: sorts like the address's numeric value, for stable orders of IPv6 addresses. */
export function ipv6SortKey(ip: string): string {
  const g = parseIpv6(ip);
  if (g === undefined) throw new Error(`not an IPv6 address: ${JSON.stringify(ip)}`);
  return g.map((v) => v.toString(16).padStart(4, '0')).join('');
}
