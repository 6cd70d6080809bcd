// The tc half of the datapath: which devices carry traffic from outside the
// node (--devices, or the interfaces that hold the node's InternalIP), the
// node address that SNAT uses, and the attachments themselves. Re-evaluated
// whenever the node's addresses change.
import { existsSync, readdirSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { detachPinnedLink } from '../bpf/link.ts';
import { linkPinDir } from '../bpf/loader.ts';
import { type TcMode, attachTc } from '../bpf/tc.ts';
import type { BpfObject } from '../bpf/object.ts';
import type { SvcmapConfig } from '../maps/codecs.ts';
import type { TypedMap } from '../maps/typed-map.ts';
import type { NodeInfo } from '../model/types.ts';
import { TC_PROGRAMS } from './datapath.ts';
import type { Logger } from './log.ts';

/**
 * SNAT source ports: above Linux's default ephemeral range (32768-60999), so
 * they never meet the node's own sockets. Written to the config map with the
 * node address; bpf/lib/nat.h only falls back to the same range for a config
 * without a usable one.
 */
export const SNAT_PORT_MIN = 61000;
export const SNAT_PORT_MAX = 65535;

export interface TcAttachment {
  device: string;
  direction: 'ingress' | 'egress';
  mode: TcMode;
}

/** Interfaces (in this network namespace) holding any of the addresses. */
export function devicesHolding(addresses: readonly string[]): string[] {
  const out: string[] = [];
  for (const [name, addrs] of Object.entries(networkInterfaces())) {
    if (addrs?.some((a) => a.family === 'IPv4' && addresses.includes(a.address))) out.push(name);
  }
  return out.sort();
}

function firstIPv4(device: string): string | undefined {
  return networkInterfaces()[device]?.find((a) => a.family === 'IPv4')?.address;
}

const pinName = (program: string, device: string) => `${program}@${device}`;

export class TcDatapath {
  readonly #object: BpfObject;
  readonly #config: TypedMap<number, SvcmapConfig>;
  readonly #pinDir: string;
  readonly #log: Logger;
  readonly #explicit: string[] | undefined;
  #current = '';
  attachments: TcAttachment[] = [];

  readonly #mode: TcMode | 'auto';

  constructor(object: BpfObject, config: TypedMap<number, SvcmapConfig>, pinDir: string, log: Logger, devices?: string[], mode: TcMode | 'auto' = 'auto') {
    this.#mode = mode;
    this.#object = object;
    this.#config = config;
    this.#pinDir = pinDir;
    this.#log = log;
    this.#explicit = devices?.length ? devices : undefined;
  }

  /** Attaches to the devices for this node (idempotent; cheap when nothing changed). */
  update(node: NodeInfo | undefined): void {
    const devices = this.#explicit ?? devicesHolding(node?.addresses ?? []);
    const nodeIp = node?.addresses[0] ?? (devices[0] ? firstIPv4(devices[0]) : undefined);
    const key = JSON.stringify({ devices, nodeIp });
    if (key === this.#current) return;
    if (!devices.length) {
      if (node?.addresses.length) this.#log.warn({ addresses: node.addresses }, 'no interface holds the node\'s addresses; NodePort/LoadBalancer/externalIP traffic from outside is not translated (pass --devices)');
      return;
    }
    if (!nodeIp) {
      this.#log.warn({ devices }, 'no IPv4 address for SNAT on the devices; the tc datapath is not attached');
      return;
    }
    // The config first: a program attached without it would SNAT to 0.0.0.0.
    this.#config.put(0, { node_ip: nodeIp, snat_port_min: SNAT_PORT_MIN, snat_port_max: SNAT_PORT_MAX, flags: 0 });
    const attachments: TcAttachment[] = [];
    for (const device of devices) {
      for (const [direction, program] of [['ingress', TC_PROGRAMS.ingress], ['egress', TC_PROGRAMS.egress]] as const) {
        const mode = attachTc(this.#object.programFd(program), device, direction, join(linkPinDir(this.#pinDir), pinName(program, device)), this.#mode);
        attachments.push({ device, direction, mode });
      }
    }
    this.#detachOthers(devices);
    this.attachments = attachments;
    this.#current = key;
    this.#log.info({ devices, nodeIp, mode: attachments[0]?.mode }, 'tc datapath attached');
  }

  /** Pinned tc links of devices that are no longer wanted. */
  #detachOthers(devices: readonly string[]): void {
    const dir = linkPinDir(this.#pinDir);
    if (!existsSync(dir)) return;
    for (const name of readdirSync(dir)) {
      const m = /^(svcmap_tc_(?:in|out))@(.+)$/.exec(name);
      if (!m || devices.includes(m[2]!)) continue;
      detachPinnedLink(join(dir, name));
      this.#log.info({ device: m[2] }, 'tc datapath detached from a device no longer used');
    }
  }
}
