// An address's family. Every address that reaches a family test has passed
// validation (src/util/ipv4.ts, src/util/ipv6.ts), so a colon is enough to
// tell IPv6 from IPv4.

/** IPv4 or IPv6, as the datapath's maps and the model split them. */
export type Family = 4 | 6;

/** The family of a valid address (text). */
export function familyOf(addr: string): Family {
  return addr.includes(':') ? 6 : 4;
}
