// The lab's traffic client: a standalone program run by `node lab/client.ts` inside a
// pod namespace (and, optionally, a cgroup), see Lab.client / LabClient. Never imported.
//
// stdin: one JSON request per line {"id","op","args"}; requests run concurrently.
// stdout: one readiness line {"ready":true,"pid"}, then one response per request
// {"id","ok":true,"result"} or {"id","ok":false,"error"}. End of stdin exits.
// Every network operation has a timeout; failures are counted by errno code.

import { connect, createServer, type Socket } from 'node:net';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createInterface } from 'node:readline';
import { readFileSync, readlinkSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import type {
  BindArgs,
  BindResult,
  ClientReady,
  ClientRequest,
  ClientResponse,
  Counts,
  EchoReply,
  TcpConnectArgs,
  TcpLoopArgs,
  TcpLoopResult,
  TcpResult,
  UdpResult,
  UdpSendArgs,
  WhoAmI,
} from './protocol.ts';
import { hostPort, ipOf } from './protocol.ts';
import type { UdpStreamArgs, UdpStreamRepliesArgs } from './protocol.ts';
import { UdpStream } from './udp-stream.ts';

function errCode(e: unknown): string {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && code !== '' ? code : 'EUNKNOWN';
}

function checkArgs(a: { ip: string; port: number; count: number; timeoutMs: number }): void {
  if (typeof a.ip !== 'string' || !Number.isInteger(a.port) || a.port < 1 || a.port > 65535) throw new Error('bad ip/port');
  if (!Number.isInteger(a.count) || a.count < 0) throw new Error('bad count');
  if (!(a.timeoutMs > 0)) throw new Error('timeoutMs must be > 0');
}

class Tally {
  readonly counts: Counts = { ok: 0, failed: 0, errors: {}, byPod: {}, seenFrom: [], durationMs: 0 };
  readonly #seen = new Set<string>();
  readonly #start = performance.now();

  success(reply: EchoReply): void {
    this.counts.ok++;
    this.counts.byPod[reply.pod] = (this.counts.byPod[reply.pod] ?? 0) + 1;
    const ip = ipOf(reply.peer);
    if (!this.#seen.has(ip)) {
      this.#seen.add(ip);
      this.counts.seenFrom.push(ip);
    }
  }

  failure(code: string): void {
    this.counts.failed++;
    this.counts.errors[code] = (this.counts.errors[code] ?? 0) + 1;
  }

  elapsed(): number {
    return performance.now() - this.#start;
  }

  finish(): Counts {
    this.counts.durationMs = this.elapsed();
    return this.counts;
  }
}

type ConnOutcome = { ok: true; reply: EchoReply; peer: string; connectMs: number } | { ok: false; code: string };

function parseReply(line: string): EchoReply | undefined {
  try {
    const r = JSON.parse(line) as EchoReply;
    return typeof r.pod === 'string' && typeof r.peer === 'string' ? r : undefined;
  } catch {
    return undefined;
  }
}

/** One TCP connection: connect, read the greeting line, close. */
function tcpOnce(ip: string, port: number, timeoutMs: number, reset: boolean): Promise<ConnOutcome> {
  return new Promise((resolve) => {
    const start = performance.now();
    let connectMs = -1;
    let peer = '';
    let buf = '';
    let done = false;
    const sock: Socket = connect({ host: ip, port, noDelay: true });
    const finish = (o: ConnOutcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (reset && !sock.destroyed) sock.resetAndDestroy();
      else sock.destroy();
      resolve(o);
    };
    const timer = setTimeout(() => finish({ ok: false, code: 'ETIMEDOUT' }), timeoutMs);
    sock.setEncoding('utf8');
    sock.on('connect', () => {
      connectMs = performance.now() - start;
      peer = hostPort(sock.remoteAddress, sock.remotePort);
    });
    sock.on('data', (chunk: string) => {
      buf += chunk;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      const reply = parseReply(buf.slice(0, nl));
      finish(reply ? { ok: true, reply, peer, connectMs } : { ok: false, code: 'EBADREPLY' });
    });
    sock.on('error', (e) => finish({ ok: false, code: errCode(e) }));
    sock.on('close', () => finish({ ok: false, code: connectMs < 0 ? 'ECLOSED' : 'ENOREPLY' }));
  });
}

async function tcpConnect(a: TcpConnectArgs): Promise<TcpResult> {
  checkArgs(a);
  const tally = new Tally();
  const peers = new Set<string>();
  const connectMs: number[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < a.count) {
      next++;
      const o = await tcpOnce(a.ip, a.port, a.timeoutMs, a.reset ?? false);
      if (o.ok) {
        tally.success(o.reply);
        peers.add(o.peer);
        connectMs.push(o.connectMs);
      } else {
        tally.failure(o.code);
      }
    }
  };
  const conc = Math.max(1, Math.min(a.concurrency ?? 1, a.count || 1));
  await Promise.all(Array.from({ length: conc }, worker));
  return { ...tally.finish(), peerNames: [...peers], connectMs };
}

