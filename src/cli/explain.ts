// svcmap explain VIP:PORT/PROTO: what the datapath would do with a new
// connection there, read from the pinned maps (explain-view.ts walks them).
// Reads only; works without a running agent.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { DatapathMaps } from '../maps/datapath-maps.ts';
import { IPPROTO_TCP, IPPROTO_UDP } from '../maps/constants.ts';
import { parseFlagsAndArg, pinDirFlag } from './args.ts';
import { type ExplainReaders, explain as explainView, renderExplanation } from './explain-view.ts';
import { formatData } from './format.ts';
import { pinDirExists, withPinAccess } from './pin-access.ts';

export const explainHelp = `svcmap explain VIP:PORT[/TCP|UDP] [--from IP] [-o table|json] [--pin-dir DIR]
  Walks the pinned maps as the datapath does for a new connection: the
  frontend, its flags and scope, its backends, the algorithm and session
  affinity, and which backend the connection would get (or why it would be
  refused). Without --from: a connection made on this node (the socket
  hooks). --from IP: a packet from that client outside the node (tc), with
  its affinity entry and loadBalancerSourceRanges.`;

const target = z.string().transform((s, ctx) => {
  const m = /^([^:/]+):(\d{1,5})(?:\/([A-Za-z]+))?$/.exec(s);
  const port = m ? Number(m[2]) : 0;
  const proto = (m?.[3] ?? 'TCP').toUpperCase();
  if (!m || !z.ipv4().safeParse(m[1]).success || port < 1 || port > 65535 || (proto !== 'TCP' && proto !== 'UDP')) {
    ctx.addIssue({ code: 'custom', message: `${JSON.stringify(s)} is not an IPv4 VIP:PORT/PROTO (e.g. 10.96.0.10:53/UDP; the protocol defaults to TCP)` });
    return z.NEVER;
  }
  return { addr: m[1]!, port, proto: proto === 'TCP' ? IPPROTO_TCP : IPPROTO_UDP };
});

const schema = z.object({
  'pin-dir': pinDirFlag,
  output: z.enum(['table', 'json'], { message: 'must be table or json' }).default('table'),
  from: z.ipv4({ message: 'must be an IPv4 address' }).optional(),
});

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

function readersOf(maps: DatapathMaps): ExplainReaders {
  const { affinity, srcRange } = maps;
  return {
    service: (k) => maps.services.get(k),
    backend: (id) => maps.backends.get(id),
    connections: maps.conns ? (id) => maps.conns!.get(id) : undefined,
    affinity: affinity ? { get: (k) => affinity.get(k), entries: () => affinity.entries() } : undefined,
    // An LPM lookup, as lb4_source_allowed does: all 32 bits of the id, then all of the address.
    sourceAllowed: srcRange ? (id, addr) => srcRange.get({ prefixlen: 64, rev_nat_id: id, addr }) !== undefined : undefined,
    nowNs: bootTimeNs(),
  };
}

export function explain(argv: string[], out: (s: string) => void): void {
  const { flags: f, arg } = parseFlagsAndArg(argv, {
    'pin-dir': { type: 'string' },
    output: { type: 'string', short: 'o' },
    from: { type: 'string' },
  }, schema, 'explain', { name: 'VIP:PORT/PROTO', schema: target });
  pinDirExists(f['pin-dir']);
  withPinAccess(f['pin-dir'], () => {
    const maps = DatapathMaps.openPinned(f['pin-dir']);
    try {
      const e = explainView({ ...arg, ...(f.from ? { from: f.from } : {}) }, readersOf(maps));
      out(f.output === 'json' ? formatData(e, 'json') : renderExplanation(e));
    } finally {
      maps.close();
    }
  });
}
