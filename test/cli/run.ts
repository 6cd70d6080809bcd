// Runs the compiled CLI (bin/svcmap) as a person would: without tap's
// NODE_OPTIONS (its process-info hook writes under .tap/, which the
// unprivileged user of some tests may not, and then prints a stack trace of
// its own) and without SVCMAP_DEBUG, unless the test sets it.
import { spawnSync } from 'node:child_process';
import { SVCMAP } from '../../lab/agent-process.ts';

/** setpriv arguments for uid/gid 65534 (nobody), no supplementary groups, no capabilities. */
export const AS_NOBODY = ['--reuid=65534', '--regid=65534', '--clear-groups', '--inh-caps=-all'];

export interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

export function runSvcmap(args: string[], opts: { asNobody?: boolean; env?: NodeJS.ProcessEnv } = {}): RunResult {
  const { SVCMAP_DEBUG: _, ...env } = process.env;
  // tap's hook puts NODE_OPTIONS back into every spawn's environment: env(1)
  // removes it on the far side.
  const argv = ['-u', 'NODE_OPTIONS', ...(opts.asNobody ? ['setpriv', ...AS_NOBODY] : []), SVCMAP, ...args];
  const r = spawnSync('env', argv, { encoding: 'utf8', timeout: 60_000, env: { ...env, ...opts.env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}
