// LabClient: the typed, promise-based handle on a running lab/client.ts process.
// Requests carry ids, so several can be in flight (e.g. a tcpLoop while the test
// kills the agent). The child is ref'd only while requests are pending, so an idle
// client never keeps the test process alive.

import type { ChildProcess } from 'node:child_process';
import type {
  BindArgs,
  BindResult,
  ClientOp,
  ClientOps,
  TcpConnectArgs,
  TcpLoopArgs,
  TcpLoopResult,
  TcpResult,
  UdpResult,
  UdpSendArgs,
  UdpStreamArgs,
  UdpStreamEvent,
  UdpStreamResult,
  UdpStreamStarted,
  WhoAmI,
} from './protocol.ts';
import { describeExit, type JsonLines } from './jsonl.ts';
import { hasExited, setRef, stopProcess } from './processes.ts';

/** Slack on top of an operation's own worst case before the handle gives up on the client. */
const GUARD_SLACK_MS = 10_000;

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

export class LabClient {
  readonly process: ChildProcess;
  readonly pid: number;
  /** The pod (namespace owner) the client runs in. */
  readonly pod: string;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #closed = false;

  constructor(child: ChildProcess, lines: JsonLines, pod: string) {
    if (child.pid === undefined) throw new Error('client process has no pid');
    this.process = child;
    this.pid = child.pid;
    this.pod = pod;
    lines.on((o) => {
      if (typeof o.id !== 'number') return;
      const p = this.#pending.get(o.id);
      if (!p) return;
      this.#settle(o.id);
      if (o.ok === true) p.resolve(o.result);
      else p.reject(new Error(`client ${pod}: ${String(o.error)}`));
    });
    child.on('exit', () => {
      const err = new Error(describeExit(child, `client ${pod}`));
      for (const [id, p] of [...this.#pending]) {
        this.#settle(id);
        p.reject(err);
      }
    });
    setRef(child, false);
  }

  #settle(id: number): void {
    const p = this.#pending.get(id);
    if (!p) return;
    clearTimeout(p.timer);
    this.#pending.delete(id);
    if (this.#pending.size === 0) setRef(this.process, false);
  }

  #request<K extends ClientOp>(op: K, args: ClientOps[K]['args'], guardMs: number): Promise<ClientOps[K]['result']> {
    if (this.#closed) return Promise.reject(new Error(`client ${this.pod} is closed`));
    if (hasExited(this.process) || !this.process.stdin?.writable) {
      return Promise.reject(new Error(describeExit(this.process, `client ${this.pod}`)));
    }
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#settle(id);
        reject(new Error(`client ${this.pod}: ${op} got no answer within ${guardMs} ms`));
      }, guardMs);
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      setRef(this.process, true);
      this.process.stdin?.write(`${JSON.stringify({ id, op, args })}\n`);
    });
  }

  /** count connections (concurrency at a time); each reads the greeting line, records who answered, closes. */
  tcpConnect(args: TcpConnectArgs): Promise<TcpResult> {
    const rounds = Math.ceil(args.count / Math.max(1, args.concurrency ?? 1));
    return this.#request('tcpConnect', args, rounds * args.timeoutMs + GUARD_SLACK_MS);
  }

  /** count sequential connections as fast as possible; also reports when each failure happened. Not awaiting is fine. */
  tcpLoop(args: TcpLoopArgs): Promise<TcpLoopResult> {
    return this.#request('tcpLoop', args, args.count * args.timeoutMs + GUARD_SLACK_MS);
  }

  /** count request/reply datagrams on one socket, connected (connect+send) or not (sendto each time). */
  udpSend(args: UdpSendArgs): Promise<UdpResult> {
    return this.#request('udpSend', args, args.count * args.timeoutMs + GUARD_SLACK_MS);
  }

  /** Opens a connected UDP socket that sends every intervalMs, and reconnects after a socket error, until udpStreamStop. */
  udpStreamStart(args: UdpStreamArgs): Promise<UdpStreamStarted> {
    return this.#request('udpStreamStart', args, args.timeoutMs + GUARD_SLACK_MS);
  }

  /** Waits until a stream has `replies` more replies: the events recorded meanwhile (errors and reconnections among them). */
  udpStreamReplies(stream: number, replies: number, timeoutMs = 15_000): Promise<UdpStreamEvent[]> {
    return this.#request('udpStreamReplies', { stream, replies, timeoutMs }, timeoutMs + GUARD_SLACK_MS);
  }

  /** Stops a stream: every exchange, error and reconnection it saw. */
  udpStreamStop(stream: number): Promise<UdpStreamResult> {
    return this.#request('udpStreamStop', { stream }, GUARD_SLACK_MS);
  }

  /** bind() a socket to ip:port (TCP: and listen) and close it: 'ok' or the errno code. */
  bind(args: BindArgs): Promise<BindResult> {
    return this.#request('bind', args, GUARD_SLACK_MS);
  }

  /** The client's pid, /proc/self/cgroup and netns. */
  whoami(): Promise<WhoAmI> {
    return this.#request('whoami', {}, GUARD_SLACK_MS);
  }

  /** Ends the client (stdin EOF, then SIGTERM/SIGKILL if needed). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.process.stdin?.end();
    const exited = await new Promise<boolean>((resolve) => {
      if (hasExited(this.process)) return resolve(true);
      const t = setTimeout(() => resolve(false), 500);
      this.process.once('exit', () => {
        clearTimeout(t);
        resolve(true);
      });
    });
    if (!exited) await stopProcess(this.process, 500);
  }
}
