// XDP on the node's external devices (--acceleration): the devices the tc
// programs go on get svcmap_xdp in front of tc ingress, which stays attached
// for what XDP passes on (and egress is tc's only). native: driver mode or
// an error naming the device; best-effort: driver mode, else generic, else
// none, per device, each said in the log. The links are pinned next to the
// tc ones, so a restart or an upgrade swaps the program in place. XDP
// forwards what it translates only by devices that take redirected frames
// (xdp-features.ts: a veth only while its peer has GRO or XDP), followed at
// run time; elsewhere it still decides (drops, local backends) and leaves
// forwarding to tc.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { detachPinnedLink } from '../../bpf/link.ts';
import { linkPinDir } from '../../bpf/loader.ts';
import type { BpfMap } from '../../bpf/map.ts';
import { ifIndex } from '../../bpf/tc.ts';
import { listLinks } from '../../bpf/links.ts';
import { type NetlinkWatch, watchGenetlink } from '../../bpf/netlink.ts';
import { type XdpMode, attachXdp, pinnedXdpMode } from '../../bpf/xdp.ts';
import { type NetdevFamily, netdevFamily, readXdpFeatures, takesXdpFrames } from '../../bpf/xdp-features.ts';
import type { Logger } from '../log.ts';

/** --acceleration. */
export const ACCELERATION_MODES = ['native', 'best-effort', 'disabled'] as const;
export type Acceleration = (typeof ACCELERATION_MODES)[number];

/** The XDP entry (bpf/xdp.c). */
export const XDP_PROGRAM = 'svcmap_xdp';
/** Its devices that take the frames it translates (redirects): per object, filled by the agent (bpf/lib/ctx_xdp.h). */
export const XDP_TX_MAP = 'svcmap_xdp_tx';

/** The loaded XDP object's parts the attachment needs. */
export interface XdpObject {
  progFd: number;
  /** svcmap_xdp_tx: ifindex -> ifindex. */
  tx: BpfMap;
}

/** Why XDP in driver mode leaves forwarding to tc on a device: what takes no redirected frames (xdp-features.ts). */
export const LEFT_TO_TC = {
  /** A veth whose peer runs neither XDP nor GRO. */
  peer: 'forwarding left to tc: the peer takes no XDP frames',
  /** A driver without ndo_xdp_xmit. */
  driver: 'forwarding left to tc: the driver takes no XDP frames',
} as const;
export type NoFrames = keyof typeof LEFT_TO_TC;

/** What runs on a device: XDP in one of its modes in front of tc, or tc only. */
export interface XdpAttachment {
  device: string;
  mode: XdpMode | 'off';
  /** Set when XDP runs natively but the device takes no redirected frames (unset: it does, or no one can say). */
  noFrames?: NoFrames;
}

/** What meets traffic from outside on an external device, as svcmap status and the metrics say it. */
export type DeviceRuns = 'xdp native' | `xdp native; ${(typeof LEFT_TO_TC)[NoFrames]}` | 'xdp generic' | 'tc only';
export const deviceRuns = (mode: XdpMode | 'off' | undefined, noFrames?: NoFrames): DeviceRuns =>
  mode === 'native' && noFrames ? `xdp native; ${LEFT_TO_TC[noFrames]}` : mode && mode !== 'off' ? `xdp ${mode}` : 'tc only';

/** The fix for a device that takes no XDP frames, as the log says it. */
const FIX: Record<NoFrames, string> = {
  peer: "on the other end of this veth: ethtool -K <peer> gro on, or an XDP program on the peer (then XDP forwards: svcmap follows the device's XDP features)",
  driver: 'a driver with ndo_xdp_xmit (XDP forwards by redirects)',
};

/**
 * Which of these devices take no redirected frames (device -> why), from
 * the kernel's XDP features; a device no one can say that of is left out.
 */
