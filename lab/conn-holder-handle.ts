// ConnHolder: the handle on a running lab/conn-holder.ts process (see Lab.connHolder).
import type { ChildProcess } from 'node:child_process';
import type { JsonLines } from './jsonl.ts';
import { requestStats } from './echo-handle.ts';
import { setRef, stopProcess } from './processes.ts';

export interface ConnHolderConfig {
  ip: string;
  port: number;
  /** Connections kept open. */
  count: number;
  /** Pause before a broken connection is opened again (default 100 ms, jittered). */
  retryMs?: number;
}

export interface ConnHolderStats {
  /** Connections open that learnt their backend. */
  open: number;
  connecting: number;
  /** Open connections by the pod that answered. */
  byPod: Record<string, number>;
  reconnects: number;
  errors: Record<string, number>;
}

export class ConnHolder {
  readonly process: ChildProcess;
  readonly #lines: JsonLines;

  constructor(child: ChildProcess, lines: JsonLines) {
    this.process = child;
    this.#lines = lines;
    setRef(child, false);
  }

  stats(timeoutMs = 5000): Promise<ConnHolderStats> {
    return requestStats<ConnHolderStats>(this.process, this.#lines, 'connection holder', timeoutMs);
  }

  /** Ends it (stdin EOF, then SIGTERM/SIGKILL). */
  stop(): Promise<void> {
    this.process.stdin?.end();
    return stopProcess(this.process, 1000);
  }
}
