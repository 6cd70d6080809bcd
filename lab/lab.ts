// Lab: one small local "cluster" made of network namespaces, owned by one run id.
// Nodes are namespaces holding a bridge; pods are namespaces joined to a node's
// bridge by a veth; links are point-to-point veths between two lab namespaces.
// Everything is created inside lab namespaces (veth pairs are created inside one and
// their peer moved straight into the other), so the root namespace never gains an
// address, route or link, and no route leads out of the lab.

import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { cgroup2Mount, cgroupExists, createCgroup } from './cgroup.ts';
import { claimRecord, registerTeardown, removeRecord, teardownSync, unregisterTeardown, type Teardown } from './cleanup.ts';
import { LabClient } from './client-handle.ts';
import { type ConnHolderConfig, ConnHolder } from './conn-holder-handle.ts';
import { EchoServer } from './echo-handle.ts';
import { JsonLines, waitReady } from './jsonl.ts';
import {
  bridgeMac,
  cgroupName,
  checkIfName,
  checkPrefix,
  cidrContains,
  DEFAULT_PREFIX,
  formatCidr,
  newRunId,
  nthHost,
  parseCidr,
  parseIfAddr,
  parseIpv4,
  ShortNames,
  type Cidr,
} from './names.ts';
import { addNetns, execIn, ipBatchIn, ipIn, listNetns, netnsExists, sysctlIn } from './netns.ts';
import { helperEnv, killProcessSync, spawnIn, stopProcess, type SpawnOptions } from './processes.ts';
import type { EchoServerConfig } from './protocol.ts';
import { isIPv6 } from 'node:net';

export interface LabOptions {
  /** Namespace name prefix, 1-4 chars [a-z0-9] starting with a letter (default "sm"). */
  prefix?: string;
}

/** Any lab namespace: `ns` is its name under /run/netns. */
export interface LabNs {
  kind: 'node' | 'pod' | 'ns';
  /** The human name given at creation. */
  name: string;
  /** The netns name, `<prefix><runId>-<short>`. */
  ns: string;
}

export interface LabNode extends LabNs {
  kind: 'node';
  /** The node's pod CIDR, e.g. "10.244.1.0/24". */
  cidr: string;
  prefixLen: number;
  /** The bridge's address: the first host of the CIDR. */
  bridgeIp: string;
  /** The bridge interface inside the node namespace. */
  bridge: string;
}

export interface LabPod extends LabNs {
  kind: 'pod';
  ip: string;
  prefixLen: number;
  /** The default gateway: the node's bridge address. */
  gateway: string;
  node: LabNode;
  /** The pod's interface (inside the pod namespace). */
  ifname: string;
  /** The node-side end of the pod's veth (inside the node namespace, enslaved to the bridge). */
  hostIfname: string;
}

/** A namespace given by its LabNs object or by its netns name. */
export type NsRef = LabNs | string;

export interface LinkEnd {
  ns: string;
  ifname: string;
  ip: string;
  prefixLen: number;
}

export interface LabLink {
  a: LinkEnd;
  b: LinkEnd;
}

export interface EchoServerOptions {
  tcpPorts?: number[];
  udpPorts?: number[];
  /** The address to listen on (default 0.0.0.0): e.g. the pod's IPv6 address, for a second, IPv6 server. */
  host?: string;
  cgroup?: string;
  cpu?: number | string;
}

export interface ClientOptions {
  cgroup?: string;
  cpu?: number | string;
}

const ECHO_SERVER = fileURLToPath(new URL('./echo-server.ts', import.meta.url));
const CLIENT = fileURLToPath(new URL('./client.ts', import.meta.url));
const CONN_HOLDER = fileURLToPath(new URL('./conn-holder.ts', import.meta.url));
const NODE_FLAGS = ['--disable-warning=ExperimentalWarning'];
/** The Node that runs the helpers: it must strip TypeScript types (>= 22.18 / 24). */
const HELPER_NODE = process.env.SVCMAP_LAB_NODE ?? process.execPath;

function checkPorts(ports: readonly number[]): number[] {
  for (const p of ports) if (!Number.isInteger(p) || p < 1 || p > 65535) throw new Error(`bad port ${p}`);
  return [...ports];
}

