// The file source for local runs and demos: a directory of manifests in, the
// incremental model out (the one the Kubernetes source feeds, so that one
// sync loop serves both). Each file is read, parsed and validated on its own;
// after a change only the files the watcher named (or, after a rescan, those
// whose inode, size or times changed) are read again, and only their objects
// reach the model: a changed file costs what it holds, a removed file removes
// only its objects. When two files define one object the later file (by
// name) wins, as in loadManifestDir.

import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { IncrementalModel } from '../../model/incremental.ts';
import { nodeInfoFromNode } from '../../model/node.ts';
import type { KubeObject, Node } from '../../model/schemas.ts';
import type { NodeInfo } from '../../model/types.ts';
import { duplicateProblem, isManifestName, type LoadedFile, loadManifestFile, objectKeyOf } from './load.ts';
import { type ChangeHint, type DirWatch, watchManifestDir } from './watch.ts';

/** What the agent logs (debug) for onRead: tests that write a file wait for it. */
export const MANIFEST_READ = 'manifest read';

export interface FileSourceOptions {
  dir: string;
  /** The agent's node. Takes precedence over `nodeName`. */
  node?: NodeInfo;
  /** Look the node up among the manifests' Node objects by this name (addresses empty when absent). */
  nodeName?: string;
  debounceMs?: number;
  /** The model changed: run a sync soon. */
  changed?: () => void;
  /** A Service / EndpointSlice was added, changed or removed (a file's new version of it; an unchanged document is no event). */
  event?: (kind: 'Service' | 'EndpointSlice') => void;
  /** A reload failed (e.g. the directory is briefly missing); the model keeps what it had. */
  onError?: (err: unknown) => void;
  /** The node as the manifests describe it (name and addresses): after the first read, and whenever it changes. */
  onNode?: (node: NodeInfo | undefined) => void;
  /** A file was read again (or found gone) and its objects given to the model: its path. */
  onRead?: (file: string) => void;
}

interface FileEntry {
  /** Device, inode, size, mtime and ctime (ns) when it was read: a rescan skips a file whose signature is unchanged. */
  sig: string;
  /** Its objects by kind/namespace/name (a later duplicate in the file wins). */
  objects: Map<string, KubeObject>;
  /** Its zod-validated objects by fingerprint: the next read reuses those whose documents did not change (load.ts). */
  byPrint: Map<string, KubeObject>;
}

function isENOENT(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | null)?.code === 'ENOENT';
}

export class FileSource {
  readonly model = new IncrementalModel();
  readonly #opts: FileSourceOptions;
  #watch: DirWatch | undefined;
  #started = false;
  #synced = false;
  #stopped = false;
  /** By file name (in the directory). */
  readonly #files = new Map<string, FileEntry>();
  /** Object key -> the files that define it, sorted: the last one wins. */
  readonly #owners = new Map<string, string[]>();
  /** The node last given to the model, as JSON. */
  #nodeTold: string | undefined;
  #busy = false;
  #pendingAll = false;
  #pendingNames = new Set<string>();

  constructor(opts: FileSourceOptions) {
    this.#opts = opts;
  }

  /** True once the whole directory has been read. */
  get isSynced(): boolean {
    return this.#synced;
  }

  /**
   * Reads the directory into the model, then follows its changes. Rejects if
   * the first read fails (a wrong path should fail fast).
   */
  async start(): Promise<void> {
    if (this.#started) throw new Error('FileSource already started');
    this.#started = true;
    this.#busy = true; // changes seen during the first read wait for it
    try {
      // Watch before reading so a change made while we read is not lost.
      this.#watch = watchManifestDir(this.#opts.dir, (hint) => this.#changed(hint), {
        ...(this.#opts.debounceMs === undefined ? {} : { debounceMs: this.#opts.debounceMs }),
      });
      await this.#rescan();
    } catch (err) {
      this.stop();
      throw err;
    } finally {
      this.#busy = false;
    }
    this.#synced = true;
    this.#settled();
    void this.#drain();
  }

  stop(): void {
    this.#stopped = true;
    this.#watch?.close();
    this.#watch = undefined;
  }

