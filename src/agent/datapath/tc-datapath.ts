// The tc half of the datapath: which devices carry traffic from outside the
// node (--devices, or by default those holding the node's addresses and
// those with a default route or a route through a gateway), the address
// each device SNATs to (svcmap_devaddr), and the attachments themselves.
// Re-evaluated when the node's Node object changes and when the node's
// addresses, routes or links change (rtnetlink), with a periodic re-read as
// a safety net, so an address change needs no restart. Since it follows the
// node's addresses, it also tells the agent every address the node holds
// (which may serve NodePorts: nodeport-addresses.ts).
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { detachPinnedLink } from '../../bpf/link.ts';
import { linkPinDir } from '../../bpf/loader.ts';
import {
  type NetlinkWatch,
  RTMGRP_IPV4_IFADDR,
  RTMGRP_IPV4_ROUTE,
  RTMGRP_IPV6_IFADDR,
  RTMGRP_IPV6_ROUTE,
  RTMGRP_LINK,
  watchNetlink,
} from '../../bpf/netlink.ts';
import { type TcMode, attachTc } from '../../bpf/tc.ts';
import type { BpfObject } from '../../bpf/object.ts';
import type { SvcmapConfig } from '../../maps/codecs.ts';
import type { FamilyMaps } from '../../maps/datapath-maps.ts';
import type { TypedMap } from '../../maps/typed-map.ts';
import type { NodeInfo } from '../../model/types.ts';
import { TC_PROGRAMS } from './datapath.ts';
import { syncDeviceAddresses } from './device-addresses.ts';
import { type HostNet, defaultDevices, deviceAddresses, nodeLocalAddresses, readHostNet } from './host-net.ts';
import { type DeviceRuns, type XdpAttachment, type XdpDevices, XdpRefusedError, deviceRuns } from './xdp-devices.ts';
import type { Component } from '../components.ts';
import type { Logger } from '../log.ts';

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

export interface TcDatapathMaps {
  config: TypedMap<number, SvcmapConfig>;
  /** Each family's SNAT address per device (a family without the map is left out). */
  families: ReadonlyArray<Pick<FamilyMaps, 'family' | 'devAddr'>>;
}

export interface FollowOptions {
  /** Quiet time after a netlink change before the re-read (changes come in bursts). */
  debounceMs?: number;
  /** The safety-net re-read. */
  intervalMs?: number;
}

export interface TcDatapathOptions {
  /** --devices: the interfaces to attach to (default: chosen from the node's addresses and routes). */
  devices?: string[] | undefined;
  /** tcx links where the kernel has them (auto), or force one kind. */
  mode?: TcMode | 'auto';
  /** The node known at start (before the source says more). */
  node?: NodeInfo | undefined;
  /** Told when attaching fails (the agent runs on, without tc translation, and counts it). */
  onAttachFailed?: () => void;
  /** XDP in front of tc ingress on the same devices (--acceleration); absent: tc only. */
  xdp?: XdpDevices | undefined;
  /** Told the external devices and what runs on each after every change of them. */
  onDevices?: (devices: Array<{ device: string; runs: DeviceRuns }>) => void;
  /** Told every address the node's devices hold (host-net.ts nodeLocalAddresses()) whenever that list changes. */
  onNodeAddresses?: (addresses: string[]) => void;
}

/** What made the agent re-read the node's network (logged). */
export type RefreshTrigger = 'node' | 'netlink' | 'interval';

const pinName = (program: string, device: string) => `${program}@${device}`;

export class TcDatapath implements Component {
  readonly name = 'tc datapath';
  readonly #object: BpfObject;
  readonly #maps: TcDatapathMaps;
  readonly #pinDir: string;
  readonly #log: Logger;
  readonly #explicit: string[] | undefined;
  readonly #mode: TcMode | 'auto';
  readonly #onAttachFailed: (() => void) | undefined;
  readonly #xdp: XdpDevices | undefined;
  readonly #onDevices: TcDatapathOptions['onDevices'];
  readonly #onNodeAddresses: ((addresses: string[]) => void) | undefined;
  #nodeAddresses = '';
  #node: NodeInfo | undefined;
  #current = '';
  #devices: string[] = [];
  #watch: NetlinkWatch | undefined;
  #debounce: NodeJS.Timeout | undefined;
  #interval: NodeJS.Timeout | undefined;
  #lastError: string | undefined;
  attachments: TcAttachment[] = [];
  /** What runs in front of tc ingress on each device. */
  xdp: XdpAttachment[] = [];

  constructor(object: BpfObject, maps: TcDatapathMaps, pinDir: string, log: Logger, opts: TcDatapathOptions = {}) {
    this.#mode = opts.mode ?? 'auto';
    this.#object = object;
    this.#maps = maps;
    this.#pinDir = pinDir;
    this.#log = log;
    this.#explicit = opts.devices?.length ? opts.devices : undefined;
    this.#node = opts.node;
    this.#onAttachFailed = opts.onAttachFailed;
    this.#xdp = opts.xdp;
    this.#onDevices = opts.onDevices;
    this.#onNodeAddresses = opts.onNodeAddresses;
  }

  /** Attaches for the node known at start, then follows the node's addresses and routes. */
  start(): void {
    this.attach(this.#node);
    this.follow();
  }

  /** update(), a failure said in the log instead of thrown: the rest of the agent runs on. */
  attach(node: NodeInfo | undefined): void {
    try {
      this.update(node);
    } catch (err) {
      this.#onAttachFailed?.();
      this.#log.error(
        { err },
        err instanceof XdpRefusedError
          ? 'XDP in driver mode refused; the devices named run tc only'
          : 'attaching the tc datapath failed; NodePort/LoadBalancer/externalIP traffic from outside is not translated',
      );
    }
  }

