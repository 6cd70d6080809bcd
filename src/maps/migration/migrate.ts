// The migration on start: the pinned maps a new datapath cannot take over as
// they are (plan.ts) get new maps beside them, pinned under
// PIN_DIR/migrating/, and the datapath is loaded against those. Then, in
// this order:
//   1. copy()     every entry, converted, into the new maps (the old
//                 programs keep serving from the old ones meanwhile);
//   2. swap()     every pinned link (cgroup hooks, tcx) to the new program
//                 of the same name in one BPF_LINK_UPDATE each; a failure
//                 puts the links already swapped back;
//   3. finish()   copies again what the old programs wrote between 1 and 2,
//                 then renames the new pins over the old ones (the kernel
//                 frees an old map with its last program).
// Until 2 the old datapath serves untouched: abort() removes the new pins,
// and the error says what to do.
import { closeSync, existsSync, mkdirSync, readdirSync, renameSync, rmdirSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { linkInfo, openPinned, progInfoById, updateLink } from '../../bpf/link.ts';
import { linkPinDir } from '../../bpf/loader.ts';
import { BpfMap } from '../../bpf/map.ts';
import type { BpfObject } from '../../bpf/object.ts';
import { native } from '../../bpf/native.ts';
import { configValue } from '../codecs.ts';
import { SVCMAP_CFG_MIGRATION_HOLD } from '../constants.ts';
import { backendConns6Map, backendConnsMap, configMap, ct6Map, ctMap, metricsMap } from '../registry.ts';
import { type Converter, converter, fieldChanges } from './convert.ts';
import { CapacityError, type Values, addCounted, copyAll, mergeChanges } from './copy.ts';
import { overrideFor } from './overrides.ts';
import { type MapMove, migratingDir } from './plan.ts';

/** Maps whose values are counts the programs add to: the catch-up adds what the old programs counted. */
const COUNTER_MAPS = new Set([backendConnsMap.name, backendConns6Map.name, metricsMap.name]);

/**
 * Maps the tc programs add an entry to per new flow: while one moves, new
 * flows are held (SVCMAP_CFG_MIGRATION_HOLD) from the last copy before the
 * switch until after it, so that the old programs add none the copy misses.
 */
const FLOW_MAPS = new Set([ctMap.name, ct6Map.name]);

/** The --max-* option that sizes a map, as the operator writes it. */
const FLAG: Record<string, string> = {
  maxServices: '--max-services (chart value maxServices)',
  maxBackends: '--max-backends (chart value maxBackends)',
  maxConntrack: '--max-conntrack (chart value conntrackSize)',
  maxAffinity: '--max-affinity (chart value maxAffinity)',
};

export class MigrationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(`${message}. The old datapath keeps serving; the agent did not start`, options);
    this.name = 'MigrationError';
  }
}

interface Moving {
  move: MapMove;
  old: BpfMap;
  conv: Converter;
  copied?: Map<string, { key: Buffer; values: Values }>;
}

export interface MigrationReport {
  map: string;
  why: string;
  copied: number;
  caughtUp: number;
  dropped: string[];
  zeroed: string[];
}

export class Migration {
  readonly pinDir: string;
  readonly moves: readonly MapMove[];
  readonly #moving: Moving[] = [];
  readonly #log: (msg: string, fields?: object) => void;
  #swapped = false;
  /** How long new tc flows were held (SVCMAP_CFG_MIGRATION_HOLD), when they were. */
  holdMs: number | undefined;

  constructor(pinDir: string, moves: readonly MapMove[], log: (msg: string, fields?: object) => void) {
    this.pinDir = pinDir;
    this.moves = moves;
    this.#log = log;
  }

  /** Pin paths for the loader: each moving map's new pin. Clears what an earlier, failed attempt left there. */
  pinPaths(): Map<string, string> {
    removePins(migratingDir(this.pinDir));
    mkdirSync(migratingDir(this.pinDir), { recursive: true });
    return new Map(this.moves.map((m) => [m.spec.name, m.newPinPath]));
  }

  /** Copies every entry of each old map into its new one (the new datapath is loaded, nothing swapped yet). */
  copy(newMap: (name: string) => BpfMap): void {
    for (const move of this.moves) {
      const old = BpfMap.openPinned(move.pinPath);
      const conv = converter(
        move.from.layout,
        move.to.layout,
        typeof move.from.version === 'number' && typeof move.to.version === 'number'
          ? overrideFor(move.spec.name, move.from.version, move.to.version)
          : undefined,
      );
      const moving: Moving = { move, old, conv };
      this.#moving.push(moving);
      if (move.spec.listable === false) continue; // socket storage: user space cannot list it (docs/upgrade.md)
      try {
        moving.copied = copyAll(old, newMap(move.spec.name), conv);
      } catch (err) {
        if (err instanceof CapacityError) {
          const flag = move.spec.size ? FLAG[move.spec.size] : undefined;
          throw new MigrationError(
            `map ${move.spec.name} holds ${err.entries} entries, more than the ${err.capacity} of its new map${
              flag ? `: set ${flag} to at least ${err.entries}` : ''
            }`,
            { cause: err },
          );
        }
        throw new MigrationError(`copying the entries of map ${move.spec.name} (${move.why}) failed: ${(err as Error).message}`, {
          cause: err,
        });
      }
    }
  }

