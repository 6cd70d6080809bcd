// --metrics-bind-address / --healthz-bind-address, as kube-proxy takes them:
// ADDRESS:PORT with IPv6 in brackets ([::]:10256), or an address alone for
// the default port, IPv6 ones bare too (::, ::1). "::" listens on both
// families; port 0 picks any free port; "" or "off" serves nothing.
import { isIPv4, isIPv6 } from 'node:net';
import { z } from 'zod';

export interface BindAddress {
  bindAddress: string;
  port: number;
}

const USAGE = 'must be ADDRESS:PORT ([ADDRESS]:PORT for IPv6), an address alone, or off';

/** The flag's schema; null: serve nothing. */
export function bindAddressFlag(defaultPort: number) {
  return z.string().transform((s, ctx): BindAddress | null => {
    const v = s.trim();
    if (v === '' || v === 'off') return null;
    if (isIPv4(v) || isIPv6(v)) return { bindAddress: v, port: defaultPort };
    const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(v) ?? /^([0-9.]+):(\d+)$/.exec(v);
    const host = m?.[1];
    if (!host || !(v.startsWith('[') ? isIPv6(host) : isIPv4(host))) {
      ctx.addIssue({ code: 'custom', message: `${JSON.stringify(s)}: ${USAGE}` });
      return z.NEVER;
    }
    const port = m[2] === undefined ? defaultPort : Number(m[2]);
    if (port > 65535) {
      ctx.addIssue({ code: 'custom', message: `${JSON.stringify(s)}: the port must be between 0 and 65535` });
      return z.NEVER;
    }
    return { bindAddress: host, port };
  });
}
