// The fast YAML path (parse.ts's parseManifest: js-yaml, the positional path
// for what it leaves) against the positional path alone (yaml's document
// model, what the file source read with before): over random manifests, the
// same objects (keys in the same order, undefined told from absent), the
// same problems (syntax errors with their line, column and document; the
// validation's, naming the object and the field). The manifests are Services,
// EndpointSlices and Nodes generated from the zod schemas (their input
// shapes, with strings that look like numbers, booleans and nulls), written
// out as people write YAML: multi-document streams and `kind: List`s,
// comments, block and flow collections, plain, quoted and block scalars,
// null spelled four ways, anchors and aliases, CRLF; now and then a
// duplicate key or a broken document. fast-check shrinks a difference to the
// smallest manifest and the plainest style that still differ.
import t from 'tap';
import fc from 'fast-check';
import * as z from 'zod';
import { EndpointSliceSchema, NodeSchema, ServiceSchema } from '../../src/model/schemas.ts';
import { validateObject } from '../../src/model/validate.ts';
import { fastYamlDocuments } from '../../src/sources/file/fast-yaml.ts';
import { parseManifest, parsePositional } from '../../src/sources/file/parse.ts';
import { exact } from '../model/random-objects.ts';

const TRICKY = [
  'web',
  'shop',
  'default',
  'TCP',
  'http',
  'IPv4',
  '10.96.0.10',
  'fd00::10',
  '::1',
  '80',
  '8080',
  '0x1F',
  '0o17',
  '017',
  '1e3',
  '.5',
  '-1',
  '+12',
  '1_000',
  'true',
  'True',
  'false',
  'null',
  'Null',
  '~',
  'yes',
  'no',
  'on',
  '',
  ' ',
  'a b',
  'a: b',
  'a:b',
  '# x',
  'a #b',
  '- x',
  '-',
  ':',
  '?',
  'x\ny',
  'line1\nline2\n',
  'two\n\n',
  'é',
  'svc-0-bench-with-a-long-name',
  "it's",
  '"q"',
  'x\ty',
  '  lead',
  'trail  ',
  '2024-01-01T00:00:00Z',
  '2024-01-01',
  '*x',
  '&a',
  '!x',
  '%x',
  '@x',
  '`x',
  '{x}',
  '[x]',
  'a,b',
  '<<',
  '=',
  '1:20',
  'kubernetes.io/service-name',
  'http://example.com/a?b=c#d',
];
const str = fc.oneof({ arbitrary: fc.constantFrom(...TRICKY), weight: 4 }, { arbitrary: fc.string({ maxLength: 12 }), weight: 1 });
const num = fc.oneof(fc.constantFrom(80, 443, 8080, 0, 65536, 30080, 8.5, -1, 1e21, 10800), fc.integer({ min: -10, max: 70000 }));

/** Values of a zod schema's input shape: its keys, literals and enum values, odd values beside them. */
function fromZod(schema: z.ZodType): fc.Arbitrary<unknown> {
  const def = (schema as unknown as { _zod: { def: Record<string, unknown> & { type: string } } })._zod.def;
  const inner = (k: string) => fromZod(def[k] as z.ZodType);
  switch (def.type) {
    case 'object': {
      const shape = def.shape as Record<string, z.ZodType>;
      const required = Object.keys(shape).filter((k) => (shape[k] as unknown as { _zod: { optin?: string } })._zod.optin !== 'optional');
      return fc.record(Object.fromEntries(Object.entries(shape).map(([k, v]) => [k, fromZod(v)])), { requiredKeys: required });
    }
    case 'string':
      return str;
    case 'number':
      return num;
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(inner('element'), { maxLength: 3 });
    case 'literal':
      return fc.oneof({ arbitrary: fc.constantFrom(...(def.values as unknown[])), weight: 9 }, { arbitrary: str, weight: 1 });
    case 'enum':
      return fc.oneof({ arbitrary: fc.constantFrom(...Object.values(def.entries as object)), weight: 9 }, { arbitrary: str, weight: 1 });
    case 'union':
      return fc.oneof(...(def.options as z.ZodType[]).map(fromZod));
    case 'record':
      return fc.dictionary(
        str.filter((k) => k !== '__proto__'),
        inner('valueType'),
        { maxKeys: 3 },
      );
    case 'optional':
    case 'nullable':
    case 'default':
    case 'nonoptional':
    case 'readonly':
    case 'catch':
      return fc.oneof({ arbitrary: inner('innerType'), weight: 4 }, { arbitrary: fc.constant(null), weight: 1 });
    case 'pipe':
      return inner('in');
    case 'unknown':
    case 'any':
      return fc.jsonValue({ maxDepth: 2 });
    default:
      throw new Error(`fromZod: no arbitrary for ${def.type}`);
  }
}

