// The releases the repository records (RELEASES at its top: "<version>
// <commit>" a line, oldest first) and the order of versions. Tags may not
// travel with the repository, so this file, not git, says which commit a
// release is. Pure, no I/O: releasesFile() reads it.
//
//   const all = parseReleases(readFileSync('RELEASES', 'utf8'));
//   previousRelease(all, '0.2.0-dev')   // { version: 'v0.1.0', commit: '6164…', provisional: true, line: 7 }

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const RELEASES_FILE = join(fileURLToPath(new URL('../..', import.meta.url)), 'RELEASES');

export interface Release {
  /** "v0.1.0": v and the semantic version. */
  version: string;
  /** The full commit of main the release was cut from. */
  commit: string;
  /** The line's comment starts with "provisional": the commit is not yet the decided one. */
  provisional: boolean;
  /** 1-based line in RELEASES (for error messages). */
  line: number;
}

// MAJOR.MINOR.PATCH[-PRERELEASE] (semver.org without build metadata).
const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$/;

interface Semver {
  core: [number, number, number];
  pre: string[];
}

function semver(v: string, what: string): Semver {
  const m = SEMVER.exec(v.replace(/^v/, ''));
  if (!m) throw new Error(`${what}: ${JSON.stringify(v)} is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE])`);
  return { core: [Number(m[1]), Number(m[2]), Number(m[3])], pre: m[4] ? m[4].split('.') : [] };
}

/** <0, 0, >0 as a is older, the same as, newer than b (semver precedence; a leading v is ignored). */
export function compareVersions(a: string, b: string): number {
  const x = semver(a, 'version');
  const y = semver(b, 'version');
  for (let i = 0; i < 3; i++) if (x.core[i] !== y.core[i]) return x.core[i]! - y.core[i]!;
  // A pre-release (0.2.0-dev) comes before its release (0.2.0).
  if (!x.pre.length || !y.pre.length) return y.pre.length - x.pre.length;
  for (let i = 0; i < Math.min(x.pre.length, y.pre.length); i++) {
    const [p, q] = [x.pre[i]!, y.pre[i]!];
    const [pn, qn] = [/^\d+$/.test(p), /^\d+$/.test(q)];
    if (pn && qn && Number(p) !== Number(q)) return Number(p) - Number(q);
    if (pn !== qn) return pn ? -1 : 1;
    if (p !== q) return p < q ? -1 : 1;
  }
  return x.pre.length - y.pre.length;
}

/**
 * RELEASES' lines: "#" comments and blank lines skipped, every other line
 * "v<semver> <40-hex commit>" with an optional "# comment". Fails naming the
 * line and the field for anything else, for a version recorded twice, and for
 * versions out of order.
 */
export function parseReleases(text: string, file = 'RELEASES'): Release[] {
  const out: Release[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = i + 1;
    const hash = raw.indexOf('#');
    const body = (hash < 0 ? raw : raw.slice(0, hash)).trim();
    const comment = hash < 0 ? '' : raw.slice(hash + 1).trim();
    if (!body) return;
    const fields = body.split(/\s+/);
    const where = `${file}:${line}`;
    if (fields.length !== 2) throw new Error(`${where}: want "<version> <commit>", got ${fields.length} field(s): ${JSON.stringify(body)}`);
    const [version, commit] = fields as [string, string];
    if (!version.startsWith('v')) throw new Error(`${where}: version ${JSON.stringify(version)} must start with v (v0.1.0)`);
    semver(version, `${where}: version`);
    if (!/^[0-9a-f]{40}$/.test(commit))
      throw new Error(`${where}: commit ${JSON.stringify(commit)} must be 40 lowercase hex digits (git rev-parse)`);
    const prev = out.at(-1);
    if (out.some((r) => r.version === version)) throw new Error(`${where}: version ${version} recorded twice`);
    if (prev && compareVersions(prev.version, version) >= 0)
      throw new Error(`${where}: version ${version} is not newer than ${prev.version} (line ${prev.line}): oldest first`);
    out.push({ version, commit, provisional: /^provisional\b/i.test(comment), line });
  });
  return out;
}

/** The repository's RELEASES. */
export function releasesFile(path = RELEASES_FILE): Release[] {
  return parseReleases(readFileSync(path, 'utf8'), path);
}

/** The release named (v0.1.0), or an error listing the recorded ones. */
export function findRelease(all: readonly Release[], version: string): Release {
  const r = all.find((x) => x.version === version);
  if (!r) throw new Error(`no release ${JSON.stringify(version)} in RELEASES; recorded: ${all.map((x) => x.version).join(', ') || 'none'}`);
  return r;
}

/** The newest release older than `current` (package.json's version): what an upgrade to this build starts from. */
export function previousRelease(all: readonly Release[], current: string): Release {
  const older = all.filter((r) => compareVersions(r.version, current) < 0);
  const r = older.at(-1);
  if (!r) throw new Error(`no release in RELEASES is older than ${current}; recorded: ${all.map((x) => x.version).join(', ') || 'none'}`);
  return r;
}
