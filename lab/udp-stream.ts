// A long-lived connected UDP client, as a DNS client is: one socket,
// connect()ed once, a request every intervalMs. A socket error (say
// ECONNABORTED when svcmap destroys the socket) or a failed send is
// recorded, and the client makes a new socket and connects again; a reply
// that does not come is recorded as ETIMEDOUT and the socket is kept (what
// a client stuck on a dead backend sees). With args.tcp the same over one
// TCP connection (the echo server's greeting, then a line per request).
// Run inside lab/client.ts (udpStreamStart / udpStreamStop).
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { Socket as NetSocket, connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { EchoReply, UdpStreamArgs, UdpStreamEvent, UdpStreamResult, UdpStreamStarted } from './protocol.ts';

function errCode(e: unknown): string {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && code !== '' ? code : 'EUNKNOWN';
}

function parseReply(buf: Buffer): EchoReply | undefined {
  try {
    const r = JSON.parse(buf.toString('utf8')) as EchoReply;
    return typeof r.pod === 'string' ? r : undefined;
  } catch {
    return undefined;
  }
}

type Outcome = { pod: string } | { code: string };

export class UdpStream {
  readonly #a: UdpStreamArgs;
  readonly #start = performance.now();
  readonly #events: UdpStreamEvent[] = [];
  #sock: UdpSocket | NetSocket | undefined;
  #local = '';
  #seq = 0;
  #stopped = false;
  #loop: Promise<void> | undefined;
  /** The exchange in flight: resolved by its reply, a socket error or its timeout. */
  #waiting: { payload: string; done: (o: Outcome) => void } | undefined;
  /** A socket error that came while nothing was in flight: reported by the next exchange. */
  #error: string | undefined;
  /** Callers of replies(), each told of every event recorded from now on. */
  #watchers = new Set<(e: UdpStreamEvent | undefined) => void>();

  constructor(a: UdpStreamArgs) {
    if (typeof a.ip !== 'string' || !Number.isInteger(a.port) || a.port < 1 || a.port > 65535) throw new Error('bad ip/port');
    if (!(a.intervalMs > 0) || !(a.timeoutMs > 0)) throw new Error('intervalMs and timeoutMs must be > 0');
    this.#a = a;
  }

  #at(): number {
    return Math.round(performance.now() - this.#start);
  }

  async #open(): Promise<void> {
    if (this.#a.tcp) return this.#openTcp();
    const sock = createSocket(this.#a.ip.includes(':') ? 'udp6' : 'udp4');
    this.#sock = sock;
    sock.on('message', (msg) => {
      const w = this.#waiting;
      if (!w || sock !== this.#sock) return;
      const reply = parseReply(msg);
      if (reply && reply.echo === w.payload) w.done({ pod: reply.pod });
    });
    sock.on('error', (e) => {
      if (sock !== this.#sock) return;
      if (this.#waiting) this.#waiting.done({ code: errCode(e) });
      else this.#error ??= errCode(e);
    });
    await new Promise<void>((resolve, reject) => {
      sock.once('error', reject);
      sock.bind(0, () => {
        sock.off('error', reject);
        resolve();
      });
    });
    await new Promise<void>((resolve, reject) => {
      sock.connect(this.#a.port, this.#a.ip, (err?: Error) => (err ? reject(err) : resolve()));
    });
    const local = sock.address();
    this.#local = `${local.address}:${local.port}`;
  }

  /** TCP (args.tcp): one connection, the greeting line first, then one echoed line per request. */
  async #openTcp(): Promise<void> {
    const sock = connect({ host: this.#a.ip, port: this.#a.port, noDelay: true });
    this.#sock = sock;
    let buf = '';
    let greeted: ((pod: string) => void) | undefined;
    const greeting = new Promise<string>((resolve) => (greeted = resolve));
    sock.setEncoding('utf8');
    sock.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const reply = parseReply(Buffer.from(buf.slice(0, nl)));
        buf = buf.slice(nl + 1);
        if (!reply) continue;
        if (reply.echo === undefined) greeted?.(reply.pod);
        else if (this.#waiting && reply.echo === this.#waiting.payload && sock === this.#sock) this.#waiting.done({ pod: reply.pod });
      }
    });
    const broken = (code: string) => {
      if (sock !== this.#sock) return;
      if (this.#waiting) this.#waiting.done({ code });
      else this.#error ??= code;
    };
    sock.on('error', (e) => broken(errCode(e)));
    sock.on('close', () => broken('ECLOSED'));
    await new Promise<void>((resolve, reject) => {
      sock.once('error', reject);
      sock.once('connect', () => {
        sock.off('error', reject);
        resolve();
      });
    });
    this.#local = `${sock.localAddress}:${sock.localPort}`;
    const timer = setTimeout(() => greeted?.(''), this.#a.timeoutMs);
    if ((await greeting) === '') throw Object.assign(new Error('no greeting'), { code: 'ETIMEDOUT' });
    clearTimeout(timer);
  }

  #close(): void {
    const s = this.#sock;
    this.#sock = undefined;
    try {
      if (s instanceof NetSocket) s.destroy();
      else s?.close();
    } catch {
      // already closed
    }
  }

  #exchange(): Promise<Outcome> {
    const sock = this.#sock!;
    const payload = JSON.stringify({ seq: this.#seq++, local: this.#local });
    return new Promise((resolve) => {
      const timer = setTimeout(() => done({ code: 'ETIMEDOUT' }), this.#a.timeoutMs);
      const done = (o: Outcome) => {
        if (this.#waiting?.payload !== payload) return;
        clearTimeout(timer);
        this.#waiting = undefined;
        resolve(o);
      };
      this.#waiting = { payload, done };
      if (this.#error !== undefined) {
        const code = this.#error;
        this.#error = undefined;
        return done({ code });
      }
      try {
        if (sock instanceof NetSocket) sock.write(`${payload}\n`);
        else {
          sock.send(payload, (err) => {
            if (err) done({ code: errCode(err) });
          });
        }
      } catch (e) {
        done({ code: errCode(e) });
      }
    });
  }

  /** Opens the socket and makes the first exchange, which must succeed; then keeps going until stop(). */
  async start(): Promise<UdpStreamStarted> {
    await this.#open();
    const first = await this.#exchange();
    if (!('pod' in first)) {
      this.#close();
      throw new Error(`the first exchange failed: ${first.code}`);
    }
    this.#events.push({ atMs: this.#at(), local: this.#local, pod: first.pod });
    this.#loop = this.#run();
    return { pod: first.pod, local: this.#local };
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      await new Promise((r) => setTimeout(r, this.#a.intervalMs));
      if (this.#stopped) break;
      if (!this.#sock) {
        try {
          await this.#open();
          this.#record({ atMs: this.#at(), local: this.#local, reconnected: true });
        } catch (e) {
          this.#record({ atMs: this.#at(), local: '', code: errCode(e) });
          this.#close();
          continue;
        }
      }
      const o = await this.#exchange();
      if ('pod' in o) {
        this.#record({ atMs: this.#at(), local: this.#local, pod: o.pod });
      } else {
        this.#record({ atMs: this.#at(), local: this.#local, code: o.code });
        if (o.code !== 'ETIMEDOUT') this.#close(); // a broken socket: connect again
      }
    }
  }

  #record(e: UdpStreamEvent): void {
    this.#events.push(e);
    for (const w of this.#watchers) w(e);
  }

  /**
   * Resolves with the events recorded until `n` more replies came (an error
   * on the socket before then, and its reconnection, among them), so a
   * caller knows the stream has seen whatever happened to its socket before
   * the call; rejects after timeoutMs without them, or when the stream stops.
   */
  replies(n: number, timeoutMs: number): Promise<UdpStreamEvent[]> {
    return new Promise((resolve, reject) => {
      const seen: UdpStreamEvent[] = [];
      const timer = setTimeout(() => done(new Error(`fewer than ${n} replies within ${timeoutMs} ms: ${JSON.stringify(seen)}`)), timeoutMs);
      const done = (err?: Error) => {
        clearTimeout(timer);
        this.#watchers.delete(watch);
        if (err) reject(err);
        else resolve(seen);
      };
      const watch = (e: UdpStreamEvent | undefined) => {
        if (!e) return done(new Error('the stream stopped'));
        seen.push(e);
        if (seen.filter((x) => x.pod !== undefined).length >= n) done();
      };
      this.#watchers.add(watch);
    });
  }

  async stop(): Promise<UdpStreamResult> {
    this.#stopped = true;
    for (const w of this.#watchers) w(undefined);
    this.#waiting?.done({ code: 'ESTOPPED' });
    await this.#loop;
    // An error that came after the last exchange (nothing was in flight).
    if (this.#error !== undefined) this.#events.push({ atMs: this.#at(), local: this.#local, code: this.#error });
    this.#close();
    const events = this.#events.filter((e) => e.code !== 'ESTOPPED');
    const byPod: Record<string, number> = {};
    const errors: Record<string, number> = {};
    for (const e of events) {
      if (e.pod !== undefined) byPod[e.pod] = (byPod[e.pod] ?? 0) + 1;
      if (e.code !== undefined) errors[e.code] = (errors[e.code] ?? 0) + 1;
    }
    return { events, byPod, errors, reconnects: events.filter((e) => e.reconnected).length };
  }
}
