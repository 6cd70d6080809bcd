// Random Kubernetes-shaped objects for the lean validation paths' property
// tests (lean-slice.test.ts, lean-service.test.ts), as fast-check
// arbitraries: a pick that favours the plain (first) value and shrinks
// toward it, objects with absent keys, and the comparison of a lean path
// with zod, whose failing case shrinks to the smallest object that differs.
import fc from 'fast-check';
import type { Test } from 'tap';
import * as z from 'zod';

/** A key left out of obj(). */
export const ABSENT = Symbol('absent');

const arb = (v: unknown): fc.Arbitrary<unknown> => (v instanceof fc.Arbitrary ? v : fc.constant(v));

/** One of the values (each a value or an arbitrary); the first is the plain one: most objects are plain, as the API server sends them. */
export function pick(values: readonly unknown[], plainShare = 0.8): fc.Arbitrary<unknown> {
  const all = values.map(arb);
  return fc.oneof(
    { arbitrary: all[0]!, weight: Math.round(plainShare * 100) },
    { arbitrary: fc.oneof(...all), weight: Math.round((1 - plainShare) * 100) },
  );
}

/** An object of these keys (each a value or an arbitrary), ABSENT ones left out. */
export function obj(entries: Array<[string, unknown]>): fc.Arbitrary<Record<string, unknown>> {
  return fc.tuple(...entries.map(([, v]) => arb(v))).map((vs) => {
    const o: Record<string, unknown> = {};
    entries.forEach(([k], i) => {
      if (vs[i] !== ABSENT) o[k] = vs[i];
    });
    return o;
  });
}

/** JSON that tells a key holding undefined from an absent key. */
export function exact(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (x === undefined ? '(undefined)' : x));
}

/**
 * `runs` random objects through a lean path and through zod: no
 * disagreement (lean accepting what zod refuses, or a different output; the
 * first one found shrunk to the smallest object that still disagrees), and
 * the lean path answered often enough for that to mean something.
 */
export function leanAgainstZod(
  t: Test,
  runs: number,
  random: fc.Arbitrary<unknown>,
  lean: (raw: unknown) => unknown,
  schema: z.ZodType,
): void {
  let answered = 0;
  let zodOnly = 0;
  const result = fc.check(
    fc.property(random, (raw) => {
      const l = lean(raw);
      const zr = z.safeParse(schema, raw);
      if (l === undefined) {
        if (zr.success) zodOnly++;
        return;
      }
      answered++;
      if (!zr.success)
        throw new Error(
          `lean accepted what zod refuses: ${JSON.stringify(raw)}\n ${zr.error.issues.map((x) => `${x.path.join('.')}: ${x.message}`).join('; ')}`,
        );
      if (exact(zr.data) !== exact(l))
        throw new Error(`different output for ${JSON.stringify(raw)}:\n zod  ${exact(zr.data)}\n lean ${exact(l)}`);
    }),
    { numRuns: runs, seed: 2026 },
  );
  t.equal(
    result.failed
      ? `${(result.errorInstance as Error | undefined)?.message ?? String(result.errorInstance)} (shrunk ${result.numShrinks} times)`
      : undefined,
    undefined,
    'no disagreement',
  );
  t.ok(
    answered > 1000,
    `the lean path answered ${answered} of ${runs} objects (counting shrinking's too; zod alone accepted ${zodOnly} more)`,
  );
}