const objects = fc.oneof(fromZod(ServiceSchema), fromZod(EndpointSliceSchema), fromZod(NodeSchema));

/** A manifest: its objects, how they are laid out, and a stream of style choices (0 the plainest: fast-check shrinks toward it). */
const manifests = fc.record({
  objects: fc.array(objects, { minLength: 1, maxLength: 4 }),
  layout: fc.constantFrom('documents', 'list', 'typed-list'),
  choices: fc.array(fc.nat({ max: 99 }), { minLength: 1, maxLength: 64 }),
  crlf: fc.boolean(),
});

const PLAIN = /^[A-Za-z0-9_./+~-](?:[A-Za-z0-9_./+~: -]*[A-Za-z0-9_./~-])?$/;
const plainSafe = (s: string, flow: boolean) => PLAIN.test(s) && !/: | #|:$/.test(s) && !/^[-?:] /.test(s) && !(flow && /[,[\]{}]/.test(s));

/** YAML text of the manifest, styled by its choices. */
function emit(m: { objects: unknown[]; layout: string; choices: number[] }): string {
  let k = 0;
  const choose = (n: number) => (m.choices[k++ % m.choices.length] ?? 0) % n;
  const anchors = new Map<string, string>();
  let anchorNo = 0;
  const useAnchors = choose(3) === 1;

  function scalar(v: unknown, indent: string, flow: boolean): string {
    if (v === null || v === undefined) return ['null', '~', flow ? 'null' : '', 'Null'][choose(4)]!;
    if (typeof v === 'boolean') return [String(v), v ? 'True' : 'False', String(v).toUpperCase()][choose(3)]!;
    if (typeof v === 'number') return Number.isNaN(v) ? '.nan' : !Number.isFinite(v) ? (v > 0 ? '.inf' : '-.inf') : String(v);
    const s = String(v);
    const style = choose(4);
    if (style === 0 && plainSafe(s, flow)) return s;
    if (style === 1 && !/[\n\r\t]/.test(s) && /^[\x20-\x7e]*$/.test(s)) return `'${s.replace(/'/g, "''")}'`;
    if (style === 2 && !flow && /\S/.test(s) && /^[^ \n][\x20-\x7e\n]*$/.test(s) && !/ \n|[ ]$/.test(s)) {
      const trail = /\n*$/.exec(s)![0].length;
      const chomp = trail === 0 ? '-' : trail === 1 ? '' : '+';
      const body = s
        .slice(0, s.length - trail)
        .split('\n')
        .map((l) => (l === '' ? '' : `${indent}  ${l}`))
        .join('\n');
      return `|${chomp}\n${body}\n${'\n'.repeat(Math.max(0, trail - 1))}`.replace(/\n$/, '');
    }
    return JSON.stringify(s);
  }
  const key = (s: string) => (plainSafe(s, true) && choose(3) !== 2 ? s : JSON.stringify(s));
  const isColl = (v: unknown) =>
    typeof v === 'object' && v !== null && (!Array.isArray(v) || v.length > 0) && (Array.isArray(v) || Object.keys(v).length > 0);

  function flowOf(v: unknown): string {
    if (Array.isArray(v)) return `[${v.map(flowOf).join(', ')}]`;
    if (typeof v === 'object' && v !== null)
      return `{${Object.entries(v)
        .map(([a, b]) => `${key(a)}: ${flowOf(b)}`)
        .join(', ')}}`;
    return scalar(v, '', true);
  }
  /** A value after `key:` or `- `: inline text, or a block on the lines below. */
  function value(v: unknown, indent: string, inSeq: boolean): string {
    if (!isColl(v))
      return Array.isArray(v)
        ? ' []'
        : typeof v === 'object' && v !== null
          ? ' {}'
          : ` ${scalar(v, indent, false)}${choose(8) === 1 ? ' # note' : ''}`;
    let prefix = '';
    if (useAnchors) {
      const json = JSON.stringify(v);
      const a = anchors.get(json);
      if (a !== undefined) return ` *${a}`;
      if (choose(2) === 1) {
        anchors.set(json, `a${anchorNo}`);
        prefix = ` &a${anchorNo++}`;
      }
    }
    if (choose(6) === 1) return `${prefix} ${flowOf(v)}`;
    if (Array.isArray(v)) {
      const ind = !inSeq && choose(2) === 1 ? indent : `${indent}  `; // kubectl's style: a sequence at its key's indentation
      return `${prefix}\n${block(v, ind)}`;
    }
    return `${prefix}\n${block(v, `${indent}  `)}`;
  }
  function block(v: unknown, indent: string): string {
    if (Array.isArray(v)) {
      return v
        .map((item) => {
          if (isColl(item) && !Array.isArray(item) && choose(3) !== 2) {
            const inner = block(item, `${indent}  `);
            return `${indent}- ${inner.slice(indent.length + 2)}`; // compact: the first key on the dash's line
          }
          return `${indent}-${value(item, indent, true)}`;
        })
        .join('\n');
    }
    const entries = Object.entries(v as object);
    if (choose(30) === 1 && entries.length > 0) entries.push([entries[0]![0], 'duplicate']);
    return entries
      .map(([a, b]) => `${choose(10) === 1 ? `${indent}# a comment\n` : ''}${indent}${key(a)}:${value(b, indent, false)}`)
      .join('\n');
  }
  function doc(v: unknown): string {
    return isColl(v) ? block(v, '') : flowOf(v);
  }

  let docs: string[];
  if (m.layout === 'documents') docs = m.objects.map(doc);
  else {
    const kind = m.layout === 'list' ? 'List' : 'ServiceList';
    docs = [doc({ apiVersion: 'v1', kind, items: m.objects })];
  }
  if (choose(10) === 1) docs.splice(choose(docs.length + 1), 0, ['a: [1', 'a:\n\tb: 1', 'a: b: c', 'a: "x'][choose(4)]!);
  if (choose(5) === 1) docs.push('# nothing but a comment');
  return docs
    .map((d, i) => `${i > 0 || choose(2) === 1 ? `---${choose(4) === 1 ? ' # doc' : ''}\n` : ''}${d}\n${choose(6) === 1 ? '...\n' : ''}`)
    .join('');
}

const textOf = (m: Parameters<typeof emit>[0] & { crlf: boolean }) => {
  const text = emit(m);
  return m.crlf ? text.replace(/\n/g, '\r\n') : text;
};

/** What the file source makes of a parse: every object validated, every problem. */
function outcome(p: { objects: unknown[]; problems: unknown[] }): string {
  return exact({ objects: p.objects, validated: p.objects.map((o) => validateObject(o, 'm.yaml')), problems: p.problems });
}

t.test('the fast path reads what the positional path reads, with the same problems', async (t) => {
  let fast = 0;
  let runs = 0;
  fc.assert(
    fc.property(manifests, (m) => {
      const text = textOf(m);
      runs++;
      if (fastYamlDocuments(text) !== undefined) fast++;
      const got = outcome(parseManifest(text, 'm.yaml'));
      const want = outcome(parsePositional(text, 'm.yaml'));
      if (got !== want) throw new Error(`the paths differ on\n${text}\n fast:       ${got}\n positional: ${want}`);
    }),
    { numRuns: 600, seed: 2026 },
  );
  t.ok(fast > runs / 2, `the fast loader read ${fast} of ${runs} manifests itself (the rest went the positional way)`);
});

t.test('each feature, as the positional path reads it', async (t) => {
  const cases: Array<[string, string, boolean]> = [
    ['anchors and aliases', 'a: &p {port: 80}\nb: *p\nc: [*p, *p]\n', true],
    ['more than 10 aliases: positional', `a: &x 1\nb: [${Array(11).fill('*x').join(', ')}]\n`, false],
    ['multi-document, with an empty document and ...', '---\na: 1\n...\n---\n---\n# c\nb: 2\n', true],
    ['a kind: List', 'kind: List\napiVersion: v1\nitems:\n- {kind: Service, metadata: {name: a}}\n', true],
    ['comments', '# head\na: 1 # tail\n# between\nb: 2\n', true],
    ['block scalars', 'a: |\n  x\n  y\nb: >-\n  p\n  q\nc: |+\n  z\n\n', true],
    ['quoted strings that look like numbers', 'a: "80"\nb: \'1e3\'\nc: "true"\nd: "null"\ne: 80\n', true],
    ['null and ~', 'a: null\nb: ~\nc:\nd: Null\n', true],
    ['a null key: positional', 'null: a\n~: b\n', false],
    ['duplicate keys: positional, its error', 'a: 1\na: 2\n', false],
    ['"1" beside 1: positional, the later wins', '1: a\n"1": b\n', false],
    ['an explicit tag: positional', 'a: !!float 1\nb: !!binary aGk=\n', false],
    ['a %YAML 1.1 directive: positional', '%YAML 1.1\n---\na: yes\n', false],
    ['a syntax error: positional, with its line and document', 'a: 1\n---\nb: [1\n', false],
  ];
  for (const [what, text, fastReads] of cases) {
    t.equal(
      fastYamlDocuments(text) !== undefined,
      fastReads,
      `${what}: ${fastReads ? 'the fast loader reads it' : 'left to the positional path'}`,
    );
    t.equal(outcome(parseManifest(text, 'm.yaml')), outcome(parsePositional(text, 'm.yaml')), `${what}: the same objects and problems`);
  }
  t.match(
    parseManifest('a: 1\n---\nb: [1\n', 'm.yaml').problems,
    [{ message: /^YAML syntax error at line 4, column 1 \(document 2\)/ }],
    'the position of a syntax error',
  );
});
