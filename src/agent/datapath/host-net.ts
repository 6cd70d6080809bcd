// The node's own network, as the tc datapath needs it: each device's index
// and primary IPv4 address and first global IPv6 address (the SNAT sources
// for flows leaving through it),
// and which devices carry routes out of the node (the default --devices);
// and every address the node holds (which may serve NodePorts).
// Read from this process's network namespace: os.networkInterfaces()
// (getifaddrs: up devices only, a device's primary addresses before its
// secondaries), if_nametoindex, /proc/net/route and /proc/net/ipv6_route
// (the main tables).
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { ifIndex } from '../../bpf/tc.ts';
import type { Family } from '../../util/family.ts';

export interface HostDevice {
  name: string;
  ifindex: number;
  /** The first IPv4 address the kernel lists for it: a primary one, global scope before narrower (absent: none). */
  addr?: string;
  /** Every IPv4 address it holds. */
  addrs: string[];
  /** The first IPv6 address it holds that is not link-local (fe80::/10) (absent: none). */
  addr6?: string;
  /** Every such IPv6 address. */
  addrs6: string[];
}

export interface HostRoute {
  device: string;
  /** 0.0.0.0/0 (::/0 for IPv6). */
  isDefault: boolean;
  /** Through a gateway (RTF_GATEWAY): another host beyond the device. */
  viaGateway: boolean;
}

export interface HostNet {
  devices: HostDevice[];
  routes: HostRoute[];
}

const RTF_UP = 0x1;
const RTF_GATEWAY = 0x2;

/** /proc/net/route's rows (hex fields, the kernel's byte order); unusable rows are skipped. */
export function parseProcNetRoute(text: string): HostRoute[] {
  const out: HostRoute[] = [];
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8) continue;
    const [device, dst, , flagsHex, , , , mask] = f as [string, string, string, string, string, string, string, string];
    const flags = Number.parseInt(flagsHex, 16);
    // "*": a route without a device (blackhole, unreachable, prohibit).
    if (device === '*' || !(flags & RTF_UP)) continue;
    out.push({
      device,
      isDefault: Number.parseInt(dst, 16) === 0 && Number.parseInt(mask, 16) === 0,
      viaGateway: (flags & RTF_GATEWAY) !== 0,
    });
  }
  return out;
}

const RTF_REJECT = 0x200;

/**
 * /proc/net/ipv6_route's rows (ipv6_route_native_seq_show: destination and
 * its prefix length, source and its length, next hop, metric, refcount,
 * use, flags, device; hex); rejecting routes (blackhole, unreachable,
 * prohibit: shown on lo), routes that are down and unusable rows skipped.
 */
export function parseProcNetIpv6Route(text: string): HostRoute[] {
  const out: HostRoute[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    const [dst, len, , , , , , , flagsHex, device] = f as [string, string, string, string, string, string, string, string, string, string];
    const flags = Number.parseInt(flagsHex, 16);
    if (!(flags & RTF_UP) || flags & RTF_REJECT) continue;
    out.push({ device, isDefault: /^0{32}$/.test(dst) && Number.parseInt(len, 16) === 0, viaGateway: (flags & RTF_GATEWAY) !== 0 });
  }
  return out;
}

/** fe80::/10: a link's own, never a SNAT source (a backend behind a router could not answer it). */
const isLinkLocal6 = (a: string) => /^fe[89ab]/i.test(a);

/**
 * Devices with an IPv4 address or a global IPv6 address (loopback's 127/8
 * and ::1 left out: never a SNAT source).
 */
export function hostDevices(ifaces = networkInterfaces(), index: (name: string) => number = ifIndex): HostDevice[] {
  const out: HostDevice[] = [];
  for (const [name, list] of Object.entries(ifaces)) {
    const addrs = (list ?? []).filter((a) => a.family === 'IPv4' && !a.internal).map((a) => a.address);
    const addrs6 = (list ?? []).filter((a) => a.family === 'IPv6' && !a.internal && !isLinkLocal6(a.address)).map((a) => a.address);
    if (!addrs.length && !addrs6.length) continue;
    let ifindex: number;
    try {
      ifindex = index(name);
    } catch {
      continue; // gone (or renamed) since getifaddrs: the next read has it
    }
    out.push({
      name,
      ifindex,
      ...(addrs.length ? { addr: addrs[0]! } : {}),
      addrs,
      ...(addrs6.length ? { addr6: addrs6[0]! } : {}),
      addrs6,
    });
  }
  return out.sort((a, b) => a.ifindex - b.ifindex);
}

export function readHostNet(): HostNet {
  let routes6: HostRoute[] = [];
  try {
    routes6 = parseProcNetIpv6Route(readFileSync('/proc/net/ipv6_route', 'utf8'));
  } catch (err) {
    // No IPv6 in this kernel (the file is absent): IPv4 routes only.
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  return { devices: hostDevices(), routes: [...parseProcNetRoute(readFileSync('/proc/net/route', 'utf8')), ...routes6] };
}

/**
 * The devices NodePort/LoadBalancer/externalIP traffic may come in on and
 * SNATed flows go out of, when --devices is not given: those holding one of
 * the node's addresses, and every device with a default route or a route
 * through a gateway (the way to other nodes and their pods in a routed
 * network, as kube-proxy's MASQUERADE would find it). Sorted.
 *
 * None at all while no device here holds one of the node's addresses: then
 * this network namespace is not the node's (or the Node is not known yet),
 * and its default route leads somewhere else.
 */
export function defaultDevices(net: HostNet, nodeAddresses: readonly string[]): string[] {
  const out = new Set<string>();
  for (const d of net.devices) if ([...d.addrs, ...d.addrs6].some((a) => nodeAddresses.includes(a))) out.add(d.name);
  if (!out.size) return [];
  for (const d of uplinkDevices(net)) out.add(d);
  return [...out].sort();
}

/** Devices with a default route or a route through a gateway: the ways out of the node, never a pod's interface. */
export function uplinkDevices(net: HostNet): string[] {
  return [...new Set(net.routes.filter((r) => r.device !== 'lo' && (r.isDefault || r.viaGateway)).map((r) => r.device))].sort();
}

/**
 * Every IPv4 and global IPv6 address the node's devices hold (loopback and
 * link-local ones left out), in device order: the node's addresses beside
 * its Node object's. None while no device here holds one of the Node's
 * addresses: this network namespace is then not the node's (or the Node is
 * not known yet), as for defaultDevices().
 */
export function nodeLocalAddresses(net: HostNet, nodeAddresses: readonly string[]): string[] {
  const all = net.devices.flatMap((d) => [...d.addrs, ...d.addrs6]);
  return all.some((a) => nodeAddresses.includes(a)) ? [...new Set(all)] : [];
}

/** The device map's desired content: ifindex -> primary IPv4 address (family 6: first global IPv6 address). */
export function deviceAddresses(net: HostNet, family: Family = 4): Map<number, string> {
  const out = new Map<number, string>();
  for (const d of net.devices) {
    const a = family === 4 ? d.addr : d.addr6;
    if (a !== undefined) out.set(d.ifindex, a);
  }
  return out;
}
