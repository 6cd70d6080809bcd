// Label and field selectors with the real grammar (k8s.io/apimachinery labels.Parse and
// fields.ParseSelector), so that a selector the real server accepts works here and a
// malformed one gets the same 400.

import type { Resource } from './resources.ts';
import { badRequest } from './status.ts';
import type { KubeObject } from './types.ts';

export interface Selector {
  readonly empty: boolean;
  matches(obj: KubeObject): boolean;
}

const NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function checkKey(key: string): void {
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  const ok = name.length <= 63 && NAME.test(name) && (prefix === undefined || (prefix.length <= 253 && DNS_SUBDOMAIN.test(prefix)));
  if (!ok)
    throw badRequest(
      `unable to parse requirement: invalid label key "${key}": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
    );
}

function checkValue(value: string): void {
  if (value !== '' && !(value.length <= 63 && NAME.test(value))) {
    throw badRequest(
      `unable to parse requirement: invalid label value: "${value}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
    );
  }
}

/** Split on commas outside parentheses: "a in (x,y),b" -> ["a in (x,y)", "b"]. */
function splitTopLevel(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else {
      cur += ch;
    }
  }
  out.push(cur);
  return out;
}

type Requirement = (labels: Record<string, string>) => boolean;

const KEY = String.raw`([^\s!=<>(),]+)`;
const EXISTS = new RegExp(String.raw`^(!?)\s*${KEY}$`);
const EQUALITY = new RegExp(String.raw`^${KEY}\s*(==|=|!=)\s*([^\s!=<>(),]*)$`);
const SET = new RegExp(String.raw`^${KEY}\s+(in|notin)\s*\(([^()]*)\)$`);
const NUMERIC = new RegExp(String.raw`^${KEY}\s*(<|>)\s*(-?\d+)$`);

function parseRequirement(raw: string): Requirement {
  const text = raw.trim();
  let m: RegExpExecArray | null;
  if ((m = SET.exec(text))) {
    const [, key, op, list] = m as unknown as [string, string, string, string];
    checkKey(key);
    const values = list.split(',').map((v) => v.trim());
    if (values.length === 0 || (values.length === 1 && values[0] === ''))
      throw badRequest(`unable to parse requirement: for 'in', 'notin' operators, values set can't be empty`);
    values.forEach(checkValue);
    const set = new Set(values);
    return op === 'in' ? (l) => key in l && set.has(l[key]!) : (l) => !(key in l) || !set.has(l[key]!);
  }
  if ((m = EQUALITY.exec(text))) {
    const [, key, op, value] = m as unknown as [string, string, string, string];
    checkKey(key);
    checkValue(value);
    return op === '!=' ? (l) => l[key] !== value : (l) => key in l && l[key] === value;
  }
  if ((m = NUMERIC.exec(text))) {
    const [, key, op, num] = m as unknown as [string, string, string, string];
    checkKey(key);
    const bound = Number(num);
    return (l) => {
      const v = l[key];
      if (v === undefined || !/^-?\d+$/.test(v)) return false;
      return op === '<' ? Number(v) < bound : Number(v) > bound;
    };
  }
  if ((m = EXISTS.exec(text))) {
    const [, not, key] = m as unknown as [string, string, string];
    checkKey(key);
    return not ? (l) => !(key in l) : (l) => key in l;
  }
  throw badRequest(`unable to parse requirement: cannot parse ${JSON.stringify(text)} as a label requirement`);
}

/** `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`, `a>1`, `a<1`, comma-joined (AND). */
export function parseLabelSelector(selector: string | undefined): Selector {
  if (selector === undefined || selector.trim() === '') return { empty: true, matches: () => true };
  const reqs = splitTopLevel(selector).map(parseRequirement);
  return {
    empty: false,
    matches: (obj) => {
      const labels = obj.metadata?.labels ?? {};
      return reqs.every((r) => r(labels));
    },
  };
}

/** Split on commas that are not backslash-escaped, unescaping as it goes (fields.ParseSelector). */
function splitFieldTerms(s: string): string[] {
  const out: string[] = [];
  let cur = '';
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    if (ch === '\\' && i + 1 < s.length) {
      cur += ch + s[i + 1];
      i++;
    } else if (ch === ',') {
      out.push(cur);
      cur = '';
    } else {
      cur += ch;
    }
  }
  out.push(cur);
  return out;
}

function unescapeFieldValue(v: string): string {
  return v.replace(/\\(.)/g, '$1');
}

/** The fields a resource can be selected on: metadata.name/namespace plus the resource's own. */
function fieldGetter(resource: Resource, field: string): ((obj: KubeObject) => string) | undefined {
  if (field === 'metadata.name') return (o) => o.metadata?.name ?? '';
  if (field === 'metadata.namespace') return (o) => (resource.namespaced ? (o.metadata?.namespace ?? '') : '');
  return resource.extraFields[field];
}

export interface FieldSelector extends Selector {
  /** The value a term `field=value` pins, if any (the real server uses it to scope watches). */
  exact(field: string): string | undefined;
}

/** `field=value`, `field==value`, `field!=value`, comma-joined (AND), on the fields the resource supports. */
export function parseFieldSelector(selector: string | undefined, resource: Resource): FieldSelector {
  if (selector === undefined || selector.trim() === '') return { empty: true, matches: () => true, exact: () => undefined };
  const terms = splitFieldTerms(selector).map((raw) => {
    const m = /^\s*([^=!\s]+)\s*(==|=|!=)(.*)$/.exec(raw);
    if (!m) throw badRequest(`invalid selector: '${selector}'; can't understand '${raw}'`);
    const [, field, op, rawValue] = m as unknown as [string, string, string, string];
    const get = fieldGetter(resource, field);
    if (!get) throw badRequest(`field label not supported: ${field}`);
    const value = unescapeFieldValue(rawValue.trim());
    return { field, negate: op === '!=', value, get };
  });
  return {
    empty: false,
    matches: (obj) => terms.every((t) => (t.get(obj) === t.value) !== t.negate),
    exact: (field) => terms.find((t) => t.field === field && !t.negate)?.value,
  };
}
