// Small IPv4 helpers shared by the model. Inputs are already validated by the
// zod schemas, so these only classify and order addresses; they do not parse
// untrusted text.

/** Family of an address string that passed IP validation. */
export function ipFamily(ip: string): 4 | 6 {
  return ip.includes(':') ? 6 : 4;
}

/** Dotted IPv4 to an unsigned 32-bit number, for numeric ordering (10.0.0.9 < 10.0.0.10). */
export function ipv4ToNumber(ip: string): number {
  // Hand-rolled (no split): this is on the hot path of every rebuild.
  let n = 0;
  let octet = 0;
  for (let i = 0; i < ip.length; i++) {
    const c = ip.charCodeAt(i);
    if (c === 46 /* . */) {
      n = n * 256 + octet;
      octet = 0;
    } else {
      octet = octet * 10 + (c - 48);
    }
  }
  return n * 256 + octet;
}
