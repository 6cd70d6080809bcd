// -o json | yaml | table, shared by the commands that print data.
import { stringify } from 'yaml';
import { z } from 'zod';

export const outputFlag = z.enum(['table', 'json', 'yaml'], { message: 'must be table, json or yaml' }).default('table');
export type OutputFormat = z.infer<typeof outputFlag>;

/** JSON.stringify replacer: bigints (u64 map fields) as decimal strings. */
export function bigintReplacer(_k: string, v: unknown): unknown {
  return typeof v === 'bigint' ? v.toString() : v;
}

export function formatData(data: unknown, format: Exclude<OutputFormat, 'table'>): string {
  const plain = JSON.parse(JSON.stringify(data, bigintReplacer));
  return format === 'json' ? `${JSON.stringify(plain, null, 2)}\n` : stringify(plain);
}
