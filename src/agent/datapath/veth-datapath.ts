// The pods' veths: svcmap_veth_in and svcmap_veth_out (bpf/veth.c) on the
// host side of every pod interface, for the per-packet translation of pods
// the socket LB leaves alone. A pod's interface, seen from the node, is a
// veth whose peer is in another network namespace (rtnetlink's
// IFLA_LINK_NETNSID); one of the node's own external devices (the tc
// datapath's) is never one, even when it is a veth (a node that is itself a
// namespace, as in kind). Followed over rtnetlink as pods come and go; the
// links are pinned (links/svcmap_veth_in@DEV), so they outlive the agent as
// the rest of the datapath does, and a pin whose device is gone is removed.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { detachPinnedLink } from '../../bpf/link.ts';
import { type NetLink, listLinks } from '../../bpf/links.ts';
import { linkPinDir } from '../../bpf/loader.ts';
import { type NetlinkWatch, RTMGRP_LINK, watchNetlink } from '../../bpf/netlink.ts';
import type { BpfObject } from '../../bpf/object.ts';
import { type TcMode, attachTc } from '../../bpf/tc.ts';
import type { Component } from '../components.ts';
import type { Logger } from '../log.ts';

/** The veth programs, by direction on the host side: ingress is what the pod sends. */
export const VETH_PROGRAMS = { ingress: 'svcmap_veth_in', egress: 'svcmap_veth_out' } as const;

const PIN = /^(svcmap_veth_(?:in|out))@(.+)$/;
const pinName = (program: string, device: string) => `${program}@${device}`;

/** The log line of a refresh that attached nothing because the pin directory is gone (svcmap cleanup ran). */
export const VETH_PIN_DIR_GONE = "the pin directory is gone (svcmap cleanup): pods' veths are left alone";

/** The pods' interfaces among the links: veths with a peer in another namespace, not one of `exclude`. */
export function podVeths(links: readonly NetLink[], exclude: ReadonlySet<string>): NetLink[] {
  return links.filter((l) => l.kind === 'veth' && l.peerInOtherNetns && !exclude.has(l.name)).sort((a, b) => a.name.localeCompare(b.name));
}

/** The devices whose pinned veth links are under pinDir (for status and cleanup). */
export function pinnedVeths(pinDir: string): string[] {
  const dir = linkPinDir(pinDir);
  if (!existsSync(dir)) return [];
  const out = new Set<string>();
  for (const name of readdirSync(dir)) {
    const m = PIN.exec(name);
    if (m) out.add(m[2]!);
  }
  return [...out].sort();
}

export interface VethDatapathOptions {
  mode?: TcMode | 'auto';
  /** The node's external devices (the tc datapath's), never a pod's even when they are veths. */
  externalDevices?: () => readonly string[];
  /** Quiet time after a netlink change before the re-read. */
  debounceMs?: number;
  /** The safety-net re-read. */
  intervalMs?: number;
}

export class VethDatapath implements Component {
  readonly name = 'veth datapath';
  readonly #object: BpfObject;
  readonly #pinDir: string;
  readonly #log: Logger;
  readonly #opts: VethDatapathOptions;
  #watch: NetlinkWatch | undefined;
  #debounce: NodeJS.Timeout | undefined;
  #interval: NodeJS.Timeout | undefined;
  #lastError: string | undefined;
  /** The devices with programs attached, as of the last refresh, by name: their ifindex (a pod's veth name may come back on a new device). */
  #attached = new Map<string, number>();
  /** The pod veths last left alone because the pin directory was gone (logged when they change). */
  #leftAlone: string | undefined;

  constructor(object: BpfObject, pinDir: string, log: Logger, opts: VethDatapathOptions = {}) {
    this.#object = object;
    this.#pinDir = pinDir;
    this.#log = log;
    this.#opts = opts;
  }