const CREATE_TOKEN = Symbol('Lab.create');

function cgroupTaken(id: string): boolean {
  try {
    return cgroupExists(join(cgroup2Mount(), cgroupName(id)));
  } catch {
    return false; // no cgroup2: the lab works, lab.cgroup() will fail
  }
}

export class Lab {
  /** 6 hex chars, unique among live runs; in every name this lab creates. */
  readonly id: string;
  readonly prefix: string;
  readonly #short = new ShortNames(6);
  readonly #spaces = new Map<string, LabNs>();
  readonly #byName = new Map<string, LabNs>();
  /** Netns names, recorded before `ip netns add` so that teardown never misses one. */
  readonly #netns: string[] = [];
  readonly #cgroups: string[] = [];
  readonly #procs = new Set<ChildProcess>();
  /** In-flight creations of namespaces / cgroups: destroy() lets them finish first. */
  readonly #creating = new Set<Promise<unknown>>();
  readonly #teardown: Teardown;
  #links = 0;
  #destroying: Promise<void> | undefined;

  /** Use Lab.create(). */
  constructor(token: symbol, id: string, prefix: string) {
    if (token !== CREATE_TOKEN) throw new Error('use Lab.create()');
    this.id = id;
    this.prefix = prefix;
    this.#teardown = { emergency: () => this.#teardownSync(true) };
  }

