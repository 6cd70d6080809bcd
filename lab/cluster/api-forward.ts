// The API server on a loopback port of the root namespace, for in-process
// clients (client-node informers in tests): a listener on 127.0.0.1 whose
// connections are piped to a relay inside the lab (relay.ts). Like
// `kubectl port-forward`: a port, no address or route.

import type { ChildProcess } from 'node:child_process';
import { connect, createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { Lab, LabNs } from '../lab.ts';
import { JsonLines, waitReady } from '../jsonl.ts';
import { helperEnv, stopProcess } from '../processes.ts';

const RELAY = fileURLToPath(new URL('./relay.ts', import.meta.url));

export interface ApiForward {
  /** https://127.0.0.1:PORT */
  url: string;
  /** Cuts every open connection and refuses new ones (the port stays), like a network outage. */
  pause(): void;
  resume(): void;
  close(): Promise<void>;
}

export async function forwardApi(lab: Lab, ns: LabNs, socketPath: string, host: string, port: number): Promise<ApiForward> {
  const relay: ChildProcess = lab.spawn(
    ns,
    process.execPath,
    ['--disable-warning=ExperimentalWarning', RELAY, socketPath, host, String(port)],
    {
      env: helperEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  await waitReady(relay, new JsonLines(relay), `API relay in ${ns.name}`);
  let paused = false;
  const open = new Set<() => void>();
  const pause = (): void => {
    paused = true;
    for (const close of [...open]) close();
  };
  const server: Server = createServer((c) => {
    if (paused) {
      c.destroy();
      return;
    }
    const u = connect(socketPath);
    const close = () => {
      c.destroy();
      u.destroy();
      open.delete(close);
    };
    open.add(close);
    c.on('error', close);
    u.on('error', close);
    c.on('close', close);
    c.pipe(u).pipe(c);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  server.unref();
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('loopback listener has no port');
  return {
    url: `https://127.0.0.1:${addr.port}`,
    pause,
    resume() {
      paused = false;
    },
    async close() {
      pause();
      await new Promise<void>((r) => server.close(() => r()));
      await stopProcess(relay, 1000);
    },
  };
}
