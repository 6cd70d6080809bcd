// svcmap cleanup: detach every program svcmap attached and remove its pins,
// leaving the node as it was before the agent ran.
import { existsSync, readdirSync, rmSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';
import { detachPinnedLinks, linkPinDir } from '../bpf/loader.ts';
import { detachClassicTc, ifIndex, interfaceNames } from '../bpf/tc.ts';
import { command, parseFlags, pinDirFlag } from './args.ts';

export const cleanupCommand = command({
  name: 'cleanup',
  summary: 'detaches every program svcmap attached and removes its pins',
  description: 'Detaches every program svcmap attached (cgroup links, tcx links, tc filters) and removes the pinned maps. Services stop being translated at once.',
  flags: { 'pin-dir': pinDirFlag },
});

/**
 * Detaches the pinned links under pinDir and removes the pins. Classic tc
 * filters are not pinned: `svcmap cleanup` removes them from this network
 * namespace's interfaces itself, so that harnesses calling this from the root
 * namespace never touch its interfaces.
 */
export function cleanupPins(pinDir: string): string[] {
  const removed = detachPinnedLinks(linkPinDir(pinDir));
  if (existsSync(pinDir)) {
    for (const name of readdirSync(pinDir)) {
      const p = join(pinDir, name);
      rmSync(p, { recursive: true, force: true });
      removed.push(p);
    }
    rmdirSync(pinDir);
  }
  return removed;
}

export function cleanup(argv: string[], out: (s: string) => void): void {
  const f = parseFlags(cleanupCommand, argv);
  const removed = [...cleanupPins(f['pin-dir']), ...detachAllClassicTc()];
  out(removed.length ? `removed:\n${removed.map((r) => `  ${r}`).join('\n')}\n` : `nothing to remove at ${f['pin-dir']}\n`);
}

/** svcmap's classic tc filters (kernels without tcx) on every interface of this network namespace. */
export function detachAllClassicTc(): string[] {
  const out: string[] = [];
  for (const name of interfaceNames()) {
    try {
      const n = detachClassicTc(ifIndex(name));
      if (n) out.push(`tc filters on ${name}`);
    } catch {
      // the interface went away meanwhile
    }
  }
  return out;
}
