// Random Kubernetes-shaped objects for the lean validation paths' property
// tests (lean-slice.test.ts, lean-service.test.ts): a seeded generator, a
// pick that favours the plain (first) value, objects with absent keys, and
// the comparison of a lean path with zod.
import type { Test } from 'tap';
import * as z from 'zod';
export function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    return x / 2 ** 32;
  };
}

/** A key left out of obj(). */
export const ABSENT = Symbol('absent');

/** The first value is the plain one: most objects are plain, as the API server sends them. */
export function pick(r: () => number, values: readonly unknown[], plainShare = 0.8): unknown {
  return r() < plainShare ? values[0] : values[Math.floor(r() * values.length)];
}

export function obj(entries: Array<[string, unknown]>): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (const [k, v] of entries) if (v !== ABSENT) o[k] = v;
  return o;
}

/** JSON that tells a key holding undefined from an absent key. */
export function exact(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (x === undefined ? '(undefined)' : x));
}

/**
 * `runs` random objects through a lean path and through zod: no
 * disagreement (lean accepting what zod refuses, or a different output), and
 * the lean path answered often enough for that to mean something.
 */
export function leanAgainstZod(
  t: Test, runs: number, random: () => unknown, lean: (raw: unknown) => unknown, schema: z.ZodType,
): void {
  let answered = 0;
  let zodOnly = 0;
  const disagreements: string[] = [];
  for (let i = 0; i < runs && disagreements.length < 5; i++) {
    const raw = random();
    const l = lean(raw);
    const zr = z.safeParse(schema, raw);
    if (l === undefined) {
      if (zr.success) zodOnly++;
      continue;
    }
    answered++;
    if (!zr.success) disagreements.push(`lean accepted what zod refuses: ${JSON.stringify(raw)}\n ${zr.error.issues.map((x) => `${x.path.join('.')}: ${x.message}`).join('; ')}`);
    else if (exact(zr.data) !== exact(l)) disagreements.push(`different output for ${JSON.stringify(raw)}:\n zod  ${exact(zr.data)}\n lean ${exact(l)}`);
  }
  t.same(disagreements, [], 'no disagreement');
  t.ok(answered > 1000, `the lean path answered ${answered} of ${runs} (zod alone accepted ${zodOnly} more)`);
}
