// Runs the compiled CLI (bin/svcmap) as a person would: without tap's
// NODE_OPTIONS (its process-info hook writes under .tap/, which the
// unprivileged user of some tests may not, and then prints a stack trace of
// its own) and without SVCMAP_DEBUG, unless the test sets it.
import { spawn, spawnSync } from 'node:child_process';
import { SVCMAP } from '../../lab/agent-process.ts';

/** setpriv arguments for uid/gid 65534 (nobody), no supplementary groups, no capabilities. */
export const AS_NOBODY = ['--reuid=65534', '--regid=65534', '--clear-groups', '--inh-caps=-all'];

export interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

type RunOptions = { asNobody?: boolean; env?: NodeJS.ProcessEnv };

/** env(1)'s arguments and the environment for one run. */
function invocation(args: string[], opts: RunOptions): { argv: string[]; env: NodeJS.ProcessEnv } {
  const { SVCMAP_DEBUG: _, ...env } = process.env;
  // tap's hook puts NODE_OPTIONS back into every spawn's environment: env(1)
  // removes it on the far side.
  return {
    argv: ['-u', 'NODE_OPTIONS', ...(opts.asNobody ? ['setpriv', ...AS_NOBODY] : []), SVCMAP, ...args],
    env: { ...env, ...opts.env },
  };
}

export function runSvcmap(args: string[], opts: RunOptions = {}): RunResult {
  const { argv, env } = invocation(args, opts);
  const r = spawnSync('env', argv, { encoding: 'utf8', timeout: 60_000, env });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** runSvcmap without blocking, so that a test can run many at once. */
export function runSvcmapAsync(args: string[], opts: RunOptions = {}): Promise<RunResult> {
  const { argv, env } = invocation(args, opts);
  return new Promise((resolve) => {
    const child = spawn('env', argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}
