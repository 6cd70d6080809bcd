// -o table | wide | json | yaml, shared by the commands that print data, and
// the tables themselves (as kubectl prints them: -o wide adds columns,
// --no-headers drops the header lines).
import { stringify } from 'yaml';
import { z } from 'zod';
import type { ValueSpec } from './args.ts';

const FORMATS = ['table', 'wide', 'json', 'yaml'] as const;
export type OutputFormat = (typeof FORMATS)[number];

/** -o FORMAT, for a command that prints some of the formats (table first: the default). */
export function outputFlag<const F extends readonly [OutputFormat, ...OutputFormat[]]>(formats: F = FORMATS as unknown as F) {
  const names = formats.length === 2 ? `${formats[0]} or ${formats[1]}` : `${formats.slice(0, -1).join(', ')} or ${formats.at(-1)}`;
  return {
    value: 'FORMAT',
    short: 'o',
    schema: z.enum(formats, { message: `must be ${names}` }),
    default: 'table',
    help: formats.includes('wide') ? 'how to print it; wide: the table with more columns' : 'how to print it',
  } as const satisfies ValueSpec;
}

/** JSON.stringify replacer: bigints (u64 map fields) as decimal strings. */
export function bigintReplacer(_k: string, v: unknown): unknown {
  return typeof v === 'bigint' ? v.toString() : v;
}

export function formatData(data: unknown, format: Exclude<OutputFormat, TableFormat>): string {
  const plain = JSON.parse(JSON.stringify(data, bigintReplacer));
  return format === 'json' ? `${JSON.stringify(plain, null, 2)}\n` : stringify(plain);
}

/** The formats that print tables. */
export type TableFormat = 'table' | 'wide';
export const isTable = (format: OutputFormat): format is TableFormat => format === 'table' || format === 'wide';

/** How a table is printed: with the wide-only columns (-o wide), with its header lines (unless --no-headers). */
export interface TableStyle {
  wide: boolean;
  headers: boolean;
}
export const PLAIN: TableStyle = { wide: false, headers: true };

/** The style the flags ask for: -o wide, --no-headers. */
export function tableStyle(f: { output: OutputFormat; 'no-headers': boolean }): TableStyle {
  return { wide: f.output === 'wide', headers: !f['no-headers'] };
}

export interface Column {
  header: string;
  /** Shown with -o wide only. */
  wide?: boolean;
  /** Padded on the left (numbers). */
  right?: boolean;
  /** Free text (a list, a sentence): neither it nor any column after it is padded, so a long cell does not widen every row. */
  free?: boolean;
}

/**
 * A table's lines: the header (unless style.headers is false) and one line
 * per row, each column as wide as its widest cell, two spaces apart, after
 * `indent`; numbers (right) are padded on the left. A row holds a cell for every column, wide-only ones included
 * (left out here unless style.wide); cells past the columns (a row's notes)
 * follow unpadded. Lines carry no trailing spaces.
 */
export function renderColumns(columns: readonly Column[], rows: readonly string[][], style: TableStyle, indent = ''): string[] {
  const shown = columns.flatMap((c, i) => (c.wide && !style.wide ? [] : [i]));
  const firstFree = shown.findIndex((i) => columns[i]!.free);
  const lined = firstFree < 0 ? shown.length : firstFree; // the columns that line up
  const pick = (r: readonly string[]) => [...shown.map((i) => r[i] ?? ''), ...r.slice(columns.length)];
  const header = shown.map((i) => columns[i]!.header);
  const lines = [...(style.headers ? [header] : []), ...rows.map(pick)];
  const widths = shown.map((_, k) => Math.max(...lines.map((l) => l[k]!.length)));
  const cell = (c: string, k: number) => {
    if (k >= lined) return c;
    if (columns[shown[k]!]!.right) return c.padStart(widths[k]!);
    return k === shown.length - 1 ? c : c.padEnd(widths[k]!);
  };
  return lines.map((l) => `${indent}${l.map(cell).join('  ')}`.trimEnd());
}

/** Lines as printed: each ended by a newline (nothing for no lines). */
export const printed = (lines: readonly string[]): string => lines.map((l) => `${l}\n`).join('');

/** A header and rows as aligned columns (the last one not padded), each line indented by two spaces. */
export function table(header: string[], rows: string[][]): string[] {
  return renderColumns(
    header.map((h) => ({ header: h })),
    rows,
    PLAIN,
    '  ',
  );
}
