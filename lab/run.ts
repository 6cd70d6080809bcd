// Running helper commands (ip, nsenter, sysctl ...) with a timeout, asynchronously
// for normal use and synchronously for the exit / signal teardown path.

import { execFile, spawnSync } from 'node:child_process';

export interface RunOptions {
  timeoutMs?: number;
  input?: string;
}

export class CommandError extends Error {
  readonly cmd: string;
  readonly args: readonly string[];
  readonly code: number | string | null;
  readonly stdout: string;
  readonly stderr: string;

  constructor(cmd: string, args: readonly string[], code: number | string | null, stdout: string, stderr: string) {
    super(`${cmd} ${args.join(' ')} failed (${code}): ${stderr.trim() || stdout.trim()}`);
    this.name = 'CommandError';
    this.cmd = cmd;
    this.args = args;
    this.code = code;
    this.stdout = stdout;
    this.stderr = stderr;
  }
}

const DEFAULT_TIMEOUT_MS = 10_000;

/** Runs a command, resolves with its stdout, rejects with a CommandError carrying stderr. */
export function run(cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      cmd,
      args,
      { timeout: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' },
      (err, stdout, stderr) => {
        if (err) {
          const e = err as NodeJS.ErrnoException & { killed?: boolean; signal?: string };
          const code = e.killed ? 'TIMEOUT' : typeof e.code === 'number' || typeof e.code === 'string' ? e.code : (e.signal ?? null);
          reject(new CommandError(cmd, args, code, stdout, stderr || e.message));
        } else {
          resolve(stdout);
        }
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

export interface SyncResult {
  ok: boolean;
  stdout: string;
  stderr: string;
}

/** Synchronous variant for teardown on exit; never throws. */
export function runSync(cmd: string, args: readonly string[], opts: RunOptions = {}): SyncResult {
  const r = spawnSync(cmd, args, {
    timeout: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    killSignal: 'SIGKILL',
    encoding: 'utf8',
    input: opts.input ?? '',
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  return { ok: r.status === 0 && !r.error, stdout: r.stdout ?? '', stderr: r.stderr ?? String(r.error ?? '') };
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** Blocks the thread for ms milliseconds (teardown path only). */
export function sleepSync(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
