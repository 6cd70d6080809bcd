// Address classification for the model. Inputs are already validated by the
// zod schemas (IPv4 through src/maps/ipv4.ts, the one IPv4 parser).

/** Family of an address string that passed IP validation. */
export function ipFamily(ip: string): 4 | 6 {
  return ip.includes(':') ? 6 : 4;
}
