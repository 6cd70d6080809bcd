// Lists and watches bound to the API server in use (api-servers.ts). Each
// request remembers the server it went to. Its failure is reported as that
// server's (ServerFailure) when the server stopped answering, so the source
// can move on; once the agent has moved, whatever is still open or pending
// on the server it left is ended at once, and its late events and errors are
// dropped: the informers go on against the new server only.
//
// A silent stall: a watch that brings no event (bookmarks count) for the
// bound (DEFAULT_STALL_MS says why 75 s) is not proof enough, since a watch
// of a resource that does not change may get no bookmark at all
// (kube-apiserver sends one only past the watch's resourceVersion). So the
// server is asked (/readyz, PROBE_MS at most): answered, the silent watch is
// ended and the informer watches again from its resourceVersion on the same
// server; unanswered, the server counts as stalled. The check waits for the
// I/O already received: a timer can fire right after the event loop was busy
// (a BPF load, a big sync) with events still unread. A list page gets twice
// the bound, as a plain timeout.
import { type KubeConfig, Watch } from './client-node.ts';
import type { ApiServers } from './api-servers.ts';
import { apiRequest } from './request.ts';
import { DEFAULT_STALL_MS, ServerFailure, whyUnanswered } from './server-failure.ts';

/** How long the server may take to answer /readyz once a watch has been silent for the bound. */
export const PROBE_MS = 10_000;

type WatchArgs = Parameters<Watch['watch']>;

export class ServerBound {
  readonly servers: ApiServers;
  readonly stallMs: number;
  readonly #watch: Watch;
  readonly #kc: KubeConfig;
  /** Aborted when the agent leaves the server in use: its lists end. */
  #leaving = new AbortController();
  /** Ends each open or pending watch, with the reason. */
  readonly #open = new Set<(reason: string) => void>();

  constructor(kc: KubeConfig, servers: ApiServers, stallMs = DEFAULT_STALL_MS) {
    this.servers = servers;
    this.stallMs = stallMs;
    this.#kc = kc;
    this.#watch = new Watch(kc);
    // client-node's inactivity timeout (30 s by default) would end a quiet
    // watch before the minute's bookmark comes; the stall check here decides,
    // client-node's (a private field in 2.x's types, with no option for it;
    // test/apiserver/client-node-behaviour.test.ts pins its behaviour) stays
    // behind it as a backstop.
    (this.#watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = 2 * stallMs + PROBE_MS;
  }

  get #timeout(): string {
    return `no answer for ${this.stallMs / 1000}s (no event, no bookmark)`;
  }

  /** Whether the server in use answers /readyz within PROBE_MS. */
  async #answers(): Promise<boolean> {
    try {
      const res = await apiRequest(this.#kc, {
        method: 'GET',
        url: '/readyz',
        signal: AbortSignal.timeout(Math.min(PROBE_MS, this.stallMs)),
      });
      await res.arrayBuffer();
      return res.status === 200;
    } catch {
      return false;
    }
  }

  /** The signal a list page goes with: the stall bound, and the move away from the server. */
  listSignal(): AbortSignal {
    return AbortSignal.any([this.#leaving.signal, AbortSignal.timeout(2 * this.stallMs)]);
  }

  /** A list's failure, as the informer should see it. */
  listFailure(server: string, err: unknown): unknown {
    if (server !== this.servers.current) return new ServerFailure(server, 'left for another API server', err);
    const why = whyUnanswered(err, this.#timeout);
    return why ? new ServerFailure(server, why, err) : err;
  }

  /** The agent moved to another server: end what is open on the one it left. */
  left(): void {
    this.#leaving.abort();
    this.#leaving = new AbortController();
    for (const end of [...this.#open]) end('left for another API server');
  }

  /**
   * client-node's Watch.watch on the server in use. `progress` is told of
   * each event (bookmarks too). Resolves with the watch's controller, or, when
   * the agent leaves the server before the watch is open, with one that stands
   * in for it; `done` is then called with a ServerFailure on a later turn
   * (after the informer has taken the controller).
   */
  watch(path: WatchArgs[0], query: WatchArgs[1], cb: WatchArgs[2], done: WatchArgs[3], progress: () => void): Promise<AbortController> {
    const server = this.servers.current;
    let finished = false;
    let real: AbortController | undefined;
    let standIn: ((c: AbortController) => void) | undefined;
    let heard = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const finish = (err: unknown) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      this.#open.delete(end);
      real?.abort();
      done(err);
    };
    // Due when the bound has passed since the last event; checked after pending I/O (setImmediate).
    const arm = () => {
      timer = setTimeout(
        () =>
          setImmediate(() => {
            if (finished) return;
            if (Date.now() - heard < this.stallMs) return arm();
            if (server !== this.servers.current) return end('left for another API server');
            void this.#answers().then((ok) => {
              // A quiet resource: watch again from its resourceVersion, at once (client-node
              // re-watches after a TimeoutError without its reconnect back-off).
              if (ok) finish(new DOMException('a quiet watch, renewed', 'TimeoutError'));
              else end(`no event for ${this.stallMs / 1000}s and /readyz unanswered`);
            });
          }),
        Math.max(0, heard + this.stallMs - Date.now()),
      );
    };
    const end = (reason: string) => {
      if (finished) return;
      standIn?.(new AbortController());
      setImmediate(() => finish(new ServerFailure(server, reason)));
    };
    this.#open.add(end);
    arm();
    const opened = this.#watch
      .watch(
        path,
        query,
        (phase, obj, raw) => {
          if (finished) return;
          heard = Date.now();
          progress();
          cb(phase, obj, raw);
        },
        (err) => {
          if (!err) return finish(null); // the server ended the watch: the informer watches again
          const why = whyUnanswered(err, this.#timeout);
          finish(why ? new ServerFailure(server, why, err) : err);
        },
      )
      .then((c) => {
        real = c;
        if (finished) c.abort();
        return c;
      });
    return Promise.race([opened, new Promise<AbortController>((r) => (standIn = r))]);
  }
}
