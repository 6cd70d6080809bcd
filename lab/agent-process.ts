// Runs the real `svcmap agent` (bin/svcmap, the compiled CLI) as a child
// process and follows its JSON log, so tests can wait for a sync to land.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The CLI; SVCMAP_BIN runs another build's (the bench, for a before/after). */
export const SVCMAP = process.env.SVCMAP_BIN ?? join(ROOT, 'bin', 'svcmap');

/** Tests run the compiled CLI; refuse to test a dist/ older than the sources. */
export function assertBuilt(): void {
  const stamp = join(ROOT, 'dist', '.stamp');
  if (!existsSync(stamp)) throw new Error('svcmap is not built: run make build first');
  const built = statSync(stamp).mtimeMs;
  const walk = (d: string): string | undefined => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) {
        const hit = walk(p);
        if (hit) return hit;
      } else if (e.name.endsWith('.ts') && statSync(p).mtimeMs > built) return p;
    }
    return undefined;
  };
  const newer = walk(join(ROOT, 'src'));
  if (newer) throw new Error(`dist/ is older than ${newer}: run make build first`);
}

export type LogLine = Record<string, unknown> & { msg?: string; level?: number };

export class AgentProcess {
  readonly child: ChildProcess;
  readonly lines: LogLine[] = [];
  stderr = '';
  #waiters: Array<{ pred: (l: LogLine) => boolean; from: number; resolve: (l: LogLine) => void }> = [];
  readonly exited: Promise<number | null>;

  /**
   * spawnIn: how to start the process (default: here, in this network
   * namespace); e.g. `(cmd, args) => lab.spawn(node, cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] })`
   * runs the agent inside a node namespace, where its tc programs attach.
   * The default runs it under `setpriv --pdeathsig KILL`, as lab.spawn does: it
   * lives in no lab namespace or cgroup that a sweep would clean, so it must die
   * with this process even when this process is SIGKILLed. setpriv execs the
   * agent, so child.pid is the agent's pid.
   */
  constructor(args: string[], spawnIn?: (cmd: string, args: string[]) => ChildProcess) {
    this.child = spawnIn
      ? spawnIn(SVCMAP, ['agent', ...args])
      : spawn('setpriv', ['--pdeathsig', 'KILL', '--', SVCMAP, 'agent', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const text = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let line: LogLine;
        try {
          line = JSON.parse(text) as LogLine;
        } catch {
          line = { msg: text, raw: true };
        }
        this.lines.push(line);
        const idx = this.lines.length - 1;
        this.#waiters = this.#waiters.filter((w) => {
          if (idx >= w.from && w.pred(line)) {
            w.resolve(line);
            return false;
          }
          return true;
        });
      }
    });
    this.child.stderr!.setEncoding('utf8').on('data', (c: string) => {
      this.stderr += c;
    });
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
  }

  /** The index the next log line will get; pass it to waitFor to ignore older lines. */
  mark(): number {
    return this.lines.length;
  }

  waitFor(pred: (l: LogLine) => boolean, opts: { from?: number; timeoutMs?: number; what?: string } = {}): Promise<LogLine> {
    const from = opts.from ?? 0;
    const hit = this.lines.slice(from).find(pred);
    if (hit) return Promise.resolve(hit);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(
          new Error(
            `agent: no log line ${opts.what ?? ''} within ${opts.timeoutMs ?? 15000} ms; last lines:\n${this.lines
              .slice(-8)
              .map((l) => JSON.stringify(l))
              .join('\n')}\nstderr: ${this.stderr}`,
          ),
        );
      }, opts.timeoutMs ?? 15000);
      const onExit = (code: number | null) => {
        clearTimeout(timer);
        reject(
          new Error(
            `agent exited with ${code} while waiting for ${opts.what ?? 'a log line'}; stderr: ${this.stderr}\nlast lines:\n${this.lines
              .slice(-8)
              .map((l) => JSON.stringify(l))
              .join('\n')}`,
          ),
        );
      };
      this.child.once('exit', onExit);
      this.#waiters.push({
        pred,
        from,
        resolve: (l) => {
          clearTimeout(timer);
          this.child.off('exit', onExit);
          resolve(l);
        },
      });
    });
  }

  /** Waits for a sync that finished after `from`. */
  waitForSync(from = 0, timeoutMs = 15000): Promise<LogLine> {
    return this.waitFor((l) => l.msg === 'sync done', { from, timeoutMs, what: '"sync done"' });
  }

  kill(sig: NodeJS.Signals = 'SIGTERM'): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(sig);
  }
}
