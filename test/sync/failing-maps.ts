// A map layer that fails on purpose, wrapped around another (the in-memory
// maps, or the real ones through MapsAdapter). Each non-empty batch write
// asks `fail` how many of its elements to write before failing: a number
// makes the batch write that many and throw, as the kernel does when a batch
// stops part way (it writes in order and reports how far it got); undefined
// lets it through. Reads are counted, so a test can tell a read-back (lookups)
// from a re-read of every map.
import type { BackendValue, RevNatValue, SrcRangeKey, SvcKey, SvcValue } from '../../src/maps/codecs.ts';
import type { MapWriter } from '../../src/sync/apply.ts';
import type { Capacity, SlotWrite } from '../../src/sync/plan.ts';
import type { MapState } from '../../src/sync/state.ts';
import type { MapSource } from '../../src/sync/syncer.ts';

export interface Batch {
  /** The MapWriter method. */
  name: keyof MapWriter;
  /** Non-empty batches since the wrapper was made, this one included. */
  n: number;
  size: number;
}

export class InjectedFailure extends Error {}

export class FailingMaps<M extends MapSource & MapWriter = MapSource & MapWriter> implements MapSource, MapWriter {
  readonly inner: M;
  /** Elements to write before failing this batch, or undefined: write it all. */
  fail: (b: Batch) => number | undefined = () => undefined;
  /** Called after every batch that went through whole (a reader's view between phases). */
  afterBatch: (b: Batch) => void = () => {};
  batches = 0;
  failures = 0;
  fullReads = 0;
  lookups = 0;
  /** Makes the lookups throw (a read-back that fails too). */
  failLookups = false;

  constructor(inner: M) {
    this.inner = inner;
  }

  #batch<T>(name: keyof MapWriter, items: readonly T[], write: (items: readonly T[]) => void): void {
    if (items.length === 0) return write(items);
    const b: Batch = { name, n: ++this.batches, size: items.length };
    const written = this.fail(b);
    if (written === undefined) {
      write(items);
      this.afterBatch(b);
      return;
    }
    if (written > 0) write(items.slice(0, written));
    this.failures++;
    throw new InjectedFailure(`injected failure in ${name} (batch ${b.n}) after ${written} of ${items.length}`);
  }

  #lookup<T>(n: number, read: () => T): T {
    if (this.failLookups) throw new InjectedFailure('injected lookup failure');
    this.lookups += n;
    return read();
  }

  readState(): MapState {
    this.fullReads++;
    return this.inner.readState();
  }
  capacity(): Capacity {
    return this.inner.capacity();
  }
  lookupServices(keys: readonly SvcKey[]) {
    return this.#lookup(keys.length, () => this.inner.lookupServices(keys));
  }
  lookupBackends(ids: readonly number[]) {
    return this.#lookup(ids.length, () => this.inner.lookupBackends(ids));
  }
  lookupRevNat(ids: readonly number[]) {
    return this.#lookup(ids.length, () => this.inner.lookupRevNat(ids));
  }
  readSrcRanges() {
    return this.#lookup(1, () => this.inner.readSrcRanges());
  }

  putBackends(e: ReadonlyArray<readonly [number, BackendValue]>) {
    this.#batch('putBackends', e, (x) => this.inner.putBackends(x));
  }
  putRevNat(e: ReadonlyArray<readonly [number, RevNatValue]>) {
    this.#batch('putRevNat', e, (x) => this.inner.putRevNat(x));
  }
  putServices(e: ReadonlyArray<readonly [SvcKey, SvcValue]>) {
    this.#batch('putServices', e, (x) => this.inner.putServices(x));
  }
  putSlots(s: readonly SlotWrite[]) {
    this.#batch('putSlots', s, (x) => this.inner.putSlots(x));
  }
  putSrcRanges(k: readonly SrcRangeKey[]) {
    this.#batch('putSrcRanges', k, (x) => this.inner.putSrcRanges(x));
  }
  deleteSrcRanges(k: readonly SrcRangeKey[]) {
    this.#batch('deleteSrcRanges', k, (x) => this.inner.deleteSrcRanges(x));
  }
  deleteServices(k: readonly SvcKey[]) {
    this.#batch('deleteServices', k, (x) => this.inner.deleteServices(x));
  }
  deleteRevNat(ids: readonly number[]) {
    this.#batch('deleteRevNat', ids, (x) => this.inner.deleteRevNat(x));
  }
  deleteBackends(ids: readonly number[]) {
    this.#batch('deleteBackends', ids, (x) => this.inner.deleteBackends(x));
  }
  putMaglev(tb: ReadonlyArray<readonly [number, Uint16Array]>) {
    this.#batch('putMaglev', tb, (x) => this.#maglev().putMaglev(x));
  }
  deleteMaglev(ids: readonly number[]) {
    this.#batch('deleteMaglev', ids, (x) => this.#maglev().deleteMaglev(x));
  }
  #maglev(): Required<Pick<MapWriter, 'putMaglev' | 'deleteMaglev'>> {
    if (!this.inner.putMaglev || !this.inner.deleteMaglev) throw new Error('the wrapped maps cannot write Maglev tables');
    return this.inner as Required<Pick<MapWriter, 'putMaglev' | 'deleteMaglev'>>;
  }
}