  /** This node's Node changed (its addresses pick the default devices and the config's node IP). */
  update(node: NodeInfo | undefined): void {
    this.#node = node;
    this.refresh(readHostNet(), 'node');
  }

  /**
   * Follows the node's addresses, routes and links from now on: a re-read
   * after each burst of rtnetlink messages, and every intervalMs.
   */
  follow(opts: FollowOptions = {}): void {
    const debounceMs = opts.debounceMs ?? 100;
    const later = () => {
      clearTimeout(this.#debounce);
      this.#debounce = setTimeout(() => this.#refreshLogged('netlink'), debounceMs);
      this.#debounce.unref();
    };
    try {
      this.#watch = watchNetlink(RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_ROUTE, later);
    } catch (err) {
      this.#log.warn({ err }, "cannot subscribe to rtnetlink: the node's addresses and routes are re-read periodically only");
    }
    this.#interval = setInterval(() => this.#refreshLogged('interval'), opts.intervalMs ?? 30_000);
    this.#interval.unref();
    // A veth's peer in another namespace turning GRO on or off: only the netdev family says it.
    this.#xdp?.follow(() => this.#tellDevices(), debounceMs);
  }

  stop(): void {
    this.#xdp?.stop();
    this.#watch?.close();
    this.#watch = undefined;
    clearTimeout(this.#debounce);
    clearInterval(this.#interval);
  }

  #refreshLogged(trigger: RefreshTrigger): void {
    try {
      this.refresh(readHostNet(), trigger);
      this.#lastError = undefined;
    } catch (err) {
      // Said once until it changes: a device that is missing fails every re-read.
      const text = String((err as Error)?.message ?? err);
      if (text === this.#lastError) return;
      this.#lastError = text;
      this.#log.error({ err, trigger }, "following the node's addresses failed; the tc datapath keeps its last state");
    }
  }

  /** Re-reads the node's network: the device map first, then the attachments (idempotent; cheap when nothing changed). */
  refresh(net: HostNet = readHostNet(), trigger: RefreshTrigger = 'node'): void {
    this.#syncAddresses(net, trigger);
    const own = [...(this.#node?.addresses ?? []), ...(this.#node?.addresses6 ?? [])];
    this.#tellNodeAddresses(nodeLocalAddresses(net, own));
    const devices = this.#explicit ?? defaultDevices(net, own);
    const nodeIp = this.#node?.addresses[0] ?? net.devices.find((d) => d.name === devices[0])?.addr;
    const key = JSON.stringify({ devices, nodeIp });
    if (key === this.#current) {
      // The safety net for the devices' XDP features too (their own announcements: XdpDevices.follow()).
      if (this.#xdp?.refreshForwarding()) this.#tellDevices();
      return;
    }
    if (!devices.length) {
      this.#current = key; // said once per state
      if (this.#node?.addresses.length)
        this.#log.warn(
          { addresses: this.#node?.addresses ?? [] },
          "no device holds the node's addresses or routes out of the node; NodePort/LoadBalancer/externalIP traffic from outside is not translated (pass --devices)",
        );
      return;
    }
    // The config (SNAT port range) before any program runs; node_ip is for status.
    this.#maps.config.put(0, { node_ip: nodeIp ?? '0.0.0.0', snat_port_min: SNAT_PORT_MIN, snat_port_max: SNAT_PORT_MAX, flags: 0 });
    const attachments: TcAttachment[] = [];
    for (const device of devices) {
      for (const [direction, program] of [
        ['ingress', TC_PROGRAMS.ingress],
        ['egress', TC_PROGRAMS.egress],
      ] as const) {
        const mode = attachTc(
          this.#object.programFd(program),
          device,
          direction,
          join(linkPinDir(this.#pinDir), pinName(program, device)),
          this.#mode,
        );
        attachments.push({ device, direction, mode });
      }
    }
    this.#detachOthers(devices);
    this.attachments = attachments;
    this.#current = key;
    this.#log.info({ devices, nodeIp, mode: attachments[0]?.mode, trigger }, 'tc datapath attached');
    // After tc: what XDP passes on finds tc ingress there. A refusal (--acceleration native) throws, tc stays.
    try {
      this.#xdp?.attach(devices);
    } finally {
      this.#devices = devices;
      this.#tellDevices();
    }
  }

  /** Tells onDevices what runs on each device now. */
  #tellDevices(): void {
    this.xdp = this.#xdp?.attached ?? [];
    const xdp = new Map(this.xdp.map((x) => [x.device, x]));
    this.#onDevices?.(this.#devices.map((device) => ({ device, runs: deviceRuns(xdp.get(device)?.mode, xdp.get(device)?.noFrames) })));
  }

  #tellNodeAddresses(addresses: string[]): void {
    const key = addresses.join(',');
    if (key === this.#nodeAddresses) return;
    this.#nodeAddresses = key;
    this.#onNodeAddresses?.(addresses);
  }

  #syncAddresses(net: HostNet, trigger: RefreshTrigger): void {
    const name = (ifindex: number) => net.devices.find((d) => d.ifindex === ifindex)?.name ?? `ifindex ${ifindex}`;
    for (const { family, devAddr: map } of this.#maps.families) {
      if (!map) continue;
      const { set, removed } = syncDeviceAddresses(map, deviceAddresses(net, family));
      if (!set.size && !removed.length) continue;
      this.#log.info(
        {
          family,
          set: Object.fromEntries([...set].map(([i, a]) => [name(i), a])),
          removed,
          snatAddresses: Object.fromEntries(net.devices.map((d) => [d.name, family === 4 ? d.addr : d.addr6])),
          trigger,
        },
        'SNAT addresses updated',
      );
    }
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
