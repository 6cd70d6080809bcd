// The C headers are the one declaration of every constant the datapath and
// the agent share: this writes them out as TypeScript. It reads every header
// under bpf/include/ (whichever file a constant lives in) and takes
//  - object-like #defines whose value is an integer literal (C suffixes
//    dropped), a string literal, an expression over integers and constants
//    defined before it, or a bare lower-case name (a map name: a string);
//  - enum members, with their explicit or implied values.
// Anything else (include guards, function-like macros, type names) is not a
// value the agent can use and is left out. A trailing comment on the line
// becomes the constant's doc comment.
//
//   node mk/gen-constants.ts          writes src/maps/generated/constants.gen.ts when it differs
//   node mk/gen-constants.ts --check  exits 1 when the committed file is stale
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const INCLUDE_DIR = join(ROOT, 'bpf/include');
export const GENERATED = join(ROOT, 'src/maps/generated/constants.gen.ts');

interface Constant {
  name: string;
  text: string;
  value: number | bigint | string;
  doc?: string;
}

/** Every .h file under dir, in a stable order. */
function headers(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .flatMap((e) => (e.isDirectory() ? headers(join(dir, e.name)) : e.name.endsWith('.h') ? [join(dir, e.name)] : []));
}

const INTEGER = /^(0[xX][0-9a-fA-F]+|\d+)[uUlL]*$/;
const EXPRESSION = /^[\w\s()+\-*<>|&~]+$/;
/** An object-like #define of an upper-case name: name, value, trailing comment. */
const DEFINE = /^[ \t]*#[ \t]*define[ \t]+([A-Z][A-Z0-9_]*)(?!\()[ \t]+(.*?)[ \t]*(\/\*.*\*\/|\/\/.*)?[ \t]*$/gm;

/** A C integer literal's value: a number, or a bigint past 2^53. */
function integer(literal: string): number | bigint {
  const big = BigInt(literal.replace(/[uUlL]+$/, ''));
  return big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
}

/** A constant by name: one already generated, or (ahead) one a later header or line defines. */
interface Scope {
  known: Map<string, Constant>;
  ahead: (name: string) => Constant | undefined;
}

const literal = (value: number | bigint | string) =>
  typeof value === 'string' ? `'${value}'` : typeof value === 'bigint' ? `${value}n` : String(value);

/**
 * raw as TypeScript: a name generated before it is referred to by name, one
 * defined further on by its value (the module cannot use it before its line);
 * undefined when it is not a value.
 */
function valueOf(raw: string, scope: Scope): Pick<Constant, 'text' | 'value'> | undefined {
  if (INTEGER.test(raw)) {
    const value = integer(raw);
    return { value, text: typeof value === 'bigint' ? `${value}n` : raw.replace(/[uUlL]+$/, '') };
  }
  if (/^"[^"\\]*"$/.test(raw)) return { value: raw.slice(1, -1), text: `'${raw.slice(1, -1)}'` };
  const same = scope.known.get(raw);
  if (same) return { value: same.value, text: raw };
  const later = scope.ahead(raw);
  if (later) return { value: later.value, text: literal(later.value) };
  if (/^[a-z_][a-z0-9_]*$/.test(raw)) return { value: raw, text: `'${raw}'` };
  if (!EXPRESSION.test(raw)) return undefined;
  // An expression over integers and numeric constants (no division: C's truncates).
  const used = new Map<string, number>();
  let ok = true;
  let ahead = false;
  const js = raw.replace(/\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b|\b[A-Za-z_]\w*\b/g, (tok) => {
    if (/^\d|^0[xX]/.test(tok)) return String(integer(tok));
    const c = scope.known.get(tok) ?? scope.ahead(tok);
    if (c === undefined || typeof c.value !== 'number') ok = false;
    else used.set(tok, c.value);
    if (!scope.known.has(tok)) ahead = true;
    return tok;
  });
  if (!ok) return undefined;
  const value: unknown = new Function(...used.keys(), `return (${js});`)(...used.values());
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) return undefined;
  return { value, text: ahead ? String(value) : raw };
}