  #changed(hint: ChangeHint): void {
    if (hint.all) this.#pendingAll = true;
    for (const n of hint.names) this.#pendingNames.add(n);
    void this.#drain();
  }

  /** One pass at a time; what changes meanwhile is the next pass. */
  async #drain(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      while (!this.#stopped && (this.#pendingAll || this.#pendingNames.size > 0)) {
        const all = this.#pendingAll;
        const names = this.#pendingNames;
        this.#pendingAll = false;
        this.#pendingNames = new Set();
        try {
          if (all) await this.#rescan();
          else for (const name of [...names].sort()) if (isManifestName(name)) await this.#refresh(name);
        } catch (err) {
          this.#opts.onError?.(err);
        }
        this.#settled();
      }
    } finally {
      this.#busy = false;
    }
  }

  /** Every manifest file in the directory against what was read: new and changed ones are read, vanished ones removed. Rejects when the directory cannot be read. */
  async #rescan(): Promise<void> {
    const names = (await readdir(this.#opts.dir)).filter(isManifestName).sort();
    const present = new Set(names);
    for (const name of [...this.#files.keys()]) if (!present.has(name)) this.#gone(name);
    for (const name of names) await this.#refresh(name);
  }

  /** Re-reads one file if it changed since it was read (or removes it, gone). */
  async #refresh(name: string): Promise<void> {
    const file = join(this.#opts.dir, name);
    let sig: string | undefined;
    try {
      // stat follows symlinks: ConfigMap volumes present files as links into ..data/.
      const st = await stat(file, { bigint: true });
      sig = st.isFile() ? `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}` : undefined;
    } catch (err) {
      if (!isENOENT(err)) sig = `unreadable: ${(err as Error).message}`; // loadManifestFile reports it
    }
    const known = this.#files.get(name);
    if (sig === undefined) {
      if (known) this.#gone(name);
      return;
    }
    if (known?.sig === sig) return;
    const loaded = await loadManifestFile(file, known && { byKey: known.objects, byPrint: known.byPrint });
    if (this.#stopped) return;
    this.#apply(name, loaded && { sig, loaded });
    this.#opts.onRead?.(file);
  }

  #gone(name: string): void {
    this.#apply(name, undefined);
    this.#opts.onRead?.(join(this.#opts.dir, name));
  }

  /** The file now holds this (undefined: it is gone): its objects in the model are replaced, nobody else's. */
  #apply(name: string, next: { sig: string; loaded: LoadedFile } | undefined): void {
    const file = join(this.#opts.dir, name);
    const before = this.#files.get(name)?.objects ?? new Map<string, KubeObject>();
    const objects = new Map<string, KubeObject>();
    const byPrint = new Map<string, KubeObject>();
    const problems = [...(next?.loaded.problems ?? [])];
    next?.loaded.objects.forEach((obj, i) => {
      const key = objectKeyOf(obj);
      if (objects.delete(key)) problems.push(duplicateProblem(obj, file, undefined));
      objects.set(key, obj);
      const print = next.loaded.prints[i];
      if (print !== undefined) byPrint.set(print, obj);
    });
    if (next) this.#files.set(name, { sig: next.sig, objects, byPrint });
    else this.#files.delete(name);
    this.model.sourceProblems(`file ${file}`, problems);

    for (const key of new Set([...before.keys(), ...objects.keys()])) {
      const had = before.has(key);
      const has = objects.has(key);
      const was = this.#owners.get(key) ?? [];
      let owners = was;
      if (had && !has) owners = was.filter((n) => n !== name);
      else if (!had && has) owners = was.length === 0 ? [name] : [...was, name].sort();
      if (owners.length) this.#owners.set(key, owners);
      else this.#owners.delete(key);
      // Only an object defined twice (now or before) has duplicate problems to report or to clear.
      if (owners.length > 1 || (owners !== was && was.length > 1)) this.#reportDuplicates(key, owners);
      const winner = owners.at(-1);
      if (winner === undefined) this.#remove(before.get(key)!);
      else if (winner === name) {
        // An unchanged document is the same object: the model is not told (its Service is not recomputed).
        if (objects.get(key) !== before.get(key) || winner !== was.at(-1)) this.#upsert(objects.get(key)!);
      } else if (winner !== was.at(-1)) this.#upsert(this.#files.get(winner)!.objects.get(key)!);
      // else: a later file's definition still wins
    }
  }

  #reportDuplicates(key: string, owners: readonly string[]): void {
    const problems = [];
    for (let i = 1; i < owners.length; i++) {
      const obj = this.#files.get(owners[i]!)!.objects.get(key)!;
      problems.push(duplicateProblem(obj, join(this.#opts.dir, owners[i]!), join(this.#opts.dir, owners[i - 1]!)));
    }
    this.model.sourceProblems(`defined twice ${key}`, problems);
  }

  #upsert(obj: KubeObject): void {
    if (obj.kind === 'Service' || obj.kind === 'EndpointSlice') this.#opts.event?.(obj.kind);
    if (obj.kind === 'Service') this.model.upsertService(obj);
    else if (obj.kind === 'EndpointSlice') this.model.upsertSlice(obj);
    // Pods: the model serves the hostPorts of those on this node.
    else if (obj.kind === 'Pod') this.model.upsertPod(obj);
    // Namespaces: their svcmap.io/socket-lb.
    else if (obj.kind === 'Namespace') this.model.socketLb.upsertNamespace(obj);
    // Nodes: #settled() looks ours up
  }

  #remove(obj: KubeObject): void {
    if (obj.kind === 'Service' || obj.kind === 'EndpointSlice') this.#opts.event?.(obj.kind);
    if (obj.kind === 'Service') this.model.deleteService(obj.metadata.namespace, obj.metadata.name);
    else if (obj.kind === 'EndpointSlice') this.model.deleteSlice(obj.metadata.namespace, obj.metadata.name);
    else if (obj.kind === 'Pod') this.model.deletePod(obj.metadata.namespace, obj.metadata.name);
    else if (obj.kind === 'Namespace') this.model.socketLb.deleteNamespace(obj.metadata.name);
  }

  /** After a pass: the node (it may have changed with its Node object), and a sync. */
  #settled(): void {
    if (this.#stopped) return;
    const node = this.#node();
    const json = JSON.stringify(node ?? null);
    if (json !== this.#nodeTold) {
      this.#nodeTold = json;
      this.model.setNode(node);
      this.#opts.onNode?.(node);
    }
    this.#opts.changed?.();
  }

  #node(): NodeInfo | undefined {
    if (this.#opts.node !== undefined) return this.#opts.node;
    const name = this.#opts.nodeName;
    if (name === undefined) return undefined;
    const key = `Node//${name}`;
    const owner = this.#owners.get(key)?.at(-1);
    const found = owner === undefined ? undefined : (this.#files.get(owner)?.objects.get(key) as Node | undefined);
    return found === undefined ? { name, addresses: [] } : nodeInfoFromNode(found);
  }
}
