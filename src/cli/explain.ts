// svcmap explain VIP:PORT/PROTO: what the datapath would do with a new
// connection there, read from the pinned maps (explain-view.ts walks them).
// Reads only; works without a running agent.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { DatapathMaps } from '../maps/datapath-maps.ts';
import { IPPROTO_TCP, IPPROTO_UDP } from '../maps/constants.ts';
import { canonicalIpv6, formatIpv6, isV4Mapped, parseIpv6 } from '../util/ipv6.ts';
import { UsageError, command, noHeadersFlag, parseFlagsAndArg, pinDirFlag } from './args.ts';
import { zoneNames } from './dump-view.ts';
import { type ExplainQuery, type ExplainReaders, explain as explainView, queryText, renderExplanation } from './explain-view.ts';
import { formatData, outputFlag, tableStyle } from './format.ts';
import { attachedPrograms, externalDevices } from './status.ts';
import { pinDirExists, withPinAccess } from './pin-access.ts';
import { type Family, familyOf } from '../util/family.ts';

/** An IPv4 address, an IPv6 one in brackets (canonical text), or an IPv4-mapped one (its IPv4 address, as the socket hooks translate it). */
function targetAddress(host: string | undefined, bracketed: string | undefined): { addr: string; mapped?: true } | undefined {
  if (host !== undefined) return z.ipv4().safeParse(host).success ? { addr: host } : undefined;
  const g = bracketed === undefined ? undefined : parseIpv6(bracketed);
  if (g === undefined) return undefined;
  if (isV4Mapped(g)) return { addr: `${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`, mapped: true };
  return { addr: formatIpv6(g) };
}

const target = z.string().transform((s, ctx) => {
  const m = /^(?:\[([^\]]+)\]|([^:/[\]]+)):(\d{1,5})(?:\/([A-Za-z]+))?$/.exec(s);
  const port = m ? Number(m[3]) : 0;
  const proto = (m?.[4] ?? 'TCP').toUpperCase();
  const addr = m ? targetAddress(m[2], m[1]) : undefined;
  if (!addr || port < 1 || port > 65535 || (proto !== 'TCP' && proto !== 'UDP')) {
    ctx.addIssue({
      code: 'custom',
      message: `${JSON.stringify(s)} is not a VIP:PORT/PROTO (e.g. 10.96.0.10:53/UDP or [fd00:10:96::a]:53/UDP; the protocol defaults to TCP)`,
    });
    return z.NEVER;
  }
  return { ...addr, port, proto: proto === 'TCP' ? IPPROTO_TCP : IPPROTO_UDP };
});

export const explainCommand = command({
  name: 'explain',
  summary: 'what the datapath would do with a new connection to VIP:PORT/PROTO',
  description:
    'Walks the pinned maps as the datapath does for a new connection: the frontend, its flags and scope, its backends, the algorithm and session affinity, and which backend the connection would get (or why it would be refused). An IPv6 VIP goes in brackets: [fd00:10:96::a]:53/UDP; [::ffff:10.96.0.10]:80 is the IPv4 VIP, as the socket hooks translate an IPv4-mapped address. Without --from: a connection made on this node (the socket hooks). Reads only; works without a running agent.',
  operand: { name: 'VIP:PORT/PROTO', synopsis: 'VIP:PORT[/TCP|UDP]', schema: target },
  flags: {
    from: {
      value: 'IP',
      schema: z.string().transform((s, ctx) => {
        const addr = z.ipv4().safeParse(s).success ? s : canonicalIpv6(s);
        if (addr === undefined) {
          ctx.addIssue({ code: 'custom', message: 'must be an IPv4 or IPv6 address (for an IPv4-mapped one, its IPv4 address)' });
          return z.NEVER;
        }
        return addr;
      }),
      help: 'a packet from this client outside the node (XDP or tc: which one on each device is said; the mode, snat or direct server return, a backend on another node is reached by), with its affinity entry and loadBalancerSourceRanges; an IPv6 client for an IPv6 VIP, an IPv4 one for an IPv4 VIP (tc translates a packet within its family)',
    },
    output: outputFlag(['table', 'wide', 'json']),
    'no-headers': noHeadersFlag,
    'pin-dir': pinDirFlag,
  },
});

/** tc translates a packet within its family, through the frontends of the address asked for. */
function checkClientFamily(t: ExplainQuery, from: string): void {
  const asked = queryText(t);
  if (t.mapped)
    throw new UsageError(
      `svcmap explain: --from: ${asked} is IPv4-mapped, which only the socket hooks translate; for tc ask for the IPv4 VIP`,
    );
  const [vip, client] = [familyOf(t.addr), familyOf(from)];
  if (vip !== client) {
    throw new UsageError(
      `svcmap explain: --from: ${from} is an IPv${client} address and ${asked} an IPv${vip} frontend; tc translates a packet within its family, so the client must be IPv${vip}`,
    );
  }
}

/**
 * Now on CLOCK_BOOTTIME, which the datapath stamps affinity entries with
 * (bpf_ktime_get_boot_ns). /proc/uptime is that clock, in 10 ms steps;
 * Node itself offers only the monotonic clock, which stops in suspend.
 */
export function bootTimeNs(uptime = readFileSync('/proc/uptime', 'utf8')): bigint {
  const m = /^(\d+)\.(\d{2})\s/.exec(uptime);
  if (!m) throw new Error(`cannot read the boot time clock from /proc/uptime: ${JSON.stringify(uptime.slice(0, 40))}`);
  return BigInt(m[1]!) * 1_000_000_000n + BigInt(m[2]!) * 10_000_000n;
}

/** Readers of one family's maps (the affinity map is shared). */
function readersOf(maps: DatapathMaps, family: Family, pinDir: string): ExplainReaders {
  const { affinity } = maps;
  const fm = maps.family(family);
  if (!fm) throw new Error(`the datapath pinned at ${pinDir} has no IPv6 maps (svcmap_svc6): it predates IPv6 frontends`);
  const { srcRange } = fm;
  const addrBits = family === 4 ? 32 : 128;
  return {
    service: (k) => fm.services.get(k),
    backend: (id) => fm.backends.get(id),
    connections: fm.conns ? (id) => fm.conns!.get(id) : undefined,
    affinity: affinity ? { get: (k) => affinity.get(k), entries: () => affinity.entries() } : undefined,
    // An LPM lookup, as lb4_source_allowed/lb6_source_allowed do: all 32 bits of the id, then all of the address.
    sourceAllowed: srcRange ? (id, addr) => srcRange.get({ prefixlen: 32 + addrBits, rev_nat_id: id, addr }) !== undefined : undefined,
    nowNs: bootTimeNs(),
    zoneOf: maps.zones ? zoneNames(maps.zones.entries()) : undefined,
  };
}

export function explain(argv: string[], out: (s: string) => void): void {
  const { flags: f, arg } = parseFlagsAndArg(explainCommand, argv);
  if (f.from) checkClientFamily(arg, f.from);
  pinDirExists(f['pin-dir']);
  withPinAccess(f['pin-dir'], () => {
    const maps = DatapathMaps.openPinned(f['pin-dir']);
    try {
      const family = familyOf(arg.addr);
      const e = explainView({ ...arg, ...(f.from ? { from: f.from } : {}) }, readersOf(maps, family, f['pin-dir']));
      // From outside: which hook meets the packet on each device (XDP in front of tc, or tc only).
      if (f.from) e.devices = externalDevices(attachedPrograms(f['pin-dir']));
      out(f.output === 'json' ? formatData(e, 'json') : renderExplanation(e, tableStyle(f)));
    } finally {
      maps.close();
    }
  });
}
