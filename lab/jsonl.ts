// JSON-lines plumbing between the lab and its helper programs: read objects from a
// child's stdout, and wait for the child's readiness line (or its failure).

import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { outputTail } from './processes.ts';

export type JsonObject = Record<string, unknown>;

/** The JSON object lines a child writes to stdout, fanned out to subscribers (non-JSON lines are ignored). */
export class JsonLines {
  readonly #subs = new Set<(o: JsonObject) => void>();

  constructor(child: ChildProcess) {
    if (!child.stdout) throw new Error('child has no piped stdout');
    const rl = createInterface({ input: child.stdout });
    rl.on('line', (line) => {
      if (!line.startsWith('{')) return;
      let o: unknown;
      try {
        o = JSON.parse(line);
      } catch {
        return;
      }
      if (o !== null && typeof o === 'object') for (const s of [...this.#subs]) s(o as JsonObject);
    });
  }

  /** Subscribes; returns the unsubscribe function. */
  on(fn: (o: JsonObject) => void): () => void {
    this.#subs.add(fn);
    return () => this.#subs.delete(fn);
  }
}

/** Describes how a child ended, with the tail of its stderr. */
export function describeExit(child: ChildProcess, what: string): string {
  const how = child.signalCode !== null ? `signal ${child.signalCode}` : `code ${child.exitCode}`;
  const err = outputTail(child).stderr.trim();
  return `${what} exited (${how})${err ? `: ${err}` : ''}`;
}

/**
 * Resolves with the first stdout object having ready === true; rejects with the
 * child's stderr if it exits (or fails to spawn) first, or after timeoutMs.
 */
export function waitReady<T>(child: ChildProcess, lines: JsonLines, what: string, timeoutMs = 15_000): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const settle = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      unsubscribe();
      child.off('exit', onExit);
      child.off('error', onError);
      fn();
    };
    const onExit = (): void => {
      // Let the stderr pipe drain so the error message is complete.
      setTimeout(() => settle(() => reject(new Error(describeExit(child, what)))), 20);
    };
    const onError = (e: Error): void => settle(() => reject(new Error(`${what} failed to start: ${e.message}`)));
    const timer = setTimeout(
      () => settle(() => reject(new Error(`${what} not ready after ${timeoutMs} ms: ${outputTail(child).stderr.trim()}`))),
      timeoutMs,
    );
    child.once('exit', onExit);
    child.once('error', onError);
    const unsubscribe = lines.on((o) => {
      if (o.ready === true) settle(() => resolve(o as T));
    });
  });
}
