// Socket termination: when backends leave frontends, destroy the connected
// sockets that the socket LB pointed at them, so applications get an error
// (ECONNABORTED) and reconnect, to a live backend, instead of talking to a
// deleted pod for as long as they keep the socket (a DNS client on a
// connected UDP socket does so until restarted). UDP always; TCP with
// --destroy-tcp-sockets.
//
// How: BPF socket iterators (bpf/sock_destroy.c, iter/udp and iter/tcp)
// calling bpf_sock_destroy (Linux 6.5+). Before a run the agent writes the
// removed {backend, protocol, frontend} to the object's own map
// (svcmap_sk_term, svcmap_sk_term6 for IPv6 backends); a socket is destroyed only if its destination is such a
// backend and its per-socket reverse NAT entry says the socket LB sent it
// there for that frontend, so sockets that connected to the pod IP itself,
// or reached the backend through a frontend it still belongs to, stay.
//
// A socket iterator walks the sockets of the network namespace it is
// created in. The agent runs in the node's namespace; pods have their own.
// So each run creates the iterators once in the agent's own namespace and
// once in each pod's namespace (pod-namespaces.ts: found through the
// processes of the hooks' cgroup, or, with --netns-dir, through the
// container runtime's pinned namespace files), each entered by a
// short-lived native thread (native/svcmap_shim.c), never by the agent's
// own threads.
//
// Without bpf_sock_destroy (or socket iterators) the object does not load:
// the agent says so once and runs without the feature.
import { closeSync } from 'node:fs';
import { Counter, type Registry } from 'prom-client';
import { btfStruct } from '../../bpf/btf.ts';
import { compileBpf } from '../../bpf/compile.ts';
import { loadPinned } from '../../bpf/loader.ts';
import { libbpfText } from '../../bpf/map.ts';
import { native } from '../../bpf/native.ts';
import type { BpfObject } from '../../bpf/object.ts';
import { mapSizeDrift, structDrift } from '../../maps/btf-check.ts';
import { type SockTermKey, sockTerm6Key, sockTermKey, sockTermValue } from '../../maps/codecs.ts';
import { IPPROTO_TCP, IPPROTO_UDP, protoName, SVCMAP_MAP_SK_TERM, SVCMAP_MAP_SK_TERM6, SVCMAP_SK_TERM_MAX } from '../../maps/constants.ts';
import type { MapSpec } from '../../maps/registry.ts';
import { TypedMap } from '../../maps/typed-map.ts';
import type { RemovedBackend } from '../../sync/removed.ts';
import type { Component } from '../components.ts';
import type { Logger } from '../log.ts';
import type { Family } from '../../util/family.ts';
import { type Namespace, type NamespaceSource, checkNetnsDir, describeSource, openPodNamespaces, ownNetnsId } from './pod-namespaces.ts';

/** The programs of bpf/sock_destroy.c. */
const TERM_PROGRAMS = { udp: 'svcmap_term_udp', tcp: 'svcmap_term_tcp' } as const;
/** enum bpf_attach_type: BPF_TRACE_ITER. */
const BPF_TRACE_ITER = 28;

const sockTermMap: MapSpec<SockTermKey, number> = {
  name: SVCMAP_MAP_SK_TERM,
  key: sockTermKey,
  value: sockTermValue,
  purpose: 'socket termination: backends that left a frontend, for one run (not pinned)',
};
/** The same for IPv6 backends (their frontends' ids are of svcmap_revnat6). */
const sockTerm6Map: MapSpec<SockTermKey, number> = {
  name: SVCMAP_MAP_SK_TERM6,
  key: sockTerm6Key,
  value: sockTermValue,
  purpose: 'socket termination: IPv6 backends that left a frontend, for one run (not pinned)',
};

/** A (backend, frontend) pair to look for, with the family whose map it goes to. */
interface TermKey {
  family: Family;
  key: SockTermKey;
}

export interface SocketTerminatorOptions {
  pinDir: string;
  /** The cgroup the socket hooks are attached to: the namespaces of its processes are searched (without netnsDir). */
  cgroup: string;
  /**
   * The container runtime's directory of pinned network namespaces
   * (--netns-dir, e.g. /var/run/netns): its files are searched instead of
   * the cgroup's processes, so the agent needs neither the host's PID
   * namespace nor CAP_SYS_PTRACE.
   */
  netnsDir?: string;
  /** Also destroy TCP sockets (--destroy-tcp-sockets). */
  tcp: boolean;
  objectDir?: string;
  forceCompile?: boolean;
}

interface TerminationRun {
  /** (backend, frontend) pairs the run looked for. */
  backends: number;
  /** Network namespaces searched (the agent's own included). */
  namespaces: number;
  destroyed: { udp: number; tcp: number };
  /** Namespaces whose iterator failed (the namespace went away, ...). */
  failed: number;
}

