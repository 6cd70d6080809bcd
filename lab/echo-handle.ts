// EchoServer: the handle on a running lab/echo-server.ts process (see Lab.echoServer).

import type { ChildProcess } from 'node:child_process';
import type { EchoStats } from './protocol.ts';
import type { JsonLines } from './jsonl.ts';
import { describeExit } from './jsonl.ts';
import { hasExited, setRef, stopProcess } from './processes.ts';

/**
 * Writes "stats" to a lab helper's stdin and resolves with the `stats`
 * object of the next line that has one (the echo server's and the
 * connection holder's protocol).
 */
export function requestStats<T>(child: ChildProcess, lines: JsonLines, what: string, timeoutMs: number): Promise<T> {
  if (hasExited(child)) return Promise.reject(new Error(describeExit(child, what)));
  return new Promise((resolve, reject) => {
    setRef(child, true);
    const done = (): void => {
      clearTimeout(timer);
      unsubscribe();
      setRef(child, false);
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`${what}: no stats within ${timeoutMs} ms`));
    }, timeoutMs);
    const unsubscribe = lines.on((o) => {
      if (o.stats && typeof o.stats === 'object') {
        done();
        resolve(o.stats as T);
      }
    });
    child.stdin?.write('stats\n');
  });
}

export class EchoServer {
  readonly process: ChildProcess;
  readonly pid: number;
  /** The pod name the server reports in every reply. */
  readonly pod: string;
  readonly ip: string;
  readonly tcpPorts: readonly number[];
  readonly udpPorts: readonly number[];
  readonly #lines: JsonLines;

  constructor(child: ChildProcess, lines: JsonLines, info: { pod: string; ip: string; tcpPorts: number[]; udpPorts: number[] }) {
    if (child.pid === undefined) throw new Error('echo server has no pid');
    this.process = child;
    this.pid = child.pid;
    this.pod = info.pod;
    this.ip = info.ip;
    this.tcpPorts = info.tcpPorts;
    this.udpPorts = info.udpPorts;
    this.#lines = lines;
    setRef(child, false);
  }

  /** Open / accepted TCP connections and answered datagrams so far. */
  stats(timeoutMs = 5000): Promise<EchoStats> {
    return requestStats<EchoStats>(this.process, this.#lines, `echo server ${this.pod}`, timeoutMs);
  }

  /** SIGTERM, then SIGKILL; idempotent. (Lab.destroy stops it too.) */
  stop(): Promise<void> {
    return stopProcess(this.process, 1000);
  }
}
