// The generated encoders (layout.ts: byte stores after a range check) write
// what the Buffer methods write, and refuse what they refuse, for every map's
// key and value layout: held against a reference encoder written field by
// field with the Buffer methods, over random values in and out of range.
import t from 'tap';
import fc from 'fast-check';
import { endianness } from 'node:os';
import { ALL_MAPS } from '../../src/maps/registry.ts';
import { type Field, type StructLayout, encoderOf, scalarCodecOf } from '../../src/maps/layout.ts';
import { ipv4ToU32 } from '../../src/util/ipv4.ts';
import { formatIpv6, ipv6ToBytes } from '../../src/util/ipv6.ts';

const LE = endianness() === 'LE';

/** What each kind means, with the Buffer methods (the encoders' specification). */
function referenceEncode(layout: StructLayout, obj: Record<string, unknown>, buf: Buffer, off: number): void {
  if (off + layout.size > buf.length) throw new RangeError('outside');
  buf.fill(0, off, off + layout.size);
  for (const f of layout.fields) {
    const v = obj[f.name] as never;
    const at = off + f.offset;
    if (v === undefined || f.kind === 'pad') continue;
    switch (f.kind) {
      case 'u8':
        buf.writeUInt8(v, at);
        break;
      case 'u16':
        if (LE) buf.writeUInt16LE(v, at);
        else buf.writeUInt16BE(v, at);
        break;
      case 'u32':
        if (LE) buf.writeUInt32LE(v, at);
        else buf.writeUInt32BE(v, at);
        break;
      case 'u64':
        if (LE) buf.writeBigUInt64LE(BigInt(v), at);
        else buf.writeBigUInt64BE(BigInt(v), at);
        break;
      case 's64':
        if (LE) buf.writeBigInt64LE(BigInt(v), at);
        else buf.writeBigInt64BE(BigInt(v), at);
        break;
      case 'be16':
        buf.writeUInt16BE(v, at);
        break;
      case 'ipv4':
        buf.writeUInt32BE(ipv4ToU32(v), at);
        break;
      case 'ipv6':
        buf.set(ipv6ToBytes(v), at);
        break;
      case 'text': {
        const bytes = Buffer.from(v as string, 'utf8');
        if (bytes.length >= f.size) throw new RangeError('text too long');
        buf.set(bytes, at);
        break;
      }
    }
  }
}

/** Numbers around and past a width's range, fractions, NaN. */
const number = (max: number) =>
  fc.oneof(
    fc.integer({ min: 0, max }),
    fc.constantFrom(0, max, max + 1, -1, 0.5, max - 0.5, max + 0.5, -0.5, Number.NaN, 2 ** 32, 2 ** 40),
    fc.double({ min: -1, max: max + 2, noNaN: true }),
  );

const value = (f: Field): fc.Arbitrary<unknown> => {
  const v: fc.Arbitrary<unknown> = {
    u8: number(0xff),
    u16: number(0xffff),
    be16: number(0xffff),
    u32: number(0xffffffff),
    u64: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
    s64: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
    ipv4: fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((o) => o.join('.')),
    ipv6: fc.array(fc.nat(0xffff), { minLength: 8, maxLength: 8 }).map(formatIpv6),
    text: fc.string({ maxLength: f.size + 2 }),
    pad: fc.constant(7),
  }[f.kind];
  return fc.option(v, { nil: undefined, freq: 8 });
};

const layouts: StructLayout[] = [];
for (const spec of ALL_MAPS) for (const l of [spec.key.layout, spec.value.layout]) if (!layouts.includes(l)) layouts.push(l);

t.test('every layout encodes as the Buffer methods do, refusing what they refuse', async (t) => {
  for (const layout of layouts) {
    const encode = layout.isStruct
      ? encoderOf(layout)
      : (obj: Record<string, unknown>, buf: Buffer, off: number) => scalarCodecOf(layout).encode(obj.value as never, buf, off);
    const record = fc.record(Object.fromEntries(layout.fields.map((f) => [f.name, value(f)])), { requiredKeys: [] });
    fc.assert(
      fc.property(record, fc.nat(3), fc.nat(255), (obj, off, dirt) => {
        const want = Buffer.alloc(layout.size + 8, dirt);
        const got = Buffer.alloc(layout.size + 8, dirt);
        let wantErr: unknown;
        let gotErr: unknown;
        try {
          referenceEncode(layout, obj, want, off);
        } catch (err) {
          wantErr = err;
        }
        try {
          encode(obj as never, got, off);
        } catch (err) {
          gotErr = err;
        }
        if (wantErr !== undefined || gotErr !== undefined) {
          // Both refuse, with the same kind of error (a bad address is an Error, a number out of range a RangeError).
          return wantErr !== undefined && gotErr !== undefined && (wantErr as Error).constructor === (gotErr as Error).constructor;
        }
        return want.equals(got);
      }),
      { numRuns: 400 },
    );
    t.pass(`${layout.cName}`);
  }
});

t.test('an encoder refuses a struct that does not fit the buffer from the offset', async (t) => {
  const layout = layouts.find((l) => l.isStruct && l.size > 4)!;
  const buf = Buffer.alloc(layout.size);
  t.throws(() => encoderOf(layout)({}, buf, 1), RangeError);
  t.throws(() => encoderOf(layout)({}, buf, -1), RangeError);
  t.throws(() => encoderOf(layout)({}, buf, 0.5), RangeError);
  encoderOf(layout)({}, buf, 0);
  t.same([...buf], new Array(layout.size).fill(0));
});
