// -o json | yaml | table, shared by the commands that print data.
import { stringify } from 'yaml';
import { z } from 'zod';
import type { ValueSpec } from './args.ts';

const FORMATS = ['table', 'json', 'yaml'] as const;
export type OutputFormat = typeof FORMATS[number];

/** -o FORMAT, for a command that prints some of the formats (table first: the default). */
export function outputFlag<const F extends readonly [OutputFormat, ...OutputFormat[]]>(formats: F = FORMATS as unknown as F) {
  const names = formats.length === 2 ? `${formats[0]} or ${formats[1]}` : `${formats.slice(0, -1).join(', ')} or ${formats.at(-1)}`;
  return {
    value: 'FORMAT',
    short: 'o',
    schema: z.enum(formats, { message: `must be ${names}` }),
    default: 'table',
    help: 'how to print it',
  } as const satisfies ValueSpec;
}

/** JSON.stringify replacer: bigints (u64 map fields) as decimal strings. */
export function bigintReplacer(_k: string, v: unknown): unknown {
  return typeof v === 'bigint' ? v.toString() : v;
}

export function formatData(data: unknown, format: Exclude<OutputFormat, 'table'>): string {
  const plain = JSON.parse(JSON.stringify(data, bigintReplacer));
  return format === 'json' ? `${JSON.stringify(plain, null, 2)}\n` : stringify(plain);
}

/** A header and rows as aligned columns (the last one not padded), each line indented by two spaces. */
export function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows].map((r) => `  ${r.map((c, i) => (i < r.length - 1 ? c.padEnd(widths[i]!) : c)).join('  ')}`);
}
