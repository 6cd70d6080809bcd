// Byte layouts of the C structs in bpf/include/svcmap_maps.h, described once
// here and used two ways: to encode/decode map entries, and to be checked
// against the BTF clang emitted for the same structs.
import { endianness } from 'node:os';
import { ipv4ToU32, u32ToIpv4 } from './ipv4.ts';
import { bytesToIpv6, ipv6ToBytes } from './ipv6.ts';

const LE = endianness() === 'LE';

/**
 * u8/u16/u32/u64: host byte order (ids, counts, flags); s64: signed, host order.
 * be16/ipv4/ipv6: network byte order (ports, addresses), as packets and socket hooks carry them;
 * ipv6 is 16 bytes (__be32 addr[4] in C), as canonical text (src/maps/ipv6.ts).
 * text: a char array holding UTF-8 text, NUL-terminated (so at most size - 1 bytes), zero-filled.
 * pad: reserved bytes, written as zero and not decoded.
 */
export type FieldKind = 'u8' | 'u16' | 'u32' | 'u64' | 's64' | 'be16' | 'ipv4' | 'ipv6' | 'text' | 'pad';

export interface Field {
  name: string;
  offset: number;
  size: number;
  kind: FieldKind;
}

export interface StructLayout {
  /** The C name: `struct NAME`, or a scalar type name for scalar keys. */
  cName: string;
  /** True for a C struct (checked field by field against BTF); false for a scalar key such as __u32. */
  isStruct: boolean;
  size: number;
  fields: Field[];
}

type FixedKind = Exclude<FieldKind, 'pad' | 'text'>;
const SIZES: Record<FixedKind, number> = { u8: 1, u16: 2, u32: 4, u64: 8, s64: 8, be16: 2, ipv4: 4, ipv6: 16 };

export function field(name: string, offset: number, kind: FixedKind): Field {
  return { name, offset, size: SIZES[kind], kind };
}

/** A char array of `size` bytes (see FieldKind). */
export function text(name: string, offset: number, size: number): Field {
  return { name, offset, size, kind: 'text' };
}

export function pad(name: string, offset: number, size: number): Field {
  return { name, offset, size, kind: 'pad' };
}

export function struct(cName: string, size: number, fields: Field[]): StructLayout {
  return { cName, isStruct: true, size, fields };
}

/** A key or value that is one scalar (the backends map's __u32 key). */
export function scalar(cName: string, kind: FixedKind): StructLayout {
  return { cName, isStruct: false, size: SIZES[kind], fields: [field('value', 0, kind)] };
}

export type Decoded = Record<string, number | string | bigint>;

/** Writes one struct at buf[off..off+size); fields missing from obj are zero. */
export function encodeInto(layout: StructLayout, obj: Decoded, buf: Buffer, off: number): void {
  buf.fill(0, off, off + layout.size);
  for (const f of layout.fields) {
    if (f.kind === 'pad') continue;
    const v = obj[f.name];
    if (v === undefined) continue;
    const at = off + f.offset;
    switch (f.kind) {
      case 'u8': buf.writeUInt8(v as number, at); break;
      case 'u16': LE ? buf.writeUInt16LE(v as number, at) : buf.writeUInt16BE(v as number, at); break;
      case 'u32': LE ? buf.writeUInt32LE(v as number, at) : buf.writeUInt32BE(v as number, at); break;
      case 'u64': LE ? buf.writeBigUInt64LE(BigInt(v), at) : buf.writeBigUInt64BE(BigInt(v), at); break;
      case 's64': LE ? buf.writeBigInt64LE(BigInt(v), at) : buf.writeBigInt64BE(BigInt(v), at); break;
      case 'be16': buf.writeUInt16BE(v as number, at); break;
      case 'ipv4': buf.writeUInt32BE(ipv4ToU32(v as string), at); break;
      case 'ipv6': buf.set(ipv6ToBytes(v as string), at); break;
      case 'text': {
        const bytes = Buffer.from(v as string, 'utf8');
        if (bytes.length >= f.size) throw new RangeError(`${layout.cName}.${f.name}: ${JSON.stringify(v)} is ${bytes.length} bytes; at most ${f.size - 1} fit`);
        buf.set(bytes, at);
        break;
      }
    }
  }
}

export function decodeFrom(layout: StructLayout, buf: Buffer, off: number): Decoded {
  const out: Decoded = {};
  for (const f of layout.fields) {
    const at = off + f.offset;
    switch (f.kind) {
      case 'pad': break;
      case 'u8': out[f.name] = buf.readUInt8(at); break;
      case 'u16': out[f.name] = LE ? buf.readUInt16LE(at) : buf.readUInt16BE(at); break;
      case 'u32': out[f.name] = LE ? buf.readUInt32LE(at) : buf.readUInt32BE(at); break;
      case 'u64': out[f.name] = LE ? buf.readBigUInt64LE(at) : buf.readBigUInt64BE(at); break;
      case 's64': out[f.name] = LE ? buf.readBigInt64LE(at) : buf.readBigInt64BE(at); break;
      case 'be16': out[f.name] = buf.readUInt16BE(at); break;
      case 'ipv4': out[f.name] = u32ToIpv4(buf.readUInt32BE(at)); break;
      case 'ipv6': out[f.name] = bytesToIpv6(buf.subarray(at, at + 16)); break;
      case 'text': {
        const raw = buf.subarray(at, at + f.size);
        const end = raw.indexOf(0);
        out[f.name] = raw.toString('utf8', 0, end < 0 ? f.size : end);
        break;
      }
    }
  }
  return out;
}

/** Problems in a layout itself: overlaps, fields past the end. Checked by tests and at load. */
export function layoutProblems(layout: StructLayout): string[] {
  const problems: string[] = [];
  const sorted = [...layout.fields].sort((a, b) => a.offset - b.offset);
  let end = 0;
  for (const f of sorted) {
    if (f.offset < end) problems.push(`${layout.cName}.${f.name} overlaps the field before it`);
    end = f.offset + f.size;
  }
  if (end > layout.size) problems.push(`${layout.cName}: fields end at ${end}, past its size ${layout.size}`);
  return problems;
}