  start(): void {
    this.#refreshLogged();
    const later = () => {
      clearTimeout(this.#debounce);
      this.#debounce = setTimeout(() => this.#refreshLogged(), this.#opts.debounceMs ?? 50);
      this.#debounce.unref();
    };
    try {
      this.#watch = watchNetlink(RTMGRP_LINK, later);
    } catch (err) {
      this.#log.warn({ err }, "cannot subscribe to rtnetlink: pods' veths are found by the periodic re-read only");
    }
    this.#interval = setInterval(() => this.#refreshLogged(), this.#opts.intervalMs ?? 30_000);
    this.#interval.unref();
  }

  stop(): void {
    this.#watch?.close();
    this.#watch = undefined;
    clearTimeout(this.#debounce);
    clearInterval(this.#interval);
  }

  /** refresh(), a failure said in the log instead of thrown. */
  resync(): void {
    this.#refreshLogged();
  }

  #refreshLogged(): void {
    try {
      this.refresh();
      this.#lastError = undefined;
    } catch (err) {
      const text = String((err as Error)?.message ?? err);
      if (text === this.#lastError) return;
      this.#lastError = text;
      this.#log.error({ err }, "following the pods' veths failed; the veth datapath keeps its last state");
    }
  }

  /** Attaches to every pod veth not attached yet and removes the pins of those that are gone. Idempotent. */
  refresh(links: readonly NetLink[] = listLinks()): void {
    const want = podVeths(links, new Set(this.#opts.externalDevices?.() ?? []));
    // `svcmap cleanup` took the datapath away under this agent (the chart's
    // uninstall runs it before the agent goes): pinning a new pod's links
    // would bring the pin directory back after it, so nothing is attached.
    if (!existsSync(this.#pinDir)) {
      const names = want.map((l) => l.name).join(',');
      if (names !== this.#leftAlone) this.#log.info({ devices: want.length, pinDir: this.#pinDir }, VETH_PIN_DIR_GONE);
      this.#leftAlone = names;
      return;
    }
    this.#leftAlone = undefined;
    const added: string[] = [];
    const attached = new Map<string, number>();
    for (const { name: device, ifindex } of want) {
      if (this.#attached.get(device) === ifindex && this.#pinned(device)) {
        attached.set(device, ifindex);
        continue;
      }
      try {
        for (const [direction, program] of [
          ['ingress', VETH_PROGRAMS.ingress],
          ['egress', VETH_PROGRAMS.egress],
        ] as const) {
          attachTc(
            this.#object.programFd(program),
            device,
            direction,
            join(linkPinDir(this.#pinDir), pinName(program, device)),
            this.#opts.mode ?? 'auto',
          );
        }
        attached.set(device, ifindex);
        added.push(device);
      } catch (err) {
        // A pod's veth can go between the listing and the attach: the next re-read settles it.
        this.#log.warn({ err, device }, "attaching to a pod's veth failed");
      }
    }
    const removed = this.#detachOthers(new Set(attached.keys()));
    this.#attached = attached;
    if (added.length || removed.length) this.#log.info({ added, removed, devices: attached.size }, "pods' veths attached");
  }

  /** The devices with programs attached, as of the last refresh. */
  get devices(): string[] {
    return [...this.#attached.keys()];
  }

  #pinned(device: string): boolean {
    return existsSync(join(linkPinDir(this.#pinDir), pinName(VETH_PROGRAMS.ingress, device)));
  }

  /** Pinned veth links of devices not in keep (gone, or no longer a pod's). */
  #detachOthers(keep: ReadonlySet<string>): string[] {
    const dir = linkPinDir(this.#pinDir);
    if (!existsSync(dir)) return [];
    const removed = new Set<string>();
    for (const name of readdirSync(dir)) {
      const m = PIN.exec(name);
      if (!m || keep.has(m[2]!)) continue;
      detachPinnedLink(join(dir, name));
      removed.add(m[2]!);
    }
    return [...removed];
  }
}
