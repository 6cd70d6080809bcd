// The socket LB's connection counts, counted afresh: bpf/sock_count.c is an
// iterator over the socket storage map svcmap_sk_be (one struct sk_backend
// per socket the socket LB counted, in every network namespace), run by the
// agent; each socket still counted adds 1 to its {backend, address, port}
// in the object's own map svcmap_sk_count, emptied before each run. The
// caller (ConnCounts) compares the result with svcmap_be_conns.
//
// A kernel that cannot load the object (no socket storage iterators, no
// BTF) leaves the socket recount off, said once in the log.
import { closeSync } from 'node:fs';
import { btfStruct } from '../../bpf/btf.ts';
import { compileBpf } from '../../bpf/compile.ts';
import { loadPinned } from '../../bpf/loader.ts';
import { libbpfText } from '../../bpf/map.ts';
import { native } from '../../bpf/native.ts';
import type { BpfObject } from '../../bpf/object.ts';
import { mapSizeDrift, structDrift } from '../../maps/btf-check.ts';
import { type SkBackend, skBackend6Value, skBackendValue, skCountValue } from '../../maps/codecs.ts';
import { SVCMAP_MAP_SK_BACKEND, SVCMAP_MAP_SK_BACKEND6, SVCMAP_MAP_SK_COUNT, SVCMAP_MAP_SK_COUNT6 } from '../../maps/constants.ts';
import type { MapSpec } from '../../maps/registry.ts';
import { TypedMap } from '../../maps/typed-map.ts';
import type { Logger } from '../log.ts';
import type { Family } from '../../util/family.ts';

/** Each family's iterator program, the storage map it walks and the counts it fills. */
const FAMILY = {
  4: {
    program: 'svcmap_sk_recount',
    storage: SVCMAP_MAP_SK_BACKEND,
    value: skBackendValue,
    counts: {
      name: SVCMAP_MAP_SK_COUNT,
      key: skBackendValue,
      value: skCountValue,
      purpose: 'socket recount: live sockets per backend, for one run (not pinned)',
    } as MapSpec<SkBackend, bigint>,
  },
  6: {
    program: 'svcmap_sk_recount6',
    storage: SVCMAP_MAP_SK_BACKEND6,
    value: skBackend6Value,
    counts: {
      name: SVCMAP_MAP_SK_COUNT6,
      key: skBackend6Value,
      value: skCountValue,
      purpose: 'socket recount: live sockets per IPv6 backend, for one run (not pinned)',
    } as MapSpec<SkBackend, bigint>,
  },
} as const;

export interface SocketCount extends SkBackend {
  sockets: number;
}

export interface SocketCounterOptions {
  pinDir: string;
  /** Which storage to count: svcmap_sk_be (4, the default) or svcmap_sk_be6 (6). */
  family?: Family;
  objectDir?: string;
  forceCompile?: boolean;
}

export class SocketCounter {
  readonly #object: BpfObject;
  readonly #counts: TypedMap<SkBackend, bigint>;
  readonly #link: number;

  private constructor(object: BpfObject, f: (typeof FAMILY)[Family]) {
    this.#object = object;
    this.#counts = new TypedMap(f.counts, object.map(f.counts.name));
    const fd = native().iterMapLinkCreate(object.programFd(f.program), object.map(f.storage).fd) as number;
    if (fd < 0) throw new Error(`creating the socket storage iterator link of ${f.program}: ${libbpfText(fd)}`);
    this.#link = fd;
  }

  /** Loads bpf/sock_count.c on the pinned socket storage map; undefined (logged) where the kernel cannot. */
  static load(opts: SocketCounterOptions, log: Logger): SocketCounter | undefined {
    const compiled = compileBpf({
      program: 'sock_count',
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
        'the socket recount is off: the kernel cannot load bpf/sock_count.c (socket storage iterators). Socket LB connection counts are kept by the datapath alone',
      );
      return undefined;
    }
    try {
      const f = FAMILY[opts.family ?? 4];
      const drift = [
        ...structDrift(f.value.layout, (name) => btfStruct(object.btf(), name)),
        ...mapSizeDrift(f.counts, object.mapKeySize(f.counts.name), object.mapValueSize(f.counts.name)),
      ];
      if (drift.length) throw new Error(`bpf/sock_count.c and the agent disagree on the socket recount map's layout:\n${drift.join('\n')}`);
      return new SocketCounter(object, f);
    } catch (err) {
      object.close();
      throw err;
    }
  }

  /** One run: the live counted sockets per {backend_id, addr, port}. Blocks while the kernel walks the storage. */
  count(): SocketCount[] {
    for (const k of this.#counts.raw.keys()) this.#counts.raw.delete(k);
    const rc = Number(native().iterRunInNetns(this.#link, -1));
    if (rc < 0) throw new Error(`running the socket storage iterator: ${libbpfText(rc)}`);
    return this.#counts.entries().map(([k, n]) => ({ ...k, sockets: Number(n) }));
  }

  close(): void {
    closeSync(this.#link);
    this.#object.close();
  }
}
