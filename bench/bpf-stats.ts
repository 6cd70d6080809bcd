// bench/bpfstats.c as a child process: the kernel's BPF run-time statistics
// on while it runs (BPF_ENABLE_STATS: no sysctl changed), totals on request.
import { spawn } from 'node:child_process';
import { type JsonObject, JsonLines, waitReady } from '../lab/jsonl.ts';

export class BpfStats<T> {
  readonly #child: ReturnType<typeof spawn>;
  readonly #lines: JsonLines;

  private constructor(child: ReturnType<typeof spawn>) {
    this.#child = child;
    this.#lines = new JsonLines(child);
  }

  /** Undefined (logged) when the kernel will not count. */
  static async start<T>(bin: string, args: readonly string[]): Promise<BpfStats<T> | undefined> {
    const s = new BpfStats<T>(spawn(bin, args, { stdio: ['pipe', 'pipe', 'pipe'] }));
    try {
      await waitReady(s.#child, s.#lines, 'bpfstats');
      return s;
    } catch (err) {
      s.stop();
      process.stderr.write(`[bench] no BPF run-time statistics: ${(err as Error).message}\n`);
      return undefined;
    }
  }

  sample(): Promise<T> {
    return new Promise((resolve, reject) => {
      const off = this.#lines.on((o: JsonObject) => {
        off();
        if (o.error) reject(new Error(`bpfstats: ${String(o.error)}`));
        else resolve(o as unknown as T);
      });
      this.#child.stdin!.write('\n');
    });
  }

  stop(): void {
    this.#child.stdin?.end();
    this.#child.kill();
  }
}
