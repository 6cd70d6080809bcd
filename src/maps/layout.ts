// Byte layouts of the C structs in bpf/include/svcmap_maps.h, described once
// here and used two ways: to encode/decode map entries, and to be checked
// against the BTF clang emitted for the same structs.
import { endianness } from 'node:os';
import { ipv4ToU32, u32ToIpv4 } from '../util/ipv4.ts';
import { bytesToIpv6, ipv6ToBytes } from '../util/ipv6.ts';

const LE = endianness() === 'LE';

/**
 * u8/u16/u32/u64: host byte order (ids, counts, flags); s64: signed, host order.
 * be16/ipv4/ipv6: network byte order (ports, addresses), as packets and socket hooks carry them;
 * ipv6 is 16 bytes (__be32 addr[4] in C), as canonical text (src/util/ipv6.ts).
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

// Encoding and decoding are generated once per layout (new Function over the
// field list above, nothing else): a full sync encodes ~220k entries, and the
// generic loop's switch and keyed reads of obj[f.name] (megamorphic: every
// layout's names) cost more than the writes. The generated code does what
// the loop did, field by field, with the same Buffer methods and checks.
type Encoder = (obj: Decoded, buf: Buffer, off: number) => void;
type Decoder = (buf: Buffer, off: number) => Decoded;
/** A scalar layout's (scalar()) codec takes and returns the value itself, not { value }. */
type ScalarEncoder = (v: number | bigint, buf: Buffer, off: number) => void;
type ScalarDecoder = (buf: Buffer, off: number) => number | bigint;
const HELPERS = { ipv4ToU32, u32ToIpv4, ipv6ToBytes, bytesToIpv6, textBytes, readText, outOfRange, outside };
const encoders = new WeakMap<StructLayout, Encoder>();
const decoders = new WeakMap<StructLayout, Decoder>();

function textBytes(layout: StructLayout, f: Field, v: string): Buffer {
  const bytes = Buffer.from(v, 'utf8');
  if (bytes.length >= f.size)
    throw new RangeError(`${layout.cName}.${f.name}: ${JSON.stringify(v)} is ${bytes.length} bytes; at most ${f.size - 1} fit`);
  return bytes;
}

function outOfRange(layout: StructLayout, f: Field, v: number): RangeError {
  const max = f.kind === 'u8' ? 0xff : f.kind === 'u32' ? 0xffffffff : 0xffff;
  return new RangeError(`${layout.cName}.${f.name}: ${v} is out of range (0 to ${max})`);
}

function outside(layout: StructLayout, buf: Buffer, off: number): RangeError {
  return new RangeError(`${layout.cName}: ${layout.size} bytes at offset ${off} do not fit a buffer of ${buf.length}`);
}

function readText(buf: Buffer, at: number, size: number): string {
  const raw = buf.subarray(at, at + size);
  const end = raw.indexOf(0);
  return raw.toString('utf8', 0, end < 0 ? size : end);
}

const HOST = LE ? 'LE' : 'BE';

