// svcmap cleanup: detach every program svcmap attached and remove its pins,
// leaving the node as it was before the agent ran. Refuses while an agent
// runs on the pin directory (it holds the directory's lock: bpf/pin-lock.ts)
// unless --force.
import { existsSync, readdirSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { detachPinnedLinks, linkPinDir } from '../bpf/loader.ts';
import { lockForCleanup } from '../bpf/pin-lock.ts';
import { detachClassicTc, ifIndex, interfaceNames } from '../bpf/tc.ts';
import { command, parseFlags, pinDirFlag } from './args.ts';
import { withPinAccess } from './pin-access.ts';

/** What a cleanup under a running agent breaks, said by the refusal and by --force's help. */
const BREAKS = 'every Service on this node stops being translated until the agent is restarted';

export const cleanupCommand = command({
  name: 'cleanup',
  summary: 'detaches every program svcmap attached and removes its pins',
  description:
    'Detaches every program svcmap attached (cgroup links, tcx links, XDP links, tc filters) and removes the pinned maps. Services stop being translated at once. Refuses while an agent runs on the pin directory (it holds a lock on it for its lifetime), unless --force.',
  flags: {
    'pin-dir': pinDirFlag,
    force: { help: `cleans up even while an agent runs on the pin directory: ${BREAKS}` },
    'done-file': {
      value: 'FILE',
      schema: z.string().startsWith('/', 'must be an absolute path'),
      help: "after a complete cleanup, creates FILE and keeps running until SIGTERM (the chart's cleanup DaemonSet: its readiness probe checks FILE)",
    },
  },
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

export async function cleanup(argv: string[], out: (s: string) => void): Promise<void> {
  const f = parseFlags(cleanupCommand, argv);
  const pinDir = f['pin-dir'];
  const done = f['done-file'];
  if (done) rmSync(done, { force: true });
  // Held while removing: an agent starting meanwhile waits for it (holdPinDir).
  const lock = existsSync(pinDir) ? withPinAccess(pinDir, () => lockForCleanup(pinDir)) : undefined;
  if (lock && !lock.free && !f.force) {
    const who = lock.holders.length ? ` (pid ${lock.holders.join(', ')})` : '';
    throw new Error(
      `svcmap cleanup: an agent is running on ${pinDir}${who}: cleaning up under it detaches its programs and ${BREAKS}; stop the agent first, or pass --force`,
    );
  }
  try {
    const removed = [...cleanupPins(pinDir), ...detachAllClassicTc()];
    out(removed.length ? `removed:\n${removed.map((r) => `  ${r}`).join('\n')}\n` : `nothing to remove at ${pinDir}\n`);
  } finally {
    if (lock?.free) lock.lock.release();
  }
  if (!done) return;
  if (existsSync(pinDir)) throw new Error(`svcmap cleanup: ${pinDir} still exists after the cleanup: ${readdirSync(pinDir).join(', ')}`);
  writeFileSync(done, '');
  out(`done: created ${done}; waiting for SIGTERM\n`);
  await untilTerminated();
}

/** Resolves on SIGTERM or SIGINT: a pod that reports done and waits to be deleted. */
function untilTerminated(): Promise<void> {
  // A signal listener alone does not keep Node running; the interval does.
  const keep = setInterval(() => {}, 2 ** 31 - 1);
  return new Promise((resolve) => {
    const stop = () => {
      clearInterval(keep);
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      resolve();
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
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
