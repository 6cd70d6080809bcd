// Cache keys: an image is rebuilt only when something it is made of changed.
// Its inputs are files and directories (hashed by name, executable bit,
// symlink target and content) and facts (tool versions, package lists,
// refs); the key is the hash of all of them.
import { createHash, type Hash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

export type Input = { path: string } | { fact: string };

function hashPath(h: Hash, path: string, name: string): void {
  const st = lstatSync(path);
  if (st.isSymbolicLink()) {
    h.update(`L ${name} ${readlinkSync(path)}\n`);
  } else if (st.isDirectory()) {
    h.update(`D ${name}\n`);
    for (const e of readdirSync(path).sort()) hashPath(h, join(path, e), `${name}/${e}`);
  } else {
    h.update(`F ${name} ${st.mode & 0o111 ? 'x' : '-'} ${st.size}\n`);
    h.update(readFileSync(path));
  }
}

/** The key of a list of inputs (order matters); 16 hex digits are plenty to tell versions apart. */
export function inputsKey(inputs: readonly Input[]): string {
  const h = createHash('sha256');
  for (const i of inputs) {
    if ('fact' in i) h.update(`fact ${i.fact}\n`);
    else hashPath(h, i.path, basename(i.path));
  }
  return h.digest('hex').slice(0, 16);
}

/** Writes a file by renaming a finished temporary one into place, so a half-written file never counts as cached. */
export function writeAtomic(path: string, data: string | Buffer): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, data);
  renameSync(tmp, path);
}

/** Keeps the `keep` newest of the files in dir whose names match; removes the others. */
export function pruneOld(dir: string, match: RegExp, keep: number): void {
  const files = readdirSync(dir)
    .filter((f) => match.test(f))
    .map((f) => ({ f, t: statSync(join(dir, f)).mtimeMs }))
    .sort((a, b) => b.t - a.t);
  for (const { f } of files.slice(keep)) rmSync(join(dir, f), { recursive: true, force: true });
}
