// Attaching an XDP program to an interface through a BPF link (BPF_XDP),
// pinned so it outlives the agent and can have its program swapped
// atomically, in driver (native) or generic (skb) mode. The link's info
// does not say the mode; rtnetlink does (links.ts).
import { closeSync, readFileSync } from 'node:fs';
import { BpfError } from './errors.ts';
import { detachLink, linkInfo, openPinned, pinNewLink, updateLink } from './link.ts';
import { listLinks } from './links.ts';
import { libbpfText } from './map.ts';
import { native } from './native.ts';
import { ifIndex } from './tc.ts';

/** enum bpf_attach_type's BPF_XDP and enum bpf_link_type's BPF_LINK_TYPE_XDP (linux/bpf.h). */
export const ATTACH_TYPE_XDP = 37;
export const LINK_TYPE_XDP = 6;
/** XDP_FLAGS_SKB_MODE and XDP_FLAGS_DRV_MODE (linux/if_link.h). */
const XDP_FLAGS: Record<XdpMode, number> = { generic: 1 << 1, native: 1 << 2 };

/** native: in the driver, before an skb exists; generic: after, on any device (no speed-up, the same behaviour). */
export type XdpMode = 'native' | 'generic';

/**
 * struct bpf_link_create_opts of libbpf 1.x up to its flags: { size_t sz;
 * __u32 flags; }. sz says how much of it libbpf reads, so later fields stay
 * unread (and zero).
 */
function linkCreateOpts(flags: number): Buffer {
  const opts = Buffer.alloc(16);
  opts.writeBigUInt64LE(16n, 0);
  opts.writeUInt32LE(flags, 8);
  return opts;
}

/** The interface index an XDP link is attached to (0 once its device is gone), from its fdinfo. */
export function xdpLinkIfindex(linkFd: number): number {
  const m = /^ifindex:\s+(\d+)$/m.exec(readFileSync(`/proc/self/fdinfo/${linkFd}`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** The mode an XDP program runs in on an interface (undefined: none attached). */
export function xdpModeOf(ifindex: number): { mode: string; progId: number } | undefined {
  return listLinks().find((l) => l.ifindex === ifindex)?.xdp;
}

/** The mode of the XDP link pinned at pinPath, if it is attached to this interface (and runs). */
export function pinnedXdpMode(pinPath: string, ifname: string): XdpMode | undefined {
  const fd = openPinned(pinPath);
  if (fd === undefined) return undefined;
  try {
    const ifindex = ifIndex(ifname);
    if (linkInfo(fd).type !== LINK_TYPE_XDP || xdpLinkIfindex(fd) !== ifindex) return undefined;
    const mode = xdpModeOf(ifindex)?.mode;
    return mode === 'native' || mode === 'generic' ? mode : undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * Attaches an XDP program to an interface in a mode, through a link pinned
 * at pinPath. A link pinned there on the same interface in the same mode
 * gets the new program atomically (an agent restart or upgrade: no moment
 * without the program). One in another mode goes first (a device runs one
 * XDP mode at a time); one on an interface that was replaced (same name,
 * new index) goes after the new one is attached. A refusal (a driver
 * without XDP: EOPNOTSUPP) throws, naming the device and the mode.
 */
export function attachXdp(progFd: number, ifname: string, pinPath: string, mode: XdpMode): void {
  const ifindex = ifIndex(ifname);
  const running = pinnedXdpMode(pinPath, ifname);
  const existing = openPinned(pinPath);
  if (existing !== undefined) {
    try {
      if (running === mode) {
        updateLink(existing, progFd);
        return;
      }
      if (running) detachLink(existing); // the other mode: it must go before this one can come
    } finally {
      closeSync(existing);
    }
  }
  const fd = native().linkCreate(progFd, ifindex, ATTACH_TYPE_XDP, linkCreateOpts(XDP_FLAGS[mode])) as number;
  if (fd < 0) {
    // The detached link stays pinned (and detached) until a later attach replaces it or cleanup removes it.
    throw new BpfError(`attach XDP in ${mode} mode on ${ifname}`, fd, libbpfText(fd));
  }
  pinNewLink(fd, pinPath, existing !== undefined);
}