  /** Claims a fresh run id (recording this process as its owner) and registers exit / signal teardown. */
  static async create(opts: LabOptions = {}): Promise<Lab> {
    const prefix = checkPrefix(opts.prefix ?? DEFAULT_PREFIX);
    for (let attempt = 0; attempt < 20; attempt++) {
      const id = newRunId();
      const start = `${prefix}${id}-`;
      if (listNetns().some((n) => n.startsWith(start))) continue;
      if (cgroupTaken(id)) continue;
      if (!claimRecord(id, prefix)) continue;
      const lab = new Lab(CREATE_TOKEN, id, prefix);
      registerTeardown(lab.#teardown);
      return lab;
    }
    throw new Error('could not find a free lab run id');
  }

  /** Netns names this lab created (or is creating). */
  get namespaces(): readonly string[] {
    return [...this.#netns];
  }

  /** Absolute paths of the cgroups this lab created. */
  get cgroups(): readonly string[] {
    return [...this.#cgroups];
  }

  /** Pids of the lab's processes that are still running. */
  get pids(): number[] {
    return [...this.#procs].flatMap((p) => (p.pid !== undefined && p.exitCode === null && p.signalCode === null ? [p.pid] : []));
  }

  get destroyed(): boolean {
    return this.#destroying !== undefined;
  }

  #live(): void {
    if (this.#destroying) throw new Error(`lab ${this.id} is destroyed`);
  }

  /** The netns name of a namespace of this lab; throws for anything else (the root namespace included). */
  nsName(ref: NsRef): string {
    const ns = typeof ref === 'string' ? ref : ref.ns;
    if (!this.#spaces.has(ns)) throw new Error(`${ns} is not a namespace of lab ${this.id}`);
    return ns;
  }

  async #newNs<T extends LabNs>(name: string, make: (ns: string) => T): Promise<T> {
    this.#live();
    if (this.#byName.has(name)) throw new Error(`lab ${this.id} already has a namespace named ${name}`);
    const ns = `${this.prefix}${this.id}-${this.#short.take(name)}`;
    const obj = make(ns);
    this.#byName.set(name, obj);
    this.#netns.push(ns);
    try {
      await this.#creation(addNetns(ns));
    } catch (e) {
      // Someone else's namespace by that name must never be deleted by our teardown.
      if (/exists/i.test(String((e as Error).message))) this.#netns.splice(this.#netns.indexOf(ns), 1);
      throw e;
    }
    this.#spaces.set(ns, obj);
    await ipIn(ns, ['link', 'set', 'lo', 'up']);
    return obj;
  }

  #creation<T>(p: Promise<T>): Promise<T> {
    this.#creating.add(p);
    const done = (): void => {
      this.#creating.delete(p);
    };
    p.then(done, done);
    return p;
  }

  /** A bare lab namespace with only lo (up): e.g. an "outside" client for NodePort tests. */
  async netns(name: string): Promise<LabNs> {
    return this.#newNs(name, (ns) => ({ kind: 'ns', name, ns }));
  }

  /** A node namespace holding bridge br0 with the first host of cidr as its address. */
  async node(name: string, opts: { cidr: string; forward?: boolean }): Promise<LabNode> {
    const cidr: Cidr = parseCidr(opts.cidr);
    if (cidr.prefix > 30) throw new Error(`node cidr ${opts.cidr} is too small`);
    const bridgeIp = nthHost(cidr, 1);
    const node = await this.#newNs<LabNode>(name, (ns) => ({
      kind: 'node',
      name,
      ns,
      cidr: formatCidr(cidr),
      prefixLen: cidr.prefix,
      bridgeIp,
      bridge: 'br0',
    }));
    await ipBatchIn(node.ns, [
      `link add br0 address ${bridgeMac()} type bridge`,
      `addr add ${bridgeIp}/${cidr.prefix} dev br0`,
      'link set br0 up',
    ]);
    if (opts.forward) await this.forward(node);
    return node;
  }

  /**
   * A pod namespace on node: eth0 (a veth whose other end is on the node's bridge)
   * with ip (a host of the node's CIDR, "a.b.c.d" or "a.b.c.d/len"), lo up, and
   * `default via <bridge ip>`. The client pod is just a pod.
   */
  async pod(node: LabNode, name: string, ip: string): Promise<LabPod> {
    this.nsName(node);
    if (node.kind !== 'node') throw new Error(`${node.ns} is not a node`);
    const cidr = parseCidr(node.cidr);
    const addr = ip.includes('/') ? parseIfAddr(ip) : { ip, prefix: cidr.prefix };
    parseIpv4(addr.ip);
    if (addr.prefix !== cidr.prefix || !cidrContains(cidr, addr.ip)) throw new Error(`${ip} is not in node ${node.name}'s ${node.cidr}`);
    const broadcast = nthHost(cidr, 2 ** (32 - cidr.prefix) - 1);
    if (addr.ip === cidr.network || addr.ip === broadcast || addr.ip === node.bridgeIp)
      throw new Error(`${ip} is reserved in ${node.cidr}`);
    const pod = await this.#newNs<LabPod>(name, (ns) => ({
      kind: 'pod',
      name,
      ns,
      ip: addr.ip,
      prefixLen: cidr.prefix,
      gateway: node.bridgeIp,
      node,
      ifname: 'eth0',
      hostIfname: checkIfName(`v-${ns.slice(ns.lastIndexOf('-') + 1)}`),
    }));
    // Created inside the node namespace; the peer goes straight into the pod namespace.
    await ipBatchIn(node.ns, [
      `link add ${pod.hostIfname} type veth peer name eth0 netns ${pod.ns}`,
      `link set ${pod.hostIfname} master ${node.bridge} up`,
    ]);
    await ipBatchIn(pod.ns, [
      `addr add ${pod.ip}/${pod.prefixLen} dev eth0`,
      'link set eth0 up',
      `route add default via ${pod.gateway} dev eth0`,
    ]);
    return pod;
  }

  /**
   * An IPv6 address on a lab namespace's device (a node's br0, a pod's eth0),
   * optionally with the namespace's IPv6 default route via `gateway` (a pod:
   * its node's bridge address). Unique local addresses (fd00::/8) only, /64,
   * without duplicate address detection (usable at once). IPv6 is switched
   * on inside the namespace itself if it is off; the root namespace is never touched.
   */
  async ipv6(ns: NsRef, ip: string, opts: { dev: string; gateway?: string }): Promise<void> {
    this.#live();
    const name = this.nsName(ns);
    for (const a of [ip, ...(opts.gateway ? [opts.gateway] : [])]) {
      if (!isIPv6(a) || !/^fd[0-9a-f]{2}:/i.test(a)) throw new Error(`${a} is not a unique local IPv6 address (fd00::/8)`);
    }
    checkIfName(opts.dev);
    await sysctlIn(name, 'net.ipv6.conf.all.disable_ipv6', 0);
    await sysctlIn(name, `net.ipv6.conf.${opts.dev}.disable_ipv6`, 0);
    await ipBatchIn(name, [
      `addr add ${ip}/64 dev ${opts.dev} nodad`,
      ...(opts.gateway ? [`route add ::/0 via ${opts.gateway} dev ${opts.dev}`] : []),
    ]);
  }

  /** A point-to-point veth between two lab namespaces, with an address at each end ("ip/len"). */
  async link(a: NsRef, b: NsRef, addrA: string, addrB: string, opts: { names?: [string, string] } = {}): Promise<LabLink> {
    this.#live();
    const nsA = this.nsName(a);
    const nsB = this.nsName(b);
    if (nsA === nsB) throw new Error('link needs two different namespaces');
    const ea = parseIfAddr(addrA);
    const eb = parseIfAddr(addrB);
    const n = ++this.#links;
    const [ifA, ifB] = opts.names ?? [`lk${n}`, `lk${n}`];
    checkIfName(ifA);
    checkIfName(ifB);
    await ipIn(nsA, ['link', 'add', ifA, 'type', 'veth', 'peer', 'name', ifB, 'netns', nsB]);
    await ipBatchIn(nsA, [`addr add ${ea.ip}/${ea.prefix} dev ${ifA}`, `link set ${ifA} up`]);
    await ipBatchIn(nsB, [`addr add ${eb.ip}/${eb.prefix} dev ${ifB}`, `link set ${ifB} up`]);
    return {
      a: { ns: nsA, ifname: ifA, ip: ea.ip, prefixLen: ea.prefix },
      b: { ns: nsB, ifname: ifB, ip: eb.ip, prefixLen: eb.prefix },
    };
  }

  /** `ip route replace <cidr|default> via <via> [dev]` inside a lab namespace (never the root one). */
  async route(ns: NsRef, cidr: string, via: string, opts: { dev?: string } = {}): Promise<void> {
    this.#live();
    const name = this.nsName(ns);
    const dst = cidr === 'default' ? 'default' : formatCidr(parseCidr(cidr));
    parseIpv4(via);
    const args = ['route', 'replace', dst, 'via', via];
    if (opts.dev !== undefined) args.push('dev', checkIfName(opts.dev));
    await ipIn(name, args);
  }

  /** net.ipv4.ip_forward inside a lab namespace. */
  async forward(ns: NsRef, on = true): Promise<void> {
    await this.sysctl(ns, 'net.ipv4.ip_forward', on ? 1 : 0);
  }

  /** Writes a net.* sysctl inside a lab namespace. */
  async sysctl(ns: NsRef, key: string, value: string | number): Promise<void> {
    this.#live();
    await sysctlIn(this.nsName(ns), key, value);
  }

  /** `ip -n <ns> ...args` inside a lab namespace; resolves with stdout. */
  async ip(ns: NsRef, ...args: string[]): Promise<string> {
    this.#live();
    return ipIn(this.nsName(ns), args);
  }

  /** Runs a command inside a lab namespace (nsenter --net) and resolves with its stdout; rejects with stderr. */
  async exec(ns: NsRef, cmd: string, args: readonly string[] = [], opts: { timeoutMs?: number } = {}): Promise<string> {
    this.#live();
    return execIn(this.nsName(ns), cmd, args, opts.timeoutMs);
  }

  /** A child cgroup of the cgroup2 mount named svcmap-<id>[-name]; returns its absolute path. */
  async cgroup(name?: string): Promise<string> {
    this.#live();
    const dir = cgroupName(this.id, name);
    const path = join(cgroup2Mount(), dir);
    if (this.#cgroups.includes(path)) throw new Error(`cgroup ${path} already exists in this lab`);
    this.#cgroups.push(path);
    await this.#creation(createCgroup(dir));
    return path;
  }

  /**
   * Starts cmd inside a lab namespace; with opts.cgroup the process joins that cgroup
   * before it enters the namespace. Tracked: stopped (SIGTERM, then SIGKILL) by destroy.
   */
  spawn(ns: NsRef, cmd: string, args: readonly string[] = [], opts: SpawnOptions = {}): ChildProcess {
    this.#live();
    const child = spawnIn(this.nsName(ns), cmd, args, opts);
    this.#procs.add(child);
    child.once('exit', () => this.#procs.delete(child));
    return child;
  }

  /**
   * Starts lab/echo-server.ts in the pod (or any lab namespace; replies name it by
   * its human name); resolves once it listens, rejects with its stderr.
   */
  async echoServer(pod: LabNs & { ip?: string }, opts: EchoServerOptions = {}): Promise<EchoServer> {
    const ip = opts.host ?? pod.ip;
    const config: EchoServerConfig = {
      pod: pod.name,
      ...(ip !== undefined ? { ip } : {}),
      ...(opts.host !== undefined ? { host: opts.host } : {}),
      tcpPorts: checkPorts(opts.tcpPorts ?? []),
      udpPorts: checkPorts(opts.udpPorts ?? []),
    };
    const { child, lines } = await this.#startHelper(pod, [ECHO_SERVER, JSON.stringify(config)], opts, `echo server in ${pod.name}`);
    return new EchoServer(child, lines, { pod: pod.name, ip: ip ?? '', tcpPorts: config.tcpPorts, udpPorts: config.udpPorts });
  }

  /** Starts a long-lived lab/client.ts in the pod (and cgroup); resolves once it is ready. */
  async client(pod: LabNs, opts: ClientOptions = {}): Promise<LabClient> {
    const { child, lines } = await this.#startHelper(pod, [CLIENT], opts, `client in ${pod.name}`);
    return new LabClient(child, lines, pod.name);
  }

  /** Starts lab/conn-holder.ts in the pod (and cgroup): cfg.count TCP connections kept open. */
  async connHolder(pod: LabNs, cfg: ConnHolderConfig, opts: ClientOptions = {}): Promise<ConnHolder> {
    const { child, lines } = await this.#startHelper(pod, [CONN_HOLDER, JSON.stringify(cfg)], opts, `connection holder in ${pod.name}`);
    return new ConnHolder(child, lines);
  }

  /** A lab helper script (node + args) in the namespace, once it reported ready; stopped again if it never does. */
  async #startHelper(
    ns: LabNs,
    args: readonly string[],
    opts: Pick<ClientOptions, 'cgroup' | 'cpu'>,
    what: string,
  ): Promise<{ child: ChildProcess; lines: JsonLines }> {
    const child = this.spawn(ns, HELPER_NODE, [...NODE_FLAGS, ...args], {
      env: helperEnv(),
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(opts.cgroup !== undefined ? { cgroup: opts.cgroup } : {}),
      ...(opts.cpu !== undefined ? { cpu: opts.cpu } : {}),
    });
    const lines = new JsonLines(child);
    try {
      await waitReady(child, lines, what);
    } catch (e) {
      await stopProcess(child, 200);
      throw e;
    }
    return { child, lines };
  }

  /**
   * Stops the lab's processes (SIGTERM, SIGKILL after 1 s), kills whatever else lives
   * in its namespaces or cgroups, deletes the namespaces, removes the cgroups and the
   * run record. Idempotent; rejects if something could not be removed.
   */
  destroy(): Promise<void> {
    this.#destroying ??= this.#destroyAsync();
    return this.#destroying;
  }

  async #destroyAsync(): Promise<void> {
    // Something created after the teardown would leak: let in-flight creations land.
    await Promise.allSettled([...this.#creating]);
    for (const p of this.#procs) p.stdin?.end();
    await Promise.all([...this.#procs].map((p) => stopProcess(p, 1000)));
    this.#teardownSync(false);
    unregisterTeardown(this.#teardown);
    const leftNs = this.#netns.filter(netnsExists);
    const leftCg = this.#cgroups.filter(cgroupExists);
    if (leftNs.length > 0 || leftCg.length > 0) {
      throw new Error(`lab ${this.id}: could not remove ${[...leftNs, ...leftCg].join(', ')}`);
    }
  }

  /** Synchronous: SIGKILL everything, delete namespaces and cgroups, drop the record. */
  #teardownSync(fromExitHandler: boolean): void {
    if (fromExitHandler) this.#destroying ??= Promise.resolve();
    for (const p of this.#procs) killProcessSync(p);
    teardownSync(this.#netns, this.#cgroups);
    // Keep the record while anything is (or may still become) left, so that
    // sweepStale() finds it once we are gone.
    const left = this.#creating.size > 0 || this.#netns.some(netnsExists) || this.#cgroups.some(cgroupExists);
    if (!left) removeRecord(this.id);
  }
}