async function tcpLoop(a: TcpLoopArgs): Promise<TcpLoopResult> {
  checkArgs(a);
  const tally = new Tally();
  const peers = new Set<string>();
  const connectMs: number[] = [];
  const failures: TcpLoopResult['failures'] = [];
  for (let i = 0; i < a.count; i++) {
    const o = await tcpOnce(a.ip, a.port, a.timeoutMs, a.reset ?? false);
    if (o.ok) {
      tally.success(o.reply);
      peers.add(o.peer);
      connectMs.push(o.connectMs);
    } else {
      tally.failure(o.code);
      failures.push({ i, atMs: tally.elapsed(), code: o.code });
    }
  }
  return { ...tally.finish(), peerNames: [...peers], connectMs, failures };
}

async function udpSend(a: UdpSendArgs): Promise<UdpResult> {
  checkArgs(a);
  const tally = new Tally();
  const sources = new Set<string>();
  const sock: UdpSocket = createSocket(a.ip.includes(':') ? 'udp6' : 'udp4');
  const nonce = randomBytes(4).toString('hex');
  // The reply we are waiting for (matched by its echo of our payload); late replies to earlier datagrams are ignored.
  let waiting: { payload: string; resolve: (o: { reply: EchoReply; from: string } | { code: string }) => void } | undefined;
  sock.on('message', (msg, rinfo) => {
    const reply = parseReply(msg.toString('utf8'));
    if (!waiting) return;
    if (!reply) {
      waiting.resolve({ code: 'EBADREPLY' });
      return;
    }
    if (reply.echo !== waiting.payload) return;
    waiting.resolve({ reply, from: hostPort(rinfo.address, rinfo.port) });
  });
  // Connected UDP sockets report ICMP errors (e.g. ECONNREFUSED) as socket errors.
  sock.on('error', (e) => waiting?.resolve({ code: errCode(e) }));
  try {
    await new Promise<void>((resolve, reject) => {
      sock.once('error', reject);
      sock.bind(0, () => {
        sock.off('error', reject);
        resolve();
      });
    });
    if (a.connected) {
      const code = await new Promise<string | undefined>((resolve) => {
        sock.connect(a.port, a.ip, (err?: Error) => resolve(err ? errCode(err) : undefined));
      });
      if (code !== undefined) {
        for (let i = 0; i < a.count; i++) tally.failure(code);
        return { ...tally.finish(), replySources: [] };
      }
    }
    for (let i = 0; i < a.count; i++) {
      const payload = JSON.stringify({ seq: i, nonce });
      const outcome = await new Promise<{ reply: EchoReply; from: string } | { code: string }>((resolve) => {
        const timer = setTimeout(() => done({ code: 'ETIMEDOUT' }), a.timeoutMs);
        const done = (o: { reply: EchoReply; from: string } | { code: string }): void => {
          clearTimeout(timer);
          waiting = undefined;
          resolve(o);
        };
        waiting = { payload, resolve: done };
        const cb = (err: Error | null): void => {
          if (err) done({ code: errCode(err) });
        };
        if (a.connected) sock.send(payload, cb);
        else sock.send(payload, a.port, a.ip, cb);
      });
      if ('reply' in outcome) {
        tally.success(outcome.reply);
        sources.add(outcome.from);
      } else {
        tally.failure(outcome.code);
      }
    }
    return { ...tally.finish(), replySources: [...sources] };
  } finally {
    sock.close();
  }
}