export function devicesWithoutFrames(devices: readonly string[], family: NetdevFamily | undefined = netdevFamily()): Map<string, NoFrames> {
  if (!family || !devices.length) return new Map();
  const features = readXdpFeatures(family);
  const links = new Map(listLinks().map((l) => [l.name, l]));
  const out = new Map<string, NoFrames>();
  for (const device of devices) {
    const link = links.get(device);
    const f = link && features.get(link.ifindex);
    if (f !== undefined && f !== 0n && !takesXdpFrames(f)) out.set(device, link?.kind === 'veth' ? 'peer' : 'driver');
  }
  return out;
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
  /** The last attach()'s outcome per device (also when it threw), with the last forwarding state read. */
  attached: XdpAttachment[] = [];
  /** The netdev family (undefined: the kernel has none), looked up at the first attach. */
  #family: NetdevFamily | undefined | null = null;
  #watch: NetlinkWatch | undefined;
  #debounce: NodeJS.Timeout | undefined;
  /** The forwarding state last logged per device ('' : XDP forwards). */
  #said = new Map<string, NoFrames | ''>();

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
    this.attached = out;
    if (want.length) this.#forwarding();
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
   * Re-reads which native devices take redirected frames, writes
   * svcmap_xdp_tx and says each change in the log; true when a device's
   * state changed. follow() calls it on each change the kernel announces.
   */
  refreshForwarding(): boolean {
    if (!this.attached.some((a) => a.mode !== 'off')) return false;
    const before = this.attached.map((a) => a.noFrames ?? '').join();
    this.#forwarding();
    return this.attached.map((a) => a.noFrames ?? '').join() !== before;
  }

  /**
   * Follows the devices' XDP features (the netdev family's mgmt group):
   * onChange after a change of which devices XDP forwards by.
   */
  follow(onChange: () => void, debounceMs = 100): void {
    const family = this.#netdevFamily();
    if (this.#acceleration === 'disabled' || !family || family.mgmtGroup < 0) return;
    try {
      this.#watch = watchGenetlink(family.mgmtGroup, 'the netdev family (XDP features)', () => {
        clearTimeout(this.#debounce);
        this.#debounce = setTimeout(() => {
          if (this.refreshForwarding()) onChange();
        }, debounceMs);
        this.#debounce.unref();
      });
    } catch (err) {
      this.#log.warn({ err }, "cannot follow the devices' XDP features: a peer's change shows at the next re-read of the devices");
    }
  }

  stop(): void {
    this.#watch?.close();
    this.#watch = undefined;
    clearTimeout(this.#debounce);
  }

  #netdevFamily(): NetdevFamily | undefined {
    if (this.#family !== null) return this.#family;
    try {
      this.#family = netdevFamily();
    } catch (err) {
      this.#log.warn({ err }, 'cannot read the netdev generic netlink family');
      this.#family = undefined;
    }
    if (!this.#family)
      this.#log.warn(
        {},
        'this kernel has no netdev generic netlink family (Linux 6.3+): which devices take XDP frames is unknown; XDP forwards by every device it runs on natively',
      );
    return this.#family;
  }

  /** Each native device's forwarding state, svcmap_xdp_tx after it, and the log. */
  #forwarding(): void {
    const native = this.attached.filter((a) => a.mode === 'native').map((a) => a.device);
    const family = this.#netdevFamily();
    let without = new Map<string, NoFrames>();
    if (family) {
      try {
        without = devicesWithoutFrames(native, family);
      } catch (err) {
        this.#log.warn({ err }, "cannot read the devices' XDP features: XDP forwards by every device it runs on natively");
      }
    }
    for (const a of this.attached) {
      const noFrames = a.mode === 'native' ? without.get(a.device) : undefined;
      if (noFrames) a.noFrames = noFrames;
      else delete a.noFrames;
      if (a.mode !== 'native') continue;
      const said = this.#said.get(a.device);
      if (said === (noFrames ?? '')) continue;
      this.#said.set(a.device, noFrames ?? '');
      if (noFrames) this.#log.warn({ device: a.device, fix: FIX[noFrames] }, `XDP on ${a.device}: ${LEFT_TO_TC[noFrames]}`);
      else if (said !== undefined) this.#log.info({ device: a.device }, `XDP on ${a.device} forwards: the device takes XDP frames now`);
    }
    this.#syncTx();
  }

  /**
   * svcmap_xdp_tx: the devices running it natively that take redirected
   * frames; from any other device a translated packet goes to tc. Until
   * this is written (a new object, at a restart) every translated packet
   * goes to tc: slower, never wrong.
   */
  #syncTx(): void {
    const tx = this.#object().tx;
    const want = new Set(this.attached.filter((a) => a.mode === 'native' && !a.noFrames).map((a) => ifIndex(a.device)));
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
