// A TCP proxy in front of lab/apiserver (plain HTTP, so the bytes can be
// seen) for two faults no API server makes on purpose, real or fake:
//   - stall(): every open connection stops moving bytes, both ways, and stays
//     open (a hung server, a half-open connection after a NAT or a firewall
//     dropped its state); new connections are not affected. What the test
//     waits on instead of time: the watches open (a request with watch=true),
//     the first bytes the server sent into a stalled connection (held back),
//     and the stalled connections the client itself gave up.
//   - cutNextEvent(): the next watch event is forwarded only in part (half of
//     the bytes that carry it), then both sides are closed: a stream cut in
//     the middle of an event.
import { type Server, type Socket, connect, createServer } from 'node:net';

interface Pair {
  client: Socket;
  upstream: Socket;
  stalled: boolean;
  /** A watch request went over it. */
  watch: boolean;
}

export interface FaultProxy {
  /** http://127.0.0.1:PORT */
  url: string;
  /** Stalls every open connection; returns how many. */
  /** Stalls every open connection; returns how many of them carry a watch. */
  stall(): number;
  /** Open connections that carry a watch. */
  openWatches(): number;
  /** Resolves when the server has sent bytes into a stalled connection (they are held back from the client). */
  heldBack(): Promise<void>;
  /** Stalled connections the client closed (gave up on). */
  stalledGivenUp(): number;
  /** Resolves once an event has been cut (its first half forwarded, the connection closed). */
  cutNextEvent(): Promise<void>;
  close(): Promise<void>;
}

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const { hostname, port } = new URL(target);
  const pairs = new Set<Pair>();
  let cut: (() => void) | undefined;
  let held: (() => void) | undefined;
  let givenUp = 0;
  const server: Server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    const pair: Pair = { client, upstream, stalled: false, watch: false };
    pairs.add(pair);
    const close = () => {
      if (!pairs.has(pair)) return;
      client.destroy();
      upstream.destroy();
      pairs.delete(pair);
    };
    // A stalled connection shows the client nothing, not even the server's close.
    const upstreamGone = () => {
      if (!pair.stalled) close();
    };
    client.on('error', close);
    client.on('close', () => {
      if (pair.stalled && pairs.has(pair)) givenUp++;
      close();
    });
    upstream.on('error', upstreamGone);
    upstream.on('close', upstreamGone);
    client.on('data', (d: Buffer) => {
      if (pair.stalled) return;
      if (/^GET \S*[?&]watch=(true|1)/m.test(d.toString('latin1'))) pair.watch = true;
      upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (pair.stalled) {
        held?.();
        held = undefined;
        return;
      }
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
      return [...pairs].filter((p) => p.watch).length;
    },
    openWatches() {
      return [...pairs].filter((p) => p.watch && !p.stalled).length;
    },
    heldBack() {
      return new Promise((resolve) => (held = resolve));
    },
    stalledGivenUp() {
      return givenUp;
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
