// Builds the bench's C helpers (client, server, ctflush, bpfstats, fwdgen) with gcc into
// build/bench/, rebuilding only when the source is newer than the binary.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const BUILD_DIR = join(ROOT, 'build', 'bench');
const PROGRAMS = ['client', 'server', 'ctflush', 'bpfstats', 'fwdgen'] as const;
export type Program = (typeof PROGRAMS)[number];
export type Binaries = Record<Program, string>;

export function buildNative(): Binaries {
  mkdirSync(BUILD_DIR, { recursive: true });
  const out = {} as Binaries;
  for (const p of PROGRAMS) {
    const src = fileURLToPath(new URL(`./${p}.c`, import.meta.url));
    const bin = join(BUILD_DIR, p);
    if (!existsSync(bin) || statSync(bin).mtimeMs < statSync(src).mtimeMs) {
      execFileSync('gcc', ['-O2', '-g', '-Wall', '-Wextra', '-Werror', '-o', bin, src], { stdio: ['ignore', 'inherit', 'inherit'] });
    }
    out[p] = bin;
  }
  return out;
}
