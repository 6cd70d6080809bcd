// YAML manifests to plain objects fast: js-yaml's loader (YAML 1.2 core
// schema, as the `yaml` package's default) with no node tree and no source
// ranges kept, 10-20x faster than the positional path (parse.ts). It answers
// only where it is known to agree with that path; anything else (a syntax
// error, and the few features whose meaning the two loaders differ on) is
// left to the positional path, which gives today's objects and today's
// messages with their line, column and document.
//
// Left to the positional path, by a look at the text before loading:
// - `%YAML`/`%TAG` directives (a `%YAML 1.1` stream means yes/no booleans there);
// - explicit tags (`!!float 1` is 1 in js-yaml, "1" in yaml; yaml reads
//   !!binary, !!set, !!timestamp, unknown tags as strings with a warning);
// - explicit keys (`? k`) and empty or null keys (`: x`, `null: x`): yaml
//   names such a key "", js-yaml "null".
// And by js-yaml's refusal: any syntax error, duplicate keys (also `1` beside
// `"1"`, which yaml lets the later win), collection keys, nesting deeper than
// 100, and more than 10 aliases in a document (yaml refuses an alias count
// whose uses times nested aliases pass 100; 10 aliases cannot reach that).
//
// The loaded strings are copies (and so are the positional path's, ownStrings):
// V8 makes a slice of 13 characters or more a view into the text it was cut
// from, so one kept value would keep the whole file.
import { CORE_SCHEMA, defineScalarTag, loadAll } from 'js-yaml';

/** V8's shortest sliced string (SlicedString::kMinLength): shorter slices are copies already. */
const SLICE_MIN = 13;

/** A flat copy of a slice, holding nothing of the text it was cut from. */
function own(s: string): string {
  return s.length < SLICE_MIN ? s : ` ${s}`.slice(1);
}

/** `v` with every string in it a flat copy (in place): for values another loader cut from the text. */
export function ownStrings(v: unknown): unknown {
  if (typeof v === 'string') return own(v);
  if (typeof v !== 'object' || v === null || ArrayBuffer.isView(v)) return v;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = ownStrings(v[i]);
  } else {
    const o = v as Record<string, unknown>;
    for (const k of Object.keys(o)) o[k] = ownStrings(o[k]);
  }
  return v;
}

const SCHEMA = CORE_SCHEMA.withTags(defineScalarTag('tag:yaml.org,2002:str', { resolve: own, identify: (v) => typeof v === 'string' }));

/** Text the fast loader does not read the way the positional path does (see the header). */
const POSITIONAL_ONLY = /^%|(?:^|[\s[{,])(?:!|\?(?=\s|$))|(?:^|[\s[{,])(?:~|null|Null|NULL)?:(?=[\s,\]}]|$)/m;

/** The stream's documents as plain values, or undefined: read this text with the positional path. */
export function fastYamlDocuments(text: string): unknown[] | undefined {
  if (POSITIONAL_ONLY.test(text)) return undefined;
  try {
    return loadAll(text, { schema: SCHEMA, maxAliases: 10 });
  } catch {
    return undefined;
  }
}