/** A trailing comment's text, for a doc comment. */
const docOf = (comment: string | undefined) => comment?.replace(/^\/\*\s*|\s*\*\/$|^\/\/\s*/g, '').trim() || undefined;

/** The constants of one header, in their order there. */
function parse(text: string, scope: Scope, file: string): Constant[] {
  const { known } = scope;
  const out: Constant[] = [];
  const add = (c: Constant) => {
    const before = known.get(c.name);
    if (before && before.value !== c.value) throw new Error(`${file}: ${c.name} is ${c.text} here and ${before.text} before`);
    if (before) return;
    known.set(c.name, c);
    out.push(c);
  };
  const lines = text.replace(/\\\n/g, ' ').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const define = new RegExp(DEFINE.source).exec(line);
    if (define) {
      const v = valueOf(define[2]!, scope);
      const doc = docOf(define[3]);
      if (v) add({ name: define[1]!, ...v, ...(doc ? { doc } : {}) });
      continue;
    }
    if (!/^\s*enum\s+\w+\s*\{/.test(line)) continue;
    let next = 0;
    for (i++; i < lines.length && !/^\s*\}/.test(lines[i]!); i++) {
      const member = /^\s*(\w+)\s*(?:=\s*([^,/]+?))?\s*,?\s*(\/\*.*\*\/|\/\/.*)?\s*$/.exec(lines[i]!);
      if (!member) continue;
      const v = member[2] === undefined ? { value: next, text: String(next) } : valueOf(member[2], scope);
      if (!v || typeof v.value !== 'number')
        throw new Error(`${file}: enum member ${member[1]} has a value this generator cannot read: ${member[2]}`);
      next = v.value + 1;
      const doc = docOf(member[3]);
      add({ name: member[1]!, ...v, ...(doc ? { doc } : {}) });
    }
  }
  return out;
}

/** The generated module's text for the headers under includeDir. */
export function generateConstants(includeDir = INCLUDE_DIR): string {
  const files = headers(includeDir);
  // Every #define of every header first, so that a value may name a constant of a header read later.
  const raw = new Map<string, string>();
  for (const file of files) {
    for (const m of readFileSync(file, 'utf8').replace(/\\\n/g, ' ').matchAll(DEFINE)) if (!raw.has(m[1]!)) raw.set(m[1]!, m[2]!);
  }
  const known = new Map<string, Constant>();
  const resolving = new Set<string>();
  const ahead = (name: string): Constant | undefined => {
    const text = raw.get(name);
    if (text === undefined || resolving.has(name)) return undefined;
    resolving.add(name);
    try {
      const v = valueOf(text, scope);
      return v && { name, ...v };
    } finally {
      resolving.delete(name);
    }
  };
  const scope: Scope = { known, ahead };
  const parts = [
    '// Generated by mk/gen-constants.ts from bpf/include/*.h: do not edit. `make constants`',
    '// regenerates it; test/maps/header-constants.test.ts fails when it is stale.',
  ];
  for (const file of files) {
    const name = relative(join(includeDir, '..', '..'), file);
    const constants = parse(readFileSync(file, 'utf8'), scope, name);
    if (constants.length === 0) continue;
    parts.push('', `// ${name}`);
    for (const c of constants) {
      if (c.doc) parts.push(`/** ${c.doc.replace(/\*\//g, '*\\/')} */`);
      parts.push(`export const ${c.name} = ${c.text};`);
    }
  }
  return parts.join('\n') + '\n';
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = generateConstants();
  let old = '';
  try {
    old = readFileSync(GENERATED, 'utf8');
  } catch {
    /* first run */
  }
  if (process.argv.includes('--check')) {
    if (old !== text) {
      console.error(`${relative(ROOT, GENERATED)} is stale: run make constants`);
      process.exit(1);
    }
  } else if (old !== text) {
    writeFileSync(GENERATED, text);
    console.log(`wrote ${relative(ROOT, GENERATED)}`);
  }
}
