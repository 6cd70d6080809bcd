// -o json | yaml | table, shared by the commands that print data.
import { stringify } from 'yaml';
import { z } from 'zod';

export const outputFlag = z.enum(['table', 'json', 'yaml'], { message: 'must be table, json or yaml' }).default('table');
export type OutputFormat = z.infer<typeof outputFlag>;

export function formatData(data: unknown, format: Exclude<OutputFormat, 'table'>): string {
  const plain = JSON.parse(JSON.stringify(data, (_k, v) => (typeof v === 'bigint' ? v.toString() : v)));
  return format === 'json' ? `${JSON.stringify(plain, null, 2)}\n` : stringify(plain);
}
