// Keys to sets of strings, for indexes whose sets almost always hold one
// value (a Service's EndpointSlices, the Services claiming a frontend, a
// Service's frontends in the maps): a lone value is stored as itself, a Set
// only from the second one on. At 10k Services each of those indexes held
// 10k one-element Sets, ~1.5 MiB apiece. Here (the lowest layer that uses
// it) so that the model and the sync engine share it.
export class OneToMany {
  readonly #m = new Map<string, string | Set<string>>();

  add(key: string, value: string): void {
    const cur = this.#m.get(key);
    if (cur === undefined) this.#m.set(key, value);
    else if (typeof cur === 'string') {
      if (cur !== value) this.#m.set(key, new Set([cur, value]));
    } else cur.add(value);
  }

  /** Removes one value; the key goes with its last one. */
  remove(key: string, value: string): void {
    const cur = this.#m.get(key);
    if (cur === undefined) return;
    if (typeof cur === 'string') {
      if (cur === value) this.#m.delete(key);
    } else if (cur.delete(value) && cur.size === 1) this.#m.set(key, cur.values().next().value!);
  }

  /** Removes the key and all its values. */
  clear(key: string): void {
    this.#m.delete(key);
  }

  /** The values of a key, in the order they were added (none: empty). */
  values(key: string): Iterable<string> {
    const cur = this.#m.get(key);
    return cur === undefined ? [] : typeof cur === 'string' ? [cur] : cur;
  }
}
