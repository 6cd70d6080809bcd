// Turns zod issues into the one-line messages operators read in logs and in
// `svcmap status`: `spec.ports[0].port: must be between 1 and 65535, got 70000`.
// Schemas set their own "must be ..." messages; this module adds the field path
// and the offending value, so every message has the same shape.

import type * as z from 'zod';

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/** ['spec', 'ports', 0, 'port'] -> `spec.ports[0].port`; odd keys such as label names are quoted. */
export function renderPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else if (typeof key === 'string' && IDENTIFIER.test(key)) out += out === '' ? key : `.${key}`;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}

/** A short YAML-flavoured description of a value, for "got ..." suffixes. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string') return JSON.stringify(value);
  return String(value);
}

const TYPE_NAMES: Record<string, string> = {
  int: 'an integer',
  number: 'a number',
  string: 'a string',
  boolean: 'a boolean',
  object: 'a mapping',
  array: 'a list',
  record: 'a mapping',
};

/** The message for one issue, without the path. */
export function describeIssue(issue: z.core.$ZodIssue): string {
  const hasInput = 'input' in issue && issue.input !== undefined;
  switch (issue.code) {
    case 'invalid_type': {
      if (!hasInput) return 'is required';
      // Schema-specific wording ("must be an integer") beats zod's generic one.
      if (issue.message.startsWith('must ')) return withInput(issue.message, issue.input);
      const expected = TYPE_NAMES[issue.expected] ?? issue.expected;
      return `must be ${expected}, got ${describeValue(issue.input)}`;
    }
    case 'invalid_value': {
      if (!hasInput) return 'is required';
      const values = issue.values.map((v) => String(v));
      const expected = values.length === 1 ? values[0] : `one of ${values.join(', ')}`;
      return `must be ${expected}, got ${describeValue(issue.input)}`;
    }
    case 'invalid_union': {
      // A discriminated union reports the whole object as input; the
      // interesting value is the discriminator field itself.
      if ('discriminator' in issue && typeof issue.discriminator === 'string') {
        const input = issue.input as Record<string, unknown> | undefined;
        const value = input?.[issue.discriminator];
        if (value === undefined) return 'is required';
        return `${issue.message}, got ${describeValue(value)}`;
      }
      return withInput(issue.message, issue.input);
    }
    default:
      return withInput(issue.message, 'input' in issue ? issue.input : undefined);
  }
}

function withInput(message: string, input: unknown): string {
  return input === undefined ? message : `${message}, got ${describeValue(input)}`;
}

/** `path: message`, or just the message for the object as a whole. */
export function renderIssue(issue: z.core.$ZodIssue): { path: string; message: string } {
  const path = renderPath(issue.path);
  const detail = describeIssue(issue);
  return { path, message: path === '' ? detail : `${path}: ${detail}` };
}
