// The file source for local runs and demos: a directory of manifests in, a
// desired state out, again on every change. Loading, building and watching
// live in their own modules; this class only sequences them.

import type { DesiredState, NodeInfo, Problem } from '../../model/types.ts';
import { buildDesiredState, nodeInfoFromNode } from '../../model/desired.ts';
import type { EndpointSlice, Node, Service } from '../../model/schemas.ts';
import { loadManifestDir, type LoadResult } from './load.ts';
import { watchManifestDir, type DirWatch } from './watch.ts';

export interface FileSourceOptions {
  dir: string;
  /** The agent's node. Takes precedence over `nodeName`. */
  node?: NodeInfo;
  /** Look the node up among the manifests' Node objects by this name (addresses empty when absent). */
  nodeName?: string;
  debounceMs?: number;
  /** A reload failed (e.g. the directory is briefly missing); the last state stays in force. */
  onError?: (err: unknown) => void;
  /** The node as the manifests describe it (name and addresses), before each state is emitted. */
  onNode?: (node: NodeInfo | undefined) => void;
}

export type StateListener = (state: DesiredState, problems: Problem[]) => void;

export class FileSource {
  readonly #opts: FileSourceOptions;
  #watch: DirWatch | undefined;
  #listener: StateListener | undefined;
  #loading = false;
  #again = false;
  #stopped = false;

  constructor(opts: FileSourceOptions) {
    this.#opts = opts;
  }

  /**
   * Loads the directory, emits the first state, then re-emits after every
   * change. Rejects if the first load fails (a wrong path should fail fast).
   */
  async start(onState: StateListener): Promise<void> {
    if (this.#listener !== undefined) throw new Error('FileSource already started');
    this.#listener = onState;
    this.#loading = true; // changes seen during the first load queue one reload
    try {
      // Watch before reading so a change made while we read is not lost.
      this.#watch = watchManifestDir(this.#opts.dir, () => void this.#reload(), {
        ...(this.#opts.debounceMs === undefined ? {} : { debounceMs: this.#opts.debounceMs }),
      });
      this.#emit(await loadManifestDir(this.#opts.dir));
    } catch (err) {
      this.stop();
      throw err;
    } finally {
      this.#loading = false;
    }
    if (this.#again) void this.#reload();
  }

  stop(): void {
    this.#stopped = true;
    this.#watch?.close();
    this.#watch = undefined;
  }

  /** One reload at a time; changes during a reload cause exactly one more. */
  async #reload(): Promise<void> {
    if (this.#loading) {
      this.#again = true;
      return;
    }
    this.#loading = true;
    try {
      do {
        this.#again = false;
        try {
          this.#emit(await loadManifestDir(this.#opts.dir));
        } catch (err) {
          this.#opts.onError?.(err);
        }
      } while (this.#again && !this.#stopped);
    } finally {
      this.#loading = false;
    }
  }

  #emit(loaded: LoadResult): void {
    if (this.#stopped) return;
    const services: Service[] = [];
    const slices: EndpointSlice[] = [];
    const nodes: Node[] = [];
    for (const { obj } of loaded.objects) {
      if (obj.kind === 'Service') services.push(obj);
      else if (obj.kind === 'EndpointSlice') slices.push(obj);
      else nodes.push(obj);
    }
    const node = this.#node(nodes);
    this.#opts.onNode?.(node);
    const built = buildDesiredState(node === undefined ? { services, slices } : { services, slices, node });
    this.#listener?.(built.state, [...loaded.problems, ...built.problems]);
  }

  #node(nodes: Node[]): NodeInfo | undefined {
    if (this.#opts.node !== undefined) return this.#opts.node;
    const name = this.#opts.nodeName;
    if (name === undefined) return undefined;
    const found = nodes.find((n) => n.metadata.name === name);
    return found === undefined ? { name, addresses: [] } : nodeInfoFromNode(found);
  }
}
