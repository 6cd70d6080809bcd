// What an ELF file needs to run: its program interpreter (PT_INTERP) and the
// shared libraries it names (DT_NEEDED), read from the file itself, so the
// runtime image's library closure needs no readelf, ldd or running the file.
// 64-bit little-endian only (the images are x86-64).
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';

export interface ElfInfo {
  /** e_machine: 62 is x86-64, 183 aarch64. */
  machine: number;
  interpreter?: string;
  needed: string[];
}

const PT_INTERP = 3;
const SHT_DYNAMIC = 6;
const DT_NEEDED = 1;
export const EM_X86_64 = 62;

/** The whole file when it is an ELF file (the header is read first: most files of a tree are not). */
function readAll(path: string): Buffer | ElfInfo | undefined {
  const fd = openSync(path, 'r');
  try {
    const head = Buffer.alloc(64);
    if (readSync(fd, head, 0, 64, 0) < 64 || head.readUInt32BE(0) !== 0x7f454c46) return undefined;
    // 32-bit or big-endian: another architecture's build (prebuilds of npm packages); its machine only.
    if (head[4] !== 2 || head[5] !== 1) return { machine: head[5] === 1 ? head.readUInt16LE(18) : head.readUInt16BE(18), needed: [] };
  } finally {
    closeSync(fd);
  }
  return readFileSync(path);
}

/** The ELF facts of path, or undefined when it is no ELF file. */
export function readElf(path: string): ElfInfo | undefined {
  const b = readAll(path);
  if (!b || !Buffer.isBuffer(b)) return b;
  const machine = b.readUInt16LE(18);
  const phoff = Number(b.readBigUInt64LE(32));
  const shoff = Number(b.readBigUInt64LE(40));
  const phentsize = b.readUInt16LE(54);
  const phnum = b.readUInt16LE(56);
  const shentsize = b.readUInt16LE(58);
  const shnum = b.readUInt16LE(60);
  const cstr = (off: number) => b.toString('latin1', off, b.indexOf(0, off));

  let interpreter: string | undefined;
  for (let i = 0; i < phnum; i++) {
    const p = phoff + i * phentsize;
    if (b.readUInt32LE(p) === PT_INTERP) interpreter = cstr(Number(b.readBigUInt64LE(p + 8)));
  }
  const needed: string[] = [];
  const section = (i: number) => shoff + i * shentsize;
  for (let i = 0; i < shnum; i++) {
    const s = section(i);
    if (b.readUInt32LE(s + 4) !== SHT_DYNAMIC) continue;
    const off = Number(b.readBigUInt64LE(s + 24));
    const size = Number(b.readBigUInt64LE(s + 32));
    // sh_link: the string table the entries' names are in (.dynstr).
    const strtab = Number(b.readBigUInt64LE(section(b.readUInt32LE(s + 40)) + 24));
    for (let e = off; e + 16 <= off + size; e += 16) {
      const tag = b.readBigInt64LE(e);
      if (tag === 0n) break;
      if (tag === BigInt(DT_NEEDED)) needed.push(cstr(strtab + Number(b.readBigUInt64LE(e + 8))));
    }
  }
  return { machine, ...(interpreter ? { interpreter } : {}), needed };
}