/** The log's list of the backends a run looked for (addr:port/proto; the first 20, then how many more). */
const LOGGED_BACKENDS = 20;
function removedList(keys: readonly TermKey[]): string[] {
  const names = [
    ...new Set(keys.map(({ family, key }) => `${family === 6 ? `[${key.addr}]` : key.addr}:${key.port}/${protoName(key.proto)}`)),
  ];
  return names.length > LOGGED_BACKENDS ? [...names.slice(0, LOGGED_BACKENDS), `... ${names.length - LOGGED_BACKENDS} more`] : names;
}

/** Runs an iterator in a namespace, off the event loop; resolves to the bytes it wrote (8 per destroyed socket). */
function iterate(linkFd: number, netnsFd: number): Promise<number> {
  return new Promise((resolve, reject) => {
    native().iterRunInNetns.async(linkFd, netnsFd, (err: unknown, rc: number | bigint) => {
      if (err) return reject(err instanceof Error ? err : new Error(String(err)));
      const n = Number(rc);
      if (n < 0) return reject(Object.assign(new Error(libbpfText(n)), { errno: n }));
      resolve(n);
    });
  });
}

/** svcmap_sockets_destroyed_total, registered in `registry` (both protocols at 0). */
export function socketsDestroyedCounter(registry: Registry): Counter<'proto'> {
  const c = new Counter({
    name: 'svcmap_sockets_destroyed_total',
    help: 'Connected sockets destroyed because the socket LB had sent them to a backend that left the frontend, by protocol (udp; tcp with --destroy-tcp-sockets).',
    labelNames: ['proto'],
    registers: [registry],
  });
  for (const proto of ['udp', 'tcp']) c.inc({ proto }, 0);
  return c;
}

function namespaceSource(opts: SocketTerminatorOptions): NamespaceSource {
  return opts.netnsDir !== undefined ? { kind: 'netns-dir', dir: opts.netnsDir } : { kind: 'cgroup', cgroup: opts.cgroup };
}

export class SocketTerminator implements Component {
  readonly name = 'socket terminator';
  readonly #opts: SocketTerminatorOptions;
  readonly #log: Logger;
  #object: BpfObject | undefined;
  #map: TypedMap<SockTermKey, number> | undefined;
  #map6: TypedMap<SockTermKey, number> | undefined;
  readonly #links: { udp: number; tcp: number } = { udp: -1, tcp: -1 };
  readonly #destroyed: Counter<'proto'>;
  readonly #pending = new Map<string, TermKey>();
  #running: Promise<void> | undefined;
  #closed = false;

  /** Off until start(): backends enqueued before are not searched for. */
  constructor(opts: SocketTerminatorOptions, log: Logger, registry: Registry) {
    this.#opts = opts;
    this.#log = log;
    this.#destroyed = socketsDestroyedCounter(registry);
  }

  /**
   * Loads bpf/sock_destroy.c (sharing the pinned per-socket reverse NAT map)
   * and creates its iterator links. A kernel that cannot load it leaves the
   * feature off, said once in the log; anything else is an error.
   */
  start(): void {
    const opts = this.#opts;
    const log = this.#log;
    if (opts.netnsDir !== undefined) checkNetnsDir(opts.netnsDir);
    const compiled = compileBpf({
      program: 'sock_destroy',
      ...(opts.objectDir ? { outDir: opts.objectDir } : {}),
      ...(opts.forceCompile ? { force: true } : {}),
    });
    let object: BpfObject;
    try {
      object = loadPinned({ objectPath: compiled.path, pinDir: opts.pinDir }).object;
    } catch (err) {
      log.warn(
        {
          err: String((err as Error)?.message ?? err)
            .split('\n')
            .slice(0, 6)
            .join('\n'),
        },
        'socket termination is off: the kernel cannot load bpf/sock_destroy.c (it needs BPF socket iterators and the bpf_sock_destroy kfunc, Linux 6.5+). Connected sockets the socket LB sent to a removed backend keep it until the application reconnects',
      );
      return;
    }
    try {
      const drift = [
        ...[sockTermMap, sockTerm6Map].flatMap((spec) => [
          ...structDrift(spec.key.layout, (name) => btfStruct(object.btf(), name)),
          ...mapSizeDrift(spec, object.mapKeySize(spec.name), object.mapValueSize(spec.name)),
        ]),
      ];
      if (drift.length)
        throw new Error(`bpf/sock_destroy.c and the agent disagree on the socket termination map's layout:\n${drift.join('\n')}`);
      this.#object = object;
      this.#map = new TypedMap(sockTermMap, object.map(SVCMAP_MAP_SK_TERM));
      this.#map6 = new TypedMap(sockTerm6Map, object.map(SVCMAP_MAP_SK_TERM6));
      this.#links.udp = this.#link(TERM_PROGRAMS.udp);
      if (opts.tcp) this.#links.tcp = this.#link(TERM_PROGRAMS.tcp);
    } catch (err) {
      this.stop(); // closes the object and any link made
      object.close();
      throw err;
    }
    const podNamespaces = describeSource(namespaceSource(opts));
    log.info(
      { object: compiled.path, tcp: opts.tcp, podNamespaces },
      `socket termination on: connected sockets sent to a removed backend are destroyed, in this namespace and in pods' found through ${podNamespaces}`,
    );
  }

