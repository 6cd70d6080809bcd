// A compiled BPF ELF object: open, size and pin its maps, load its programs
// (with the verifier log on failure), and hand out map and program fds.
import { existsSync } from 'node:fs';
import { BpfError } from './errors.ts';
import { BpfMap, libbpfText } from './map.ts';
import { type Ptr, native, takeLibbpfLog } from './native.ts';

export interface ObjectMap {
  name: string;
  handle: Ptr;
  /** Where the map is pinned (or reused) at load: set for maps the C code declares LIBBPF_PIN_BY_NAME, when opened with a pin directory. */
  pinPath: string | undefined;
}

export interface ObjectProgram {
  name: string;
  section: string;
  handle: Ptr;
}

const LOG_SIZE = 16 * 1024 * 1024;

export class BpfObject {
  readonly path: string;
  #handle: Ptr | null;
  #logBuf: Buffer;
  #loaded = false;

  private constructor(path: string, handle: Ptr, logBuf: Buffer) {
    this.path = path;
    this.#handle = handle;
    this.#logBuf = logBuf;
  }

  /**
   * pinDir: the directory the maps declared LIBBPF_PIN_BY_NAME are pinned
   * in (an existing pin is reused at load). Without it the object is a
   * private copy: none of its maps is pinned.
   */
  static open(path: string, pinDir?: string): BpfObject {
    if (!existsSync(path)) throw new Error(`BPF object ${path} does not exist`);
    // Not zero-filled: untouched pages cost no memory, and the kernel writes only
    // on a failed load (NUL-terminated; the first byte is cleared for the no-log case).
    const logBuf = Buffer.allocUnsafeSlow(LOG_SIZE);
    logBuf[0] = 0;
    takeLibbpfLog();
    const handle = native().open(path, pinDir ?? null, logBuf, logBuf.length, 0) as Ptr | null;
    if (!handle) {
      const log = takeLibbpfLog();
      throw new BpfError(`open BPF object ${path}`, -22, 'libbpf could not parse the object', log);
    }
    return new BpfObject(path, handle, logBuf);
  }

  get handle(): Ptr {
    if (this.#handle === null) throw new Error(`BPF object ${this.path} is closed`);
    return this.#handle;
  }

  maps(): ObjectMap[] {
    const out: ObjectMap[] = [];
    let m = native().objectNextMap(this.handle, null) as Ptr | null;
    while (m) {
      out.push({ name: native().mapName(m) as string, handle: m, pinPath: (native().mapPinPath(m) as string | null) ?? undefined });
      m = native().objectNextMap(this.handle, m) as Ptr | null;
    }
    return out;
  }

  programs(): ObjectProgram[] {
    const out: ObjectProgram[] = [];
    let p = native().objectNextProgram(this.handle, null) as Ptr | null;
    while (p) {
      out.push({ name: native().programName(p) as string, section: native().programSectionName(p) as string, handle: p });
      p = native().objectNextProgram(this.handle, p) as Ptr | null;
    }
    return out;
  }

  #map(name: string): Ptr {
    const m = this.maps().find((x) => x.name === name);
    if (!m) throw new Error(`BPF object ${this.path} has no map ${name}`);
    return m.handle;
  }

  #program(name: string): Ptr {
    const p = this.programs().find((x) => x.name === name);
    if (!p) throw new Error(`BPF object ${this.path} has no program ${name}`);
    return p.handle;
  }

  mapMaxEntries(name: string): number {
    return native().mapMaxEntries(this.#map(name)) as number;
  }

  mapKeySize(name: string): number {
    return native().mapKeySize(this.#map(name)) as number;
  }

  mapValueSize(name: string): number {
    return native().mapValueSize(this.#map(name)) as number;
  }

  /** BPF_MAP_TYPE_* as the C definition gives it. */
  mapType(name: string): number {
    return native().mapType(this.#map(name)) as number;
  }

  mapFlags(name: string): number {
    return native().mapFlags(this.#map(name)) as number;
  }

  /** Where a map is pinned (or its pin reused) at load, in place of pinDir/NAME. */
  setPinPath(name: string, path: string): void {
    const rc = native().mapSetPinPath(this.#map(name), path) as number;
    if (rc < 0) throw new BpfError(`set the pin path of ${name}`, rc, libbpfText(rc));
  }

  setMaxEntries(name: string, maxEntries: number): void {
    const rc = native().mapSetMaxEntries(this.#map(name), maxEntries) as number;
    if (rc < 0) throw new BpfError(`set max_entries of ${name}`, rc, libbpfText(rc));
  }

  load(): void {
    takeLibbpfLog();
    const rc = native().objectLoad(this.handle) as number;
    if (rc < 0) {
      const verifier = cStringTail(this.#logBuf, 200);
      const libbpf = takeLibbpfLog();
      const log = [libbpf.trim(), verifier ? `verifier log (last lines):\n${verifier}` : ''].filter(Boolean).join('\n');
      throw new BpfError(`load BPF object ${this.path}`, rc, libbpfText(rc), log);
    }
    this.#loaded = true;
    // The log buffer is only needed for loading; free it.
    this.#logBuf = Buffer.alloc(0);
  }

  programFd(name: string): number {
    if (!this.#loaded) throw new Error(`BPF object ${this.path} is not loaded`);
    const fd = native().programFd(this.#program(name)) as number;
    if (fd < 0) throw new BpfError(`fd of program ${name}`, fd, libbpfText(fd));
    return fd;
  }

  /** A map of the loaded object; the fd stays owned by the object (do not close it). */
  map(name: string): BpfMap {
    if (!this.#loaded) throw new Error(`BPF object ${this.path} is not loaded`);
    const fd = native().mapFd(this.#map(name)) as number;
    if (fd < 0) throw new BpfError(`fd of map ${name}`, fd, libbpfText(fd));
    return new BpfMap(fd, name, false);
  }

  /** The object's BTF handle (owned by the object). */
  btf(): Ptr {
    const b = native().objectBtf(this.handle) as Ptr | null;
    if (!b) throw new Error(`BPF object ${this.path} has no BTF (compile with clang -g)`);
    return b;
  }

  close(): void {
    if (this.#handle === null) return;
    native().objectClose(this.#handle);
    this.#handle = null;
  }
}

function cStringTail(buf: Buffer, lines: number): string {
  const end = buf.indexOf(0);
  const text = buf.toString('utf8', 0, end < 0 ? buf.length : end).trimEnd();
  return text.split('\n').slice(-lines).join('\n');
}
