// The TCP side: an http.Server on 127.0.0.1 that can be torn down abruptly and brought
// back on the same port, which is what stop/restart/outage faults need. Node's
// server.close() waits for open connections; a dying apiserver does not, so every
// socket is tracked and destroyed.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export const HOST = '127.0.0.1';

export class Listener {
  readonly #handler: (req: IncomingMessage, res: ServerResponse) => void;
  readonly #sockets = new Set<Socket>();
  #server: Server | undefined;
  #port = 0;

  readonly #keepAlive: boolean;

  /**
   * keepAlive false (the default for tests) answers every request with "Connection:
   * close". With keep-alive, a client in the same process can pick an idle pooled socket
   * that stop()/restart() already destroyed before it has seen the FIN, and fail with
   * "other side closed": real, but a race no test should depend on by accident.
   */
  constructor(handler: (req: IncomingMessage, res: ServerResponse) => void, opts: { keepAlive?: boolean } = {}) {
    this.#handler = handler;
    this.#keepAlive = opts.keepAlive ?? false;
  }

  /** The bound port (kept after close, so that a restart can reuse it). */
  get port(): number {
    return this.#port;
  }

  get listening(): boolean {
    return this.#server !== undefined;
  }

  /** Listen on port (0 = random); resolves with the bound port. */
  async listen(port: number): Promise<number> {
    if (this.#server) throw new Error('test API server: already listening');
    const server = createServer((req, res) => {
      if (!this.#keepAlive) res.shouldKeepAlive = false;
      this.#handler(req, res);
    });
    server.on('connection', (s: Socket) => {
      this.#sockets.add(s);
      s.once('close', () => this.#sockets.delete(s));
    });
    // Long watches must not be cut by Node's own request timeouts.
    server.requestTimeout = 0;
    server.headersTimeout = 0;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: HOST, port, exclusive: true }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const addr = server.address();
    if (addr === null || typeof addr === 'string') throw new Error('test API server: no TCP address');
    this.#server = server;
    this.#port = addr.port;
    return addr.port;
  }

  /** Stop accepting (new connects get ECONNREFUSED) and destroy every open connection at once. */
  async close(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
    await closed;
  }
}
