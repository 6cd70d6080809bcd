// Runs the external build steps (debootstrap, buildah, tar, go, gcc, npm).
// A failing step is reported with its command line and the end of its own
// error output, which is where debootstrap and buildah say what went wrong.
// Each step runs in a process group of its own, so that an abort (a signal
// to the build, or a timeout) can end it together with its children (dpkg
// in debootstrap's chroot, go's compilers) before the scratch space goes;
// and dies with the build if that is killed outright (PDEATHSIG).
import { type ChildProcess, spawn } from 'node:child_process';

export class StepError extends Error {
  readonly command: string;
  readonly code: number | string | null;
  /** The end of the step's stderr (or stdout, when stderr was empty). */
  readonly output: string;

  constructor(command: string, code: number | string | null, output: string) {
    super(`${command} failed (${typeof code === 'number' ? `exit ${code}` : code}):\n${output}`);
    this.name = 'StepError';
    this.command = command;
    this.code = code;
    this.output = output;
  }
}

export interface ExecOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
}

const running = new Set<ChildProcess>();

/** Kills every step still running (SIGKILL to its process group); synchronous, for the abort path. */
export function killRunningSteps(): void {
  for (const child of running) {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

const tail = (text: string, lines: number) => text.trimEnd().split('\n').slice(-lines).join('\n');

/** Runs cmd, resolves with its stdout; rejects with a StepError carrying the last lines of its stderr. */
export function exec(cmd: string, args: readonly string[], opts: ExecOptions = {}): Promise<string> {
  const shown = [cmd, ...args].map((a) => (/^[\w./:=@%+,-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
  return new Promise((resolve, reject) => {
    const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', cmd, ...args], {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    running.add(child);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, opts.timeoutMs ?? 600_000);
    child.on('error', (e) => {
      clearTimeout(timer);
      running.delete(child);
      reject(new StepError(shown, (e as NodeJS.ErrnoException).code ?? null, e.message));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      const stdout = Buffer.concat(out).toString('utf8');
      if (code === 0) return resolve(stdout);
      const stderr = Buffer.concat(err).toString('utf8');
      reject(new StepError(shown, code ?? `killed by ${signal} (timeout or abort)`, tail(stderr || stdout, 40)));
    });
  });
}

/** Times an async step and logs "label: 1.2s". */
export async function timed<T>(log: (line: string) => void, label: string, fn: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const r = await fn();
  log(`${label}: ${((performance.now() - t0) / 1000).toFixed(1)}s`);
  return r;
}
