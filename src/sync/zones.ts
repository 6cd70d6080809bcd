// Zone names for the backends' zone ids (svcmap_zones): a backend entry
// carries a __u16 zone id, this table its name, for svcmap dump (the
// datapath reads neither; the model applies zone hints). Ordering, as for
// the other maps: a new name is written before any backend entry names its
// id (publish(), before the sync), and a name is deleted only once no
// backend entry names it (prune(), after a full sync), so every id a
// backend holds has its name. Ids are kept across restarts (read back).
import { SVCMAP_ZONE_NAME_LEN, SVCMAP_ZONES_MAX } from '../maps/constants.ts';
import type { ZoneName } from '../maps/codecs.ts';

/** What the table needs of svcmap_zones (a TypedMap). */
export interface ZoneMap {
  entries(): Array<[number, ZoneName]>;
  put(id: number, v: ZoneName): void;
  delete(id: number): boolean;
}

export class ZoneNames {
  readonly #map: ZoneMap;
  readonly #ids = new Map<string, number>();
  readonly #names = new Map<number, string>();
  /** Ids handed out and not yet written. */
  readonly #pending = new Set<number>();
  /** Names already reported as unusable (too long, table full): reported once each. */
  readonly #reported = new Set<string>();
  readonly #onProblem: (msg: string, name: string) => void;

  constructor(map: ZoneMap, onProblem: (msg: string, name: string) => void = () => {}) {
    this.#map = map;
    this.#onProblem = onProblem;
    for (const [id, v] of map.entries()) {
      this.#ids.set(v.name, id);
      this.#names.set(id, v.name);
    }
  }

  /** The id of zone `name` (allocated when new, written by publish()); 0 for none, or for a name that cannot be stored. */
  id(name: string | undefined): number {
    if (!name) return 0;
    const known = this.#ids.get(name);
    if (known !== undefined) return known;
    if (Buffer.byteLength(name, 'utf8') >= SVCMAP_ZONE_NAME_LEN)
      return this.#unusable(name, `zone name longer than ${SVCMAP_ZONE_NAME_LEN - 1} bytes: its backends show no zone`);
    let id = 1;
    while (this.#names.has(id)) id++;
    if (id > SVCMAP_ZONES_MAX) return this.#unusable(name, `more than ${SVCMAP_ZONES_MAX} zones: the backends of this one show no zone`);
    this.#ids.set(name, id);
    this.#names.set(id, name);
    this.#pending.add(id);
    return id;
  }

  /** Writes the names handed out since the last publish (before the backends that name them). Throws when a write fails; what failed stays pending. */
  publish(): void {
    for (const id of [...this.#pending]) {
      this.#map.put(id, { name: this.#names.get(id)! });
      this.#pending.delete(id);
    }
  }

  /**
   * Deletes the names of ids no backend holds (call after a full sync, with
   * every id the backend maps hold). A name whose delete fails is kept, and
   * tried again by the next prune: an unused name harms nothing.
   */
  prune(inUse: ReadonlySet<number>): void {
    for (const [id, name] of [...this.#names]) {
      if (inUse.has(id) || this.#pending.has(id)) continue;
      try {
        this.#map.delete(id);
      } catch {
        continue;
      }
      this.#names.delete(id);
      this.#ids.delete(name);
    }
  }

  /** The names the table holds, by id. */
  get names(): ReadonlyMap<number, string> {
    return this.#names;
  }

  #unusable(name: string, msg: string): number {
    if (!this.#reported.has(name)) {
      this.#reported.add(name);
      this.#onProblem(msg, name);
    }
    return 0;
  }
}
