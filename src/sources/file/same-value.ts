// Deep equality of validated objects (plain data: objects, arrays, strings,
// numbers, booleans, undefined), for telling an unchanged document from a
// changed one after a file is read again: an equal object is replaced by the
// one the model already has, so its Service is not recomputed. A key holding
// undefined and an absent key count as equal (the model reads both alike).
export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameValue(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  for (const k in x) if (!sameValue(x[k], y[k])) return false;
  for (const k in y) if (!(k in x) && y[k] !== undefined) return false;
  return true;
}