function compileEncoder(layout: StructLayout, scalar = false): Encoder {
  // Every byte is written (zero where a field is padding or missing), so a
  // reused buffer needs no fill; bytes outside the fields are zeroed first.
  // Fixed-size numbers are stored byte by byte into the Buffer (a Uint8Array)
  // after the range check the Buffer methods make (value coerced with +, NaN
  // let through as they let it, the same bytes stored): their calls, fill()
  // of short padding above all, were most of a full sync's encoding (10k x 10:
  // ~220k entries, 40-70 ms). The struct's bounds are checked once.
  const covered = layout.fields.reduce((n, f) => n + f.size, 0);
  const lines = [
    `if (!(off >= 0 && off + ${layout.size} <= buf.length) || off % 1 !== 0) throw h.outside(layout, buf, off);`,
    ...(covered === layout.size ? [] : [zeroBytes('off', layout.size)]),
  ];
  const zero = (f: Field) => zeroBytes(`off + ${f.offset}`, f.size);
  layout.fields.forEach((f, i) => {
    if (f.kind === 'pad') {
      lines.push(zero(f));
      return;
    }
    const at = (k: number) => `off + ${f.offset + k}`;
    const checked = (max: number) => `v = +v; if (v > ${max} || v < 0) throw h.outOfRange(layout, layout.fields[${i}], v); `;
    // Byte k of a number n bytes wide, least significant first (what host order LE stores first).
    const le = (n: number) => Array.from({ length: n }, (_, k) => `buf[${at(k)}] = ${k ? `v >>> ${8 * k}` : 'v'};`).join(' ');
    const be = (n: number) => Array.from({ length: n }, (_, k) => `buf[${at(n - 1 - k)}] = ${k ? `v >>> ${8 * k}` : 'v'};`).join(' ');
    const write = {
      u8: `${checked(0xff)}buf[${at(0)}] = v;`,
      u16: `${checked(0xffff)}${LE ? le(2) : be(2)}`,
      u32: `${checked(0xffffffff)}${LE ? le(4) : be(4)}`,
      u64: `buf.writeBigUInt64${HOST}(BigInt(v), ${at(0)})`,
      s64: `buf.writeBigInt64${HOST}(BigInt(v), ${at(0)})`,
      be16: `${checked(0xffff)}${be(2)}`,
      ipv4: `v = h.ipv4ToU32(v); ${be(4)}`,
      ipv6: `buf.set(h.ipv6ToBytes(v), ${at(0)})`,
      text: `{ ${zero(f)}; buf.set(h.textBytes(layout, layout.fields[${i}], v), ${at(0)}); }`,
    }[f.kind];
    lines.push(`v = ${scalar ? 'obj' : `obj[${JSON.stringify(f.name)}]`}; if (v !== undefined) { ${write}; } else { ${zero(f)}; }`);
  });
  const make = new Function('h', 'layout', `return function encode(obj, buf, off) { let v; ${lines.join(' ')} };`);
  return make(HELPERS, layout) as Encoder;
}

/** Code zeroing `size` bytes at `at`: byte stores for short runs (padding), fill() for long ones. */
function zeroBytes(at: string, size: number): string {
  if (size > 16) return `buf.fill(0, ${at}, ${at} + ${size});`;
  return Array.from({ length: size }, (_, k) => `buf[${at} + ${k}] = 0;`).join(' ');
}

function compileDecoder(layout: StructLayout, scalar = false): Decoder {
  const props: string[] = [];
  for (const f of layout.fields) {
    const at = `off + ${f.offset}`;
    const read = {
      pad: '',
      u8: `buf.readUInt8(${at})`,
      u16: `buf.readUInt16${HOST}(${at})`,
      u32: `buf.readUInt32${HOST}(${at})`,
      u64: `buf.readBigUInt64${HOST}(${at})`,
      s64: `buf.readBigInt64${HOST}(${at})`,
      be16: `buf.readUInt16BE(${at})`,
      ipv4: `h.u32ToIpv4(buf.readUInt32BE(${at}))`,
      ipv6: `h.bytesToIpv6(buf.subarray(${at}, ${at} + 16))`,
      text: `h.readText(buf, ${at}, ${f.size})`,
    }[f.kind];
    if (read) props.push(`${JSON.stringify(f.name)}: ${read}`);
  }
  // One object literal: every decoded value of a layout has the same shape.
  const body = scalar ? props[0]!.slice(props[0]!.indexOf(':') + 1) : `{ ${props.join(', ')} }`;
  const make = new Function('h', `return function decode(buf, off) { return ${body}; };`);
  return make(HELPERS) as Decoder;
}

/** The encoder of a layout (writes one struct at buf[off..off+size); fields missing from obj are zero). */
export function encoderOf(layout: StructLayout): Encoder {
  let enc = encoders.get(layout);
  if (!enc) encoders.set(layout, (enc = compileEncoder(layout)));
  return enc;
}

export function decoderOf(layout: StructLayout): Decoder {
  let dec = decoders.get(layout);
  if (!dec) decoders.set(layout, (dec = compileDecoder(layout)));
  return dec;
}

/** The encoder and decoder of a scalar layout, on the value itself. */
export function scalarCodecOf(layout: StructLayout): { encode: ScalarEncoder; decode: ScalarDecoder } {
  if (layout.isStruct || layout.fields.length !== 1) throw new Error(`${layout.cName} is not a scalar layout`);
  return {
    encode: compileEncoder(layout, true) as unknown as ScalarEncoder,
    decode: compileDecoder(layout, true) as unknown as ScalarDecoder,
  };
}

/** Problems in a layout itself: overlaps, fields past the end (test/maps/codecs.test.ts checks every map's). */
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