  get enabled(): boolean {
    return this.#map !== undefined && !this.#closed;
  }

  #link(program: string): number {
    const fd = native().linkCreate(this.#object!.programFd(program), 0, BPF_TRACE_ITER, null) as number;
    if (fd < 0) throw new Error(`creating the iterator link of ${program}: ${libbpfText(fd)}`);
    return fd;
  }

  /** Backends left frontends of the family (the sync applied it): their sockets are destroyed soon, off the sync path. */
  enqueue(removed: readonly RemovedBackend[], family: Family = 4): void {
    if (!this.enabled) return;
    for (const r of removed) {
      if (r.proto !== IPPROTO_UDP && !(r.proto === IPPROTO_TCP && this.#opts.tcp)) continue;
      this.#pending.set(`${family} ${r.addr}:${r.port}/${r.proto}@${r.revNatId}`, {
        family,
        key: { addr: r.addr, port: r.port, proto: r.proto, rev_nat_id: r.revNatId },
      });
    }
    if (this.#pending.size && !this.#running) this.#running = this.#drain();
  }

  async #drain(): Promise<void> {
    try {
      await new Promise((r) => setImmediate(r)); // one run for all removals of this sync
      while (this.#pending.size && !this.#closed) {
        const keys = [...this.#pending.values()];
        this.#pending.clear();
        try {
          const run = await this.#run(keys);
          const total = run.destroyed.udp + run.destroyed.tcp;
          this.#log[total ? 'info' : 'debug'](
            { ...run, removed: removedList(keys) },
            total ? 'destroyed sockets connected to removed backends' : 'no socket was connected to the removed backends',
          );
        } catch (err) {
          this.#log.error({ err }, 'socket termination failed; sockets connected to removed backends may stay');
        }
      }
    } finally {
      this.#running = undefined;
    }
  }

  /** One run: every namespace searched for sockets sent to these backends. */
  async #run(keys: readonly TermKey[]): Promise<TerminationRun> {
    const [map4, map6] = [this.#map, this.#map6];
    if (!map4 || !map6) throw new Error('socket termination is off');
    const put = (batch: readonly TermKey[]) => {
      map4.putMany(batch.filter((k) => k.family === 4).map((k) => [k.key, 1] as const));
      map6.putMany(batch.filter((k) => k.family === 6).map((k) => [k.key, 1] as const));
    };
    const remove = (batch: readonly TermKey[]) => {
      map4.deleteMany(batch.filter((k) => k.family === 4).map((k) => k.key));
      map6.deleteMany(batch.filter((k) => k.family === 6).map((k) => k.key));
    };
    const result: TerminationRun = { backends: keys.length, namespaces: 0, destroyed: { udp: 0, tcp: 0 }, failed: 0 };
    const namespaces: Namespace[] = [{ label: "the agent's own", fd: -1 }, ...this.#podNamespaces()];
    result.namespaces = namespaces.length;
    try {
      for (let i = 0; i < keys.length; i += SVCMAP_SK_TERM_MAX) {
        const batch = keys.slice(i, i + SVCMAP_SK_TERM_MAX);
        const protos = { udp: batch.some((k) => k.key.proto === IPPROTO_UDP), tcp: batch.some((k) => k.key.proto === IPPROTO_TCP) };
        put(batch);
        try {
          for (const ns of namespaces) {
            if (ns.fd === -2) continue; // failed in an earlier batch
            try {
              for (const proto of ['udp', 'tcp'] as const) {
                if (!protos[proto] || this.#links[proto] < 0 || this.#closed) continue;
                const n = (await iterate(this.#links[proto], ns.fd)) / 8;
                result.destroyed[proto] += n;
                if (n) this.#destroyed.inc({ proto }, n);
              }
            } catch (err) {
              result.failed++;
              this.#log.warn(
                { netns: ns.label, err: (err as Error).message },
                'could not search a network namespace for sockets to destroy',
              );
              if (ns.fd >= 0) closeSync(ns.fd);
              ns.fd = -2;
            }
          }
        } finally {
          if (!this.#closed) remove(batch);
        }
      }
    } finally {
      for (const ns of namespaces) if (ns.fd >= 0) closeSync(ns.fd);
    }
    return result;
  }

  /** The pods' namespaces, opened; none, said in the log, when they cannot be listed (the netns directory unmounted since start). */
  #podNamespaces(): Namespace[] {
    const source = namespaceSource(this.#opts);
    try {
      return openPodNamespaces(source, ownNetnsId());
    } catch (err) {
      this.#log.warn(
        { podNamespaces: describeSource(source), err: (err as Error).message },
        "could not list pods' network namespaces: only the agent's own is searched this run",
      );
      return [];
    }
  }

  /** Closes the links and the object (nothing of it is pinned but the shared map). */
  stop(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const fd of [this.#links.udp, this.#links.tcp]) if (fd >= 0) closeSync(fd);
    this.#links.udp = this.#links.tcp = -1;
    this.#object?.close();
  }
}
