// A TCP proxy in front of lab/apiserver (plain HTTP, so the bytes can be
// seen) for two faults no API server makes on purpose, real or fake:
//   - stall(): every open connection stops moving bytes, both ways, and stays
//     open (a hung server, a half-open connection after a NAT or a firewall
//     dropped its state); new connections are not affected.
//   - cutNextEvent(): the next watch event is forwarded only in part (half of
//     the bytes that carry it), then both sides are closed: a stream cut in
//     the middle of an event.
import { type Server, type Socket, connect, createServer } from 'node:net';

interface Pair {
  client: Socket;
  upstream: Socket;
  stalled: boolean;
}

export interface FaultProxy {
  /** http://127.0.0.1:PORT */
  url: string;
  /** Stalls every open connection; returns how many. */
  stall(): number;
  /** Resolves once an event has been cut (its first half forwarded, the connection closed). */
  cutNextEvent(): Promise<void>;
  close(): Promise<void>;
}

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const { hostname, port } = new URL(target);
  const pairs = new Set<Pair>();
  let cut: (() => void) | undefined;
  const server: Server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    const pair: Pair = { client, upstream, stalled: false };
    pairs.add(pair);
    const close = () => {
      client.destroy();
      upstream.destroy();
      pairs.delete(pair);
    };
    // A stalled connection shows the client nothing, not even the server's close.
    const upstreamGone = () => {
      if (!pair.stalled) close();
    };
    client.on('error', close);
    client.on('close', close);
    upstream.on('error', upstreamGone);
    upstream.on('close', upstreamGone);
    client.on('data', (d: Buffer) => {
      if (!pair.stalled) upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (pair.stalled) return;
      if (cut && d.includes('"type":"')) {
        const done = cut;
        cut = undefined;
        client.write(d.subarray(0, d.indexOf('"type":"') + Math.floor((d.length - d.indexOf('"type":"')) / 2)), () => {
          close();
          done();
        });
        return;
      }
      client.write(d);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('fault proxy has no port');
  return {
    url: `http://127.0.0.1:${addr.port}`,
    stall() {
      for (const p of pairs) p.stalled = true;
      return pairs.size;
    },
    cutNextEvent() {
      return new Promise((resolve) => (cut = resolve));
    },
    async close() {
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      pairs.clear();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