function whoami(): WhoAmI {
  const procCgroup = readFileSync('/proc/self/cgroup', 'utf8');
  const v2 = procCgroup.split('\n').find((l) => l.startsWith('0::'));
  return { pid: process.pid, procCgroup, cgroup: v2 ? v2.slice(3) : '', netns: readlinkSync('/proc/self/ns/net') };
}

/**
 * bind() (TCP: and listen, as a server does; [::] dual-stack, Node's default)
 * to ip:port, then close: 'ok' or the errno code.
 */
function bindOnce(a: BindArgs): Promise<BindResult> {
  return new Promise((resolve) => {
    if (a.proto === 'tcp') {
      const server = createServer();
      server.once('error', (e) => resolve({ result: errCode(e) }));
      server.listen({ host: a.ip, port: a.port, exclusive: true }, () => server.close(() => resolve({ result: 'ok' })));
      return;
    }
    const sock = createSocket(a.ip.includes(':') ? 'udp6' : 'udp4');
    sock.once('error', (e) => {
      sock.close();
      resolve({ result: errCode(e) });
    });
    sock.bind({ address: a.ip, port: a.port, exclusive: true }, () => sock.close(() => resolve({ result: 'ok' })));
  });
}

const streams = new Map<number, UdpStream>();
let nextStream = 1;

async function handle(req: ClientRequest): Promise<unknown> {
  switch (req.op) {
    case 'tcpConnect':
      return tcpConnect(req.args as TcpConnectArgs);
    case 'tcpLoop':
      return tcpLoop(req.args as TcpLoopArgs);
    case 'udpSend':
      return udpSend(req.args as UdpSendArgs);
    case 'whoami':
      return whoami();
    case 'bind':
      return bindOnce(req.args as BindArgs);
    case 'udpStreamStart': {
      const s = new UdpStream(req.args as UdpStreamArgs);
      const started = await s.start();
      const stream = nextStream++;
      streams.set(stream, s);
      return { ...started, stream };
    }
    case 'udpStreamReplies': {
      const a = req.args as UdpStreamRepliesArgs;
      const s = streams.get(a.stream);
      if (!s) throw new Error(`no UDP stream ${a.stream}`);
      return s.replies(a.replies, a.timeoutMs);
    }
    case 'udpStreamStop': {
      const id = (req.args as { stream: number }).stream;
      const s = streams.get(id);
      if (!s) throw new Error(`no UDP stream ${id}`);
      streams.delete(id);
      return s.stop();
    }
    default:
      throw new Error(`unknown op ${String((req as { op: unknown }).op)}`);
  }
}

function respond(r: ClientResponse): void {
  process.stdout.write(`${JSON.stringify(r)}\n`);
}

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  if (line.trim() === '') return;
  let req: ClientRequest;
  try {
    req = JSON.parse(line) as ClientRequest;
  } catch {
    process.stderr.write(`client: bad request line: ${line.slice(0, 200)}\n`);
    return;
  }
  handle(req).then(
    (result) => respond({ id: req.id, ok: true, result }),
    (e: unknown) => respond({ id: req.id, ok: false, error: e instanceof Error ? e.message : String(e) }),
  );
});
rl.on('close', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));

const ready: ClientReady = { ready: true, pid: process.pid };
process.stdout.write(`${JSON.stringify(ready)}\n`);
