// Keeps svcmap_sock_byp equal to the Pods that bypass the socket LB
// (model/socket-lb-bypass.ts): each Pod is found by its UID among the
// kubelet's pod-level cgroups (pod-cgroups.ts) and written under that
// cgroup's id; SOCK_CFG_POD_BYPASS in svcmap_sockcfg is on exactly while the
// map holds an entry (set after the first write, cleared before the last
// delete), so that other sockets pay no lookup when no Pod bypasses. A Pod
// whose cgroup is not there yet (the kubelet makes it when the sandbox
// starts) is looked for again when the Pods change and on a back-off timer;
// until then it keeps the socket LB. Sockets already connected keep the
// destination they were given: a change applies to new connect()s and
// datagrams.
import { SOCK_CFG_POD_BYPASS } from '../../maps/constants.ts';
import type { SockBypass, SockConfig } from '../../maps/codecs.ts';
import type { TypedMap } from '../../maps/typed-map.ts';
import type { BypassedPod } from '../../model/socket-lb-bypass.ts';
import type { Component } from '../components.ts';
import type { Logger } from '../log.ts';
import { type PodCgroup, findPodCgroups } from './pod-cgroups.ts';

/** Back-off of the look for cgroups not found yet. */
const RETRY_MS = [500, 1000, 2000, 5000, 10_000, 30_000];

export interface SockBypassMaps {
  bypass: TypedMap<bigint, SockBypass>;
  sockConfig: TypedMap<number, SockConfig>;
}

export class PodBypass implements Component {
  readonly name = 'socket-lb-bypass';
  readonly #maps: SockBypassMaps;
  readonly #root: string;
  readonly #log: Logger;
  /** The Pods asked for, once the source has told (until then the pinned entries stay as they are). */
  #want: BypassedPod[] | undefined;
  /** UID -> its cgroup, for the Pods asked for. */
  readonly #found = new Map<string, PodCgroup>();
  /** Pods (namespace/name) whose cgroup was missing at the last look, and were logged as such. */
  readonly #missing = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #failures = 0;
  #stopped = false;

  /** root: the cgroup v2 directory below which the kubelet makes the Pods' cgroups (the agent's --cgroup). */
  constructor(maps: SockBypassMaps, root: string, log: Logger) {
    this.#maps = maps;
    this.#root = root;
    this.#log = log;
  }

  start(): void {}

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** The Pods that bypass the socket LB now (every one of them). */
  set(pods: readonly BypassedPod[]): void {
    this.#want = [...pods];
    const uids = new Set(pods.map((p) => p.uid.toLowerCase()));
    for (const uid of [...this.#found.keys()]) if (!uids.has(uid)) this.#found.delete(uid);
    this.#failures = 0;
    this.#apply();
  }

  #apply(): void {
    if (this.#stopped || !this.#want) return;
    const want = this.#want;
    if (want.some((p) => !this.#found.has(p.uid.toLowerCase()))) {
      const all = findPodCgroups(this.#root);
      for (const p of want) {
        const c = all.get(p.uid.toLowerCase());
        if (c) this.#found.set(p.uid.toLowerCase(), c);
      }
    }
    const desired = new Map<bigint, SockBypass>();
    const missing: string[] = [];
    for (const p of want) {
      const id = `${p.namespace}/${p.name}`;
      const c = this.#found.get(p.uid.toLowerCase());
      if (!c) {
        missing.push(id);
        continue;
      }
      desired.set(c.id, { level: c.level, pod: id });
    }
    this.#write(desired);
    this.#reportMissing(missing);
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (missing.length) {
      const ms = RETRY_MS[Math.min(this.#failures++, RETRY_MS.length - 1)]!;
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#apply();
      }, ms);
      this.#timer.unref();
    }
  }

  /** The map becomes `desired`: new entries first, the flag on, then stale ones out (the flag off before the last goes). */
  #write(desired: Map<bigint, SockBypass>): void {
    const held = new Map(this.#maps.bypass.entries());
    for (const [id, v] of desired) {
      const old = held.get(id);
      if (old && old.pod === v.pod && old.level === v.level) continue;
      this.#maps.bypass.put(id, v);
      this.#log.info({ pod: v.pod, cgroupId: String(id) }, "the socket LB leaves this Pod's sockets to its veth");
    }
    if (desired.size) this.#flag(true);
    else this.#flag(false);
    for (const [id, v] of held) {
      if (desired.has(id)) continue;
      this.#maps.bypass.delete(id);
      this.#log.info({ pod: v.pod, cgroupId: String(id) }, "the socket LB translates this Pod's sockets again");
    }
  }

  #flag(on: boolean): void {
    const cfg = this.#maps.sockConfig.get(0) ?? { host_netns: 0n, flags: 0 };
    const flags = on ? cfg.flags | SOCK_CFG_POD_BYPASS : cfg.flags & ~SOCK_CFG_POD_BYPASS;
    if (flags !== cfg.flags) this.#maps.sockConfig.put(0, { ...cfg, flags });
  }

  #reportMissing(missing: readonly string[]): void {
    const now = new Set(missing);
    for (const pod of now) {
      if (this.#missing.has(pod)) continue;
      this.#log.info(
        { pod, cgroupRoot: this.#root },
        "the Pod's cgroup is not there yet (the kubelet makes it when the Pod's sandbox starts): it keeps the socket LB until it is found",
      );
    }
    this.#missing.clear();
    for (const pod of now) this.#missing.add(pod);
  }
}
