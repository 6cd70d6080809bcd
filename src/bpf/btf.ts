// Struct layouts as the compiler laid them out, read from BTF (the compiled
// object's or any ELF/raw BTF file). The map codecs are checked against these.
import { BpfError } from './errors.ts';
import { libbpfText } from './map.ts';
import { type Ptr, cString, native } from './native.ts';

export interface BtfMember {
  name: string;
  /** Byte offset; bitfields are reported with bitfieldSize > 0. */
  offset: number;
  size: number;
  bitOffset: number;
  bitfieldSize: number;
}

export interface BtfStruct {
  name: string;
  size: number;
  members: BtfMember[];
}

/** The layout of `struct name`, or undefined when the BTF has no such struct. */
export function btfStruct(btf: Ptr, name: string): BtfStruct | undefined {
  const size = Buffer.alloc(4);
  const count = Buffer.alloc(4);
  const rc = native().btfStruct(btf, name, size, count) as number;
  if (rc === -2) return undefined; // ENOENT
  if (rc < 0) throw new BpfError(`BTF struct ${name}`, rc, libbpfText(rc));
  const members: BtfMember[] = [];
  for (let i = 0; i < count.readUInt32LE(); i++) {
    const mname = Buffer.alloc(128);
    const bitOffset = Buffer.alloc(4);
    const bitfield = Buffer.alloc(4);
    const msize = Buffer.alloc(4);
    const mrc = native().btfMember(btf, name, i, mname, mname.length, bitOffset, bitfield, msize) as number;
    if (mrc < 0) throw new BpfError(`BTF member ${i} of struct ${name}`, mrc, libbpfText(mrc));
    const bits = bitOffset.readUInt32LE();
    members.push({
      name: cString(mname),
      offset: Math.floor(bits / 8),
      size: msize.readUInt32LE(),
      bitOffset: bits,
      bitfieldSize: bitfield.readUInt32LE(),
    });
  }
  return { name, size: size.readUInt32LE(), members };
}

/** BTF parsed from a file (an ELF object's .BTF section, or raw BTF such as /sys/kernel/btf/vmlinux). */
export class BtfFile {
  readonly path: string;
  #handle: Ptr | null;

  constructor(path: string) {
    this.path = path;
    const handle = native().btfParse(path, null) as Ptr | null;
    if (!handle) throw new Error(`cannot read BTF from ${path} (compiled without -g?)`);
    this.#handle = handle;
  }

  get handle(): Ptr {
    if (this.#handle === null) throw new Error(`BTF of ${this.path} is closed`);
    return this.#handle;
  }

  struct(name: string): BtfStruct | undefined {
    return btfStruct(this.handle, name);
  }

  close(): void {
    if (this.#handle !== null) native().btfFree(this.#handle);
    this.#handle = null;
  }
}
