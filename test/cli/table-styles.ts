// Checks one table as -o table, -o wide and --no-headers print it: wide has
// the named columns more and otherwise the same header and rows; without
// headers, the same rows and no header line. Rows are compared cell by cell
// (cells are two or more spaces apart): a table without its header may be
// narrower.
import type { Test } from 'tap';

export const cells = (line: string): string[] => line.trim().split(/ {2,}/);

export interface TableLines {
  /** -o table: the header line, then the rows. */
  plain: string[];
  /** -o wide: the header line, then the rows. */
  wide: string[];
  /** --no-headers: the rows. */
  bare: string[];
}

export function checkTableStyles(t: Test, table: TableLines, wideColumns: readonly string[], what: string): void {
  const [plainHeader = '', ...plainRows] = table.plain;
  const [wideHeader = '', ...wideRows] = table.wide;
  t.ok(plainRows.length > 0, `${what}: rows to compare`);
  const added = cells(wideHeader).flatMap((h, i) => (wideColumns.includes(h) ? [i] : []));
  t.equal(added.length, wideColumns.length, `${what}: wide adds ${wideColumns.join(', ')} (${wideHeader.trim()})`);
  const narrowed = (line: string) => cells(line).filter((_, i) => !added.includes(i));
  t.same(narrowed(wideHeader), cells(plainHeader), `${what}: wide has the plain header's columns otherwise`);
  t.same(wideRows.map(narrowed), plainRows.map(cells), `${what}: and the same rows otherwise`);
  t.equal(table.bare.length, plainRows.length, `${what}: --no-headers: one line a row, no header line`);
  t.same(table.bare.map(cells), plainRows.map(cells), `${what}: --no-headers: the same rows`);
  t.notOk(
    table.bare.some((l) => cells(l).join(' ') === cells(plainHeader).join(' ')),
    `${what}: --no-headers: the header is nowhere`,
  );
}
