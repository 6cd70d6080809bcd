// Build information for `svcmap version`: the commit and build time are known
// only where the build runs (the image has no git), so `make dist` writes them
// next to the compiled CLI and the command reads them back:
//
//   node src/cli/build-info.ts dist.tmp/build-info.json
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { z } from 'zod';

export const BuildInfo = z.object({
  /** Short commit hash, "-dirty" when tracked files differ from it; null outside a git checkout. */
  commit: z.string().nullable(),
  /** UTC, second precision: 2026-12-01T04:00:00Z. */
  built: z.string(),
});
export type BuildInfo = z.infer<typeof BuildInfo>;

function git(args: string[]): string | undefined {
  try {
    return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined; // no git, or not a checkout (the Docker build context has no .git)
  }
}

export function currentBuildInfo(now = new Date()): BuildInfo {
  const commit = git(['rev-parse', '--short=7', 'HEAD']);
  const dirty = commit !== undefined && git(['status', '--porcelain', '--untracked-files=no']);
  // SOURCE_DATE_EPOCH: the reproducible-builds convention for a fixed build time.
  const epoch = process.env.SOURCE_DATE_EPOCH;
  const when = epoch && /^\d+$/.test(epoch) ? new Date(Number(epoch) * 1000) : now;
  return { commit: commit ? `${commit}${dirty ? '-dirty' : ''}` : null, built: when.toISOString().replace(/\.\d{3}Z$/, 'Z') };
}

/** The file `make dist` wrote, or undefined when it is missing or unreadable. */
export function readBuildInfo(path: string | URL): BuildInfo | undefined {
  try {
    const parsed = BuildInfo.safeParse(JSON.parse(readFileSync(path, 'utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

if (import.meta.main) {
  const out = process.argv[2];
  if (!out) {
    process.stderr.write('usage: node src/cli/build-info.ts OUT.json\n');
    process.exit(2);
  }
  writeFileSync(out, `${JSON.stringify(currentBuildInfo())}\n`);
}
