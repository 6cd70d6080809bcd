// What the lean validation paths (lean-slice.ts, lean-service.ts) share: the
// zod schemas' rules for names, labels and ports, as plain checks. Each gives
// the value as zod would output it, or undefined when zod should decide.
import { DNS_LABEL, DNS_SUBDOMAIN, PORT_NAME } from './names.ts';
import { isRecord, PROTOCOL_NAMES } from './schemas.ts';

export { isRecord };

// What an absent or null list or label map becomes, one instance for every
// object, as zod's orDefault gives its fallback (validated objects are
// read-only): 10k Services held ~3 fresh empty lists and an empty map each.
export const NO_ITEMS: never[] = [];
export const NO_LABELS: Record<string, string> = {};

export const PROTOCOLS: ReadonlySet<string> = new Set(PROTOCOL_NAMES);

/** metadata.name: a DNS subdomain of 1-253 characters. */
export function leanName(v: unknown): string | undefined {
  return typeof v === 'string' && v.length >= 1 && v.length <= 253 && DNS_SUBDOMAIN.test(v) ? v : undefined;
}

/** metadata.namespace: a DNS label of 1-63 characters. */
export function leanNamespace(v: unknown): string | undefined {
  return typeof v === 'string' && v.length >= 1 && v.length <= 63 && DNS_LABEL.test(v) ? v : undefined;
}

/** A Service or EndpointSlice port name: '' or a DNS label of at most 63 characters. */
export function leanPortName(v: unknown): string | undefined {
  return typeof v === 'string' && v.length <= 63 && PORT_NAME.test(v) ? v : undefined;
}

export function isPortNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 65535;
}

/**
 * metadata's name, namespace (absent or null: 'default') and labels (absent
 * or null: {}), as zod gives them; undefined when any is not plainly valid.
 */
export function leanMeta(m: Record<string, unknown>): { name: string; namespace: string; labels: Record<string, string> } | undefined {
  const name = leanName(m.name);
  const namespace = m.namespace === undefined || m.namespace === null ? 'default' : leanNamespace(m.namespace);
  const labels = m.labels === undefined || m.labels === null ? NO_LABELS : leanLabels(m.labels);
  return name === undefined || namespace === undefined || labels === undefined ? undefined : { name, namespace, labels };
}

/** Labels, a fresh object of string values in the input's order; undefined for anything else (or a __proto__ key, which zod's record treats apart). */
export function leanLabels(v: unknown): Record<string, string> | undefined {
  if (!isRecord(v)) return undefined;
  const out: Record<string, string> = {};
  for (const k of Object.keys(v)) {
    const x = v[k];
    if (typeof x !== 'string' || k === '__proto__') return undefined;
    out[k] = x;
  }
  return out;
}

/**
 * A list of `each`; absent or null is [] (Go's nil, as zod's orDefault reads it). undefined when not plainly a list of valid values.
 * Built by map, at its exact size: a list grown by push keeps room for 16 more (~130 bytes per list of one, held by the model).
 */
export function leanList<T>(raw: unknown, each: (v: unknown) => T | undefined): T[] | undefined {
  if (raw === undefined || raw === null || (Array.isArray(raw) && raw.length === 0)) return NO_ITEMS;
  if (!Array.isArray(raw)) return undefined;
  let ok = true;
  const out = raw.map((v: unknown) => {
    const x = ok ? each(v) : undefined;
    if (x === undefined) ok = false;
    return x as T;
  });
  return ok ? out : undefined;
}
