// A byte relay run inside a lab network namespace: accepts connections on a
// unix socket (a file the root namespace can open) and connects each one to
// HOST:PORT as seen from the namespace. With api-forward.ts it gives a process
// in the root namespace (a test's in-process informers) the API server, with no
// address or route added to the root namespace.
//
//   node lab/cluster/relay.ts SOCKET HOST PORT     (prints {"ready":true} when listening)

import { rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';

const [socketPath, host, port] = process.argv.slice(2);
if (!socketPath || !host || !port) {
  process.stderr.write('usage: relay.ts SOCKET HOST PORT\n');
  process.exit(2);
}
rmSync(socketPath, { force: true });
const server = createServer((client) => {
  const upstream = connect({ host, port: Number(port) });
  const close = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close);
  upstream.on('error', close);
  client.pipe(upstream).pipe(client);
});
server.listen(socketPath, () => process.stdout.write(`${JSON.stringify({ ready: true })}\n`));
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
