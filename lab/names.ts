// Names and addresses of lab objects: the run id, namespace and interface names,
// the cgroup name, and the IPv4 / CIDR arithmetic the lab needs. Pure, no I/O.

import { randomBytes } from 'node:crypto';

/** Linux IFNAMSIZ - 1: the longest interface name the kernel accepts. */
export const IFNAME_MAX = 15;

/** Default namespace name prefix: every lab netns is `<prefix><runId>-<short>`. */
export const DEFAULT_PREFIX = 'sm';

/** Every lab cgroup is `svcmap-<runId>` or `svcmap-<runId>-<name>`. */
export const CGROUP_PREFIX = 'svcmap-';

const RUN_ID_RE = /^[0-9a-f]{6}$/;
const PREFIX_RE = /^[a-z][a-z0-9]{0,3}$/;

/** A fresh run id: 6 lowercase hex characters. */
export function newRunId(): string {
  return randomBytes(3).toString('hex');
}

export function isRunId(s: string): boolean {
  return RUN_ID_RE.test(s);
}

export function checkPrefix(prefix: string): string {
  if (!PREFIX_RE.test(prefix)) {
    throw new Error(`lab prefix must match ${PREFIX_RE} (got ${JSON.stringify(prefix)})`);
  }
  return prefix;
}

/** `<prefix><runId>-`: the start of every netns name of one run. */
export function netnsRunPrefix(prefix: string, runId: string): string {
  return `${prefix}${runId}-`;
}

/** Matches any lab netns name with the given prefix; group 1 is the run id. */
export function netnsPattern(prefix: string): RegExp {
  return new RegExp(`^${checkPrefix(prefix)}([0-9a-f]{6})-[a-z0-9]{1,6}$`);
}

/** Matches any lab cgroup directory name; group 1 is the run id. */
export const CGROUP_PATTERN = /^svcmap-([0-9a-f]{6})(?:-[a-z0-9-]{1,32})?$/;

/**
 * Hands out short, unique, interface-safe names ([a-z0-9], at most `max` chars)
 * derived from human names: "client" -> "client", "backend-1" -> "backen",
 * a second "backend-2" -> "back1" ...
 */
export class ShortNames {
  readonly #used = new Set<string>();
  readonly #max: number;

  constructor(max = 6) {
    this.#max = max;
  }

  take(name: string): string {
    const base = sanitize(name).slice(0, this.#max) || 'x';
    if (!this.#used.has(base)) {
      this.#used.add(base);
      return base;
    }
    for (let i = 1; i < 100000; i++) {
      const suffix = String(i);
      const candidate = base.slice(0, this.#max - suffix.length) + suffix;
      if (!this.#used.has(candidate)) {
        this.#used.add(candidate);
        return candidate;
      }
    }
    throw new Error(`no short name left for ${name}`);
  }
}

export function sanitize(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]/g, '');
}

/**
 * A bridge's own MAC address: random, locally administered, unicast. A Linux
 * bridge created without one takes the lowest MAC among its ports and changes
 * it as ports come and go; its neighbours' ARP entries for the gateway then
 * point at an address nobody owns, and their traffic is lost until they
 * resolve it again (seconds). Set at creation, the bridge keeps it.
 */
export function bridgeMac(): string {
  const b = randomBytes(6);
  b[0] = (b[0]! & 0xfc) | 0x02;
  return [...b].map((x) => x.toString(16).padStart(2, '0')).join(':');
}

export function checkIfName(name: string): string {
  if (name.length === 0 || name.length > IFNAME_MAX || !/^[A-Za-z0-9_.-]+$/.test(name)) {
    throw new Error(`bad interface name ${JSON.stringify(name)} (1..${IFNAME_MAX} chars of [A-Za-z0-9_.-])`);
  }
  return name;
}

/** A cgroup directory name for a run: `svcmap-<id>` or `svcmap-<id>-<name>`. */
export function cgroupName(runId: string, name?: string): string {
  if (name === undefined || name === '') return `${CGROUP_PREFIX}${runId}`;
  const clean = name
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .slice(0, 32);
  if (!/^[a-z0-9-]{1,32}$/.test(clean)) throw new Error(`bad cgroup name ${JSON.stringify(name)}`);
  return `${CGROUP_PREFIX}${runId}-${clean}`;
}

// ---------------------------------------------------------------------------
// IPv4

export interface Cidr {
  /** The network address, dotted. */
  network: string;
  prefix: number;
}

export function parseIpv4(s: string): number {
  const parts = s.split('.');
  if (parts.length !== 4) throw new Error(`not an IPv4 address: ${JSON.stringify(s)}`);
  let n = 0;
  for (const p of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p) || Number(p) > 255) throw new Error(`not an IPv4 address: ${JSON.stringify(s)}`);
    n = n * 256 + Number(p);
  }
  return n;
}

export function formatIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

function maskOf(prefix: number): number {
  return prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
}

/** Parses "a.b.c.d/len"; the host part is zeroed ("10.0.0.7/24" -> 10.0.0.0/24). */
export function parseCidr(s: string): Cidr {
  const m = /^([0-9.]+)\/([0-9]{1,2})$/.exec(s);
  if (!m || Number(m[2]) > 32) throw new Error(`not an IPv4 CIDR: ${JSON.stringify(s)}`);
  const prefix = Number(m[2]);
  const net = (parseIpv4(m[1] as string) & maskOf(prefix)) >>> 0;
  return { network: formatIpv4(net), prefix };
}

/** Parses "a.b.c.d/len" keeping the host part: { ip, prefix }. */
export function parseIfAddr(s: string): { ip: string; prefix: number } {
  const m = /^([0-9.]+)\/([0-9]{1,2})$/.exec(s);
  if (!m || Number(m[2]) > 32) throw new Error(`not an IPv4 address/prefix: ${JSON.stringify(s)}`);
  parseIpv4(m[1] as string);
  return { ip: m[1] as string, prefix: Number(m[2]) };
}

export function cidrContains(cidr: Cidr, ip: string): boolean {
  const mask = maskOf(cidr.prefix);
  return (parseIpv4(ip) & mask) >>> 0 === parseIpv4(cidr.network);
}

/** The n-th host address of a CIDR (n = 1 is the first usable host). */
export function nthHost(cidr: Cidr, n: number): string {
  const size = 2 ** (32 - cidr.prefix);
  if (n < 0 || n >= size) throw new Error(`host ${n} outside ${cidr.network}/${cidr.prefix}`);
  return formatIpv4((parseIpv4(cidr.network) + n) >>> 0);
}

export function formatCidr(cidr: Cidr): string {
  return `${cidr.network}/${cidr.prefix}`;
}
