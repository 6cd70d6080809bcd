// Processes inside lab namespaces: build the command line that (1) joins a cgroup,
// (2) dies with its parent, (3) optionally pins a CPU and (4) enters the netns,
// all before exec'ing the real command in the same pid; plus graceful stop
// (SIGTERM, then SIGKILL) of a process group and a bounded output tail.

import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { join } from 'node:path';
import { checkCgroupPath } from './cgroup.ts';
import { nsenterArgv } from './netns.ts';

export interface SpawnOptions {
  /** Absolute path of a (lab) cgroup the process joins before it enters the netns. */
  cgroup?: string;
  /** Environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** Default ['ignore', 'pipe', 'pipe']; piped output is also drained into a bounded tail. */
  stdio?: StdioOptions;
  /** Pin to these CPUs (taskset -c syntax: 0, "0,1", "0-1"). */
  cpu?: number | string;
  cwd?: string;
  /** Die when the spawning thread exits (prctl PDEATHSIG=KILL via setpriv). Default true. */
  dieWithParent?: boolean;
}

/**
 * The argv that runs cmd inside the namespace. Every step execs the next, so the
 * pid Node sees is the pid of cmd:
 *   [sh -c 'echo $$ > CG/cgroup.procs; exec "$@"'] setpriv --pdeathsig KILL [taskset -c N] nsenter --net=/run/netns/NS -- cmd args
 * The cgroup is joined first, by writing the shell's own pid, because writing
 * cgroup.procs after `ip netns exec` fails (it remounts /sys) and because the
 * process must not open any socket before it is in the cgroup.
 */
export function spawnArgv(ns: string, cmd: string, args: readonly string[], opts: SpawnOptions = {}): string[] {
  const argv: string[] = [];
  if (opts.cgroup !== undefined) {
    const procs = join(checkCgroupPath(opts.cgroup), 'cgroup.procs');
    argv.push('sh', '-c', 'echo $$ > "$1" || exit 125; shift; exec "$@"', 'sh', procs);
  }
  if (opts.dieWithParent !== false) argv.push('setpriv', '--pdeathsig', 'KILL', '--');
  if (opts.cpu !== undefined) {
    const cpu = String(opts.cpu);
    if (!/^[0-9,-]+$/.test(cpu)) throw new Error(`bad cpu list ${cpu}`);
    argv.push('taskset', '-c', cpu);
  }
  argv.push(...nsenterArgv(ns), cmd, ...args);
  return argv;
}

const TAIL_BYTES = 16 * 1024;

interface Tail {
  stdout: string;
  stderr: string;
}

const tails = new WeakMap<ChildProcess, Tail>();

/** The last 16 KiB of what a lab-spawned process wrote to piped stdout / stderr. */
export function outputTail(child: ChildProcess): Tail {
  return tails.get(child) ?? { stdout: '', stderr: '' };
}

function drain(child: ChildProcess): void {
  const tail: Tail = { stdout: '', stderr: '' };
  tails.set(child, tail);
  const keep = (which: 'stdout' | 'stderr') => (chunk: Buffer | string) => {
    const s = tail[which] + chunk.toString();
    tail[which] = s.length > TAIL_BYTES ? s.slice(s.length - TAIL_BYTES) : s;
  };
  child.stdout?.on('data', keep('stdout'));
  child.stderr?.on('data', keep('stderr'));
}

/** Spawns cmd inside the namespace (see spawnArgv) in its own process group. */
export function spawnIn(ns: string, cmd: string, args: readonly string[], opts: SpawnOptions = {}): ChildProcess {
  const [file, ...rest] = spawnArgv(ns, cmd, args, opts);
  const child = spawn(file as string, rest, {
    stdio: opts.stdio ?? ['ignore', 'pipe', 'pipe'],
    env: opts.env ?? process.env,
    cwd: opts.cwd,
    // A new session / process group: terminal ^C does not hit it directly, and
    // stop() can signal the whole group (the command's own children too).
    detached: true,
  });
  drain(child);
  // Without a listener an 'error' event (e.g. ENOENT for sh) would crash the process.
  child.on('error', () => {});
  return child;
}

export function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function signalGroup(child: ChildProcess, sig: NodeJS.Signals): void {
  if (child.pid === undefined || hasExited(child)) return;
  try {
    process.kill(-child.pid, sig);
  } catch {
    try {
      process.kill(child.pid, sig);
    } catch {
      /* gone */
    }
  }
}

/** Resolves once the child has exited (immediately if it already has or never started). */
export function waitExit(child: ChildProcess, timeoutMs?: number): Promise<boolean> {
  if (hasExited(child) || child.pid === undefined) return Promise.resolve(true);
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const done = (): void => {
      if (timer) clearTimeout(timer);
      resolve(true);
    };
    child.once('exit', done);
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => {
        child.off('exit', done);
        resolve(hasExited(child));
      }, timeoutMs);
    }
  });
}

/** SIGTERM the process group, SIGKILL it after graceMs; resolves when the child has exited. */
export async function stopProcess(child: ChildProcess, graceMs = 1000): Promise<void> {
  if (hasExited(child) || child.pid === undefined) return;
  signalGroup(child, 'SIGTERM');
  if (await waitExit(child, graceMs)) return;
  signalGroup(child, 'SIGKILL');
  await waitExit(child, 2000);
}

/** Synchronous SIGKILL of the process group (exit / signal teardown path). */
export function killProcessSync(child: ChildProcess): void {
  signalGroup(child, 'SIGKILL');
}

/** ref()/unref() the child and its stdio pipes: an unref'd helper never keeps the test process alive. */
export function setRef(child: ChildProcess, on: boolean): void {
  const handles: Array<{ ref?: () => unknown; unref?: () => unknown } | null | undefined> = [
    child,
    child.stdin as unknown as { ref?: () => unknown; unref?: () => unknown } | null,
    child.stdout as unknown as { ref?: () => unknown; unref?: () => unknown } | null,
    child.stderr as unknown as { ref?: () => unknown; unref?: () => unknown } | null,
  ];
  for (const h of handles) {
    if (!h) continue;
    if (on) h.ref?.();
    else h.unref?.();
  }
}

/** Environment for the lab's own Node helpers: without tap's coverage hooks and loaders. */
export function helperEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k === 'NODE_OPTIONS' || k.startsWith('_TAPJS_') || k.startsWith('TS_NODE_')) continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

export interface ScriptResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a TypeScript or JavaScript file with this Node as a process of its own
 * (helperEnv: no tap loaders) and collects its output. The child is taken
 * down when this process exits (tap's timeout signal reaches only us).
 */
export function runNodeScript(script: string, args: readonly string[]): Promise<ScriptResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', script, ...args], {
      env: helperEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    const kill = () => child.kill('SIGTERM');
    process.once('exit', kill);
    child.on('close', (code) => {
      process.off('exit', kill);
      resolve({ code, stdout, stderr });
    });
  });
}
