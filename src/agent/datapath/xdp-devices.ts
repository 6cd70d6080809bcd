// XDP on the node's external devices (--acceleration): the devices the tc
// programs go on get svcmap_xdp in front of tc ingress, which stays attached
// for what XDP passes on (and egress is tc's only). native: driver mode or
// an error naming the device; best-effort: driver mode, else generic, else
// none, per device, each said in the log. The links are pinned next to the
// tc ones, so a restart or an upgrade swaps the program in place.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { detachPinnedLink } from '../../bpf/link.ts';
import { linkPinDir } from '../../bpf/loader.ts';
import type { BpfMap } from '../../bpf/map.ts';
import { ifIndex } from '../../bpf/tc.ts';
import { type XdpMode, attachXdp, pinnedXdpMode } from '../../bpf/xdp.ts';
import type { Logger } from '../log.ts';

/** --acceleration. */
export const ACCELERATION_MODES = ['native', 'best-effort', 'disabled'] as const;
export type Acceleration = (typeof ACCELERATION_MODES)[number];

/** The XDP entry (bpf/xdp.c). */
export const XDP_PROGRAM = 'svcmap_xdp';
/** Its devices that take the frames it translates (XDP_TX, redirects): per object, filled by the agent (bpf/lib/ctx_xdp.h). */
export const XDP_TX_MAP = 'svcmap_xdp_tx';

/** The loaded XDP object's parts the attachment needs. */
export interface XdpObject {
  progFd: number;
  /** svcmap_xdp_tx: ifindex -> ifindex. */
  tx: BpfMap;
}

/** What runs on a device: XDP in one of its modes in front of tc, or tc only. */
export interface XdpAttachment {
  device: string;
  mode: XdpMode | 'off';
}

const PIN = /^svcmap_xdp@(.+)$/;
const pinName = (device: string) => `${XDP_PROGRAM}@${device}`;

/** The devices with a pinned XDP link in pinDir. */
export function pinnedXdpDevices(pinDir: string): string[] {
  const dir = linkPinDir(pinDir);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((n) => PIN.exec(n)?.[1])
    .filter((d): d is string => d !== undefined)
    .sort();
}

/** --acceleration native on devices whose driver refuses XDP (they run tc only). */
export class XdpRefusedError extends Error {}

export class XdpDevices {
  readonly #object: () => XdpObject;
  readonly #pinDir: string;
  readonly #acceleration: Acceleration;
  readonly #log: Logger;

  /** object: svcmap_xdp's, asked for only when acceleration is on. */
  constructor(object: () => XdpObject, pinDir: string, acceleration: Acceleration, log: Logger) {
    this.#object = object;
    this.#pinDir = pinDir;
    this.#acceleration = acceleration;
    this.#log = log;
  }

  /**
   * Attaches svcmap_xdp to each device (none with acceleration disabled)
   * and detaches it from every other device. With native, the devices that
   * refuse driver mode are named in one error, thrown after the others are
   * attached.
   */
  attach(devices: readonly string[]): XdpAttachment[] {
    const want = this.#acceleration === 'disabled' ? [] : devices;
    const out: XdpAttachment[] = [];
    const refused: string[] = [];
    for (const device of want) out.push({ device, mode: this.#attachOne(device, refused) });
    if (want.length) this.#syncTx(out);
    this.#detachOthers(want);
    for (const a of out)
      this.#log.info({ device: a.device, mode: a.mode }, a.mode === 'off' ? 'XDP off: tc only' : `XDP attached (${a.mode})`);
    if (refused.length) {
      throw new XdpRefusedError(
        `--acceleration native: XDP in driver mode is refused on ${refused.join('; ')} (these devices run tc only; use --acceleration best-effort to fall back to generic mode)`,
      );
    }
    return out;
  }

  /** One device's mode; a native refusal is added to refused. */
  #attachOne(device: string, refused: string[]): XdpMode | 'off' {
    const pin = join(linkPinDir(this.#pinDir), pinName(device));
    const fd = this.#object().progFd;
    // A device running it in generic mode refused driver mode before (its driver's support does not change).
    if (!(this.#acceleration === 'best-effort' && pinnedXdpMode(pin, device) === 'generic')) {
      try {
        attachXdp(fd, device, pin, 'native');
        return 'native';
      } catch (err) {
        if (this.#acceleration === 'native') {
          refused.push(`${device}: ${(err as Error).message}`);
          detachPinnedLink(pin); // what an earlier run attached there in another mode
          return 'off';
        }
        this.#log.warn({ device, err }, 'the driver refuses XDP in native mode; trying generic mode (--acceleration best-effort)');
      }
    }
    try {
      attachXdp(fd, device, pin, 'generic');
      return 'generic';
    } catch (err) {
      this.#log.warn({ device, err }, 'no XDP in generic mode either: this device runs tc only (--acceleration best-effort)');
      detachPinnedLink(pin);
      return 'off';
    }
  }

  /**
   * svcmap_xdp_tx: the devices running it natively, whose drivers send the
   * frames it translates (XDP_TX, ndo_xdp_xmit); from any other device a
   * translated packet goes to tc. Until this is written (a new object, at
   * a restart) every translated packet goes to tc: slower, never wrong.
   */
  #syncTx(attached: readonly XdpAttachment[]): void {
    const tx = this.#object().tx;
    const want = new Set(attached.filter((a) => a.mode === 'native').map((a) => ifIndex(a.device)));
    const key = (ifindex: number) => {
      const b = Buffer.alloc(4);
      b.writeUInt32LE(ifindex);
      return b;
    };
    for (const ifindex of want) tx.update(key(ifindex), key(ifindex));
    for (const k of tx.keys()) if (!want.has(k.readUInt32LE(0))) tx.delete(k);
  }

  /** XDP links of devices that are no longer wanted (all of them with acceleration disabled). */
  #detachOthers(devices: readonly string[]): void {
    for (const device of pinnedXdpDevices(this.#pinDir)) {
      if (devices.includes(device)) continue;
      detachPinnedLink(join(linkPinDir(this.#pinDir), pinName(device)));
      this.#log.info({ device }, 'XDP detached from a device no longer used');
    }
  }
}