  /**
   * Puts the new programs in every pinned link (cgroup hooks and tcx links,
   * by program name), each in one BPF_LINK_UPDATE. When one fails, the
   * links swapped so far get their old programs back.
   */
  swap(objects: readonly BpfObject[], newMap: (name: string) => BpfMap): number {
    const hold = this.moves.some((m) => FLOW_MAPS.has(m.spec.name));
    // Once before the hold too: what is left for the merge under it is what changed in that merge's time.
    if (hold) this.#merge(newMap);
    const from = performance.now();
    if (hold) this.#hold([BpfMap.openPinned(join(this.pinDir, configMap.name))], true);
    try {
      return this.#swap(objects, newMap);
    } finally {
      if (hold) {
        this.#hold([BpfMap.openPinned(join(this.pinDir, configMap.name)), newMap(configMap.name)], false);
        this.holdMs = Math.round((performance.now() - from) * 10) / 10;
      }
    }
  }

  /** Sets or clears SVCMAP_CFG_MIGRATION_HOLD in these svcmap_cfg maps (closed after). */
  #hold(maps: BpfMap[], on: boolean): void {
    const zero = Buffer.alloc(4);
    for (const m of maps) {
      try {
        if (m.valueSize !== configValue.layout.size) continue; // another layout's: its programs know no hold
        const v = m.lookup(zero);
        if (!v) continue;
        const cfg = configValue.decode(v, 0);
        cfg.flags = on ? cfg.flags | SVCMAP_CFG_MIGRATION_HOLD : cfg.flags & ~SVCMAP_CFG_MIGRATION_HOLD;
        configValue.encode(cfg, v, 0);
        m.update(zero, v);
      } finally {
        m.close();
      }
    }
  }

  /** What the old programs changed since the last copy, into the new maps (counters wait for finish()). */
  #merge(newMap: (name: string) => BpfMap): void {
    for (const m of this.#moving) {
      if (!m.copied || COUNTER_MAPS.has(m.move.spec.name)) continue;
      m.copied = mergeChanges(m.old, newMap(m.move.spec.name), m.conv, m.copied).now;
    }
  }

  #swap(objects: readonly BpfObject[], newMap: (name: string) => BpfMap): number {
    // What the old programs wrote since the copy, once more just before: the window after the swap is shorter.
    this.#merge(newMap);
    const dir = linkPinDir(this.pinDir);
    const done: Array<{ path: string; oldProgId: number }> = [];
    try {
      for (const name of existsSync(dir) ? readdirSync(dir).sort() : []) {
        const path = join(dir, name);
        const fd = openPinned(path);
        if (fd === undefined) continue;
        try {
          const oldProgId = linkInfo(fd).progId;
          // The kernel keeps 15 characters of a program's name.
          const short = progInfoById(oldProgId)?.name;
          const object = short ? objects.find((o) => o.programs().some((p) => p.name.slice(0, 15) === short)) : undefined;
          const program = object?.programs().find((p) => p.name.slice(0, 15) === short)?.name;
          if (!object || !program) continue; // not one of ours to swap (the agent attaches or removes it later)
          updateLink(fd, object.programFd(program));
          done.push({ path, oldProgId });
        } finally {
          closeSync(fd);
        }
      }
    } catch (err) {
      for (const { path, oldProgId } of done.reverse()) restoreLink(path, oldProgId);
      throw new MigrationError(`swapping the programs of the pinned links in ${dir} failed: ${(err as Error).message}`, { cause: err });
    }
    this.#swapped = true;
    return done.length;
  }

  /** After swap(): what the old programs wrote meanwhile, then the new pins take the old ones' names. */
  finish(newMap: (name: string) => BpfMap): MigrationReport[] {
    if (!this.#swapped) throw new Error('migration: finish() before swap()');
    const reports: MigrationReport[] = [];
    for (const { move, old, conv, copied } of this.#moving) {
      let caughtUp = 0;
      if (copied) {
        const to = newMap(move.spec.name);
        try {
          caughtUp = COUNTER_MAPS.has(move.spec.name) ? addCounted(old, to, conv, copied) : mergeChanges(old, to, conv, copied).changed;
        } catch (err) {
          // The new datapath serves already; what the old programs wrote last is what is lost.
          this.#log('catching up on the old map failed; entries its programs wrote during the migration are lost', {
            map: move.spec.name,
            err: String(err),
          });
        }
      }
      old.close();
      renameSync(move.newPinPath, move.pinPath);
      reports.push({
        map: move.spec.name,
        why: move.why,
        copied: copied?.size ?? 0,
        caughtUp,
        ...fieldChanges(move.from.layout, move.to.layout),
      });
    }
    rmdirSync(migratingDir(this.pinDir));
    return reports;
  }

  /** Before swap(): the new pins go, the old datapath is as it was. */
  abort(): void {
    for (const { old } of this.#moving) old.close();
    removePins(migratingDir(this.pinDir));
  }
}

function removePins(dir: string): void {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) unlinkSync(join(dir, name));
  rmdirSync(dir);
}

function restoreLink(path: string, progId: number): void {
  const fd = openPinned(path);
  if (fd === undefined) return;
  try {
    const prog = native().progGetFdById(progId) as number;
    if (prog < 0) return;
    try {
      updateLink(fd, prog);
    } finally {
      closeSync(prog);
    }
  } finally {
    closeSync(fd);
  }
}
