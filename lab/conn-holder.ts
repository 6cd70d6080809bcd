// Long-lived TCP clients (the bench's load-balancing scenario, the tests of
// least-connection choice): a standalone program, run inside a client
// namespace (and the agent's cgroup) by Lab.connHolder() as
// `node lab/conn-holder.ts '{"ip":..,"port":..,"count":200}'`.
// Keeps `count` connections open to ip:port; each learns its backend from the
// echo server's greeting line ({"pod":...}); a connection that breaks is
// re-opened after a short pause, as a client with a retry loop would.
// stdin "stats" -> {"stats":{"open":N,"connecting":N,"byPod":{...},"reconnects":N,"errors":{...}}}.
// End of stdin exits.
import { connect, type Socket } from 'node:net';
import { createInterface } from 'node:readline';

interface Config {
  ip: string;
  port: number;
  count: number;
  retryMs?: number;
}

const cfg = JSON.parse(process.argv[2] ?? '{}') as Config;
const retryMs = cfg.retryMs ?? 100;
const byConn = new Map<number, string | undefined>();
const errors: Record<string, number> = {};
let connecting = 0;
let reconnects = 0;

function open(id: number, again: boolean): void {
  if (again) reconnects++;
  connecting++;
  let settled = false;
  let buf = '';
  const sock: Socket = connect({ host: cfg.ip, port: cfg.port });
  sock.setEncoding('utf8');
  sock.setKeepAlive(true);
  const retry = (why: string): void => {
    if (settled) {
      byConn.delete(id);
    } else {
      connecting--;
    }
    settled = true;
    errors[why] = (errors[why] ?? 0) + 1;
    sock.destroy();
    setTimeout(() => open(id, true), retryMs + Math.random() * retryMs);
  };
  sock.on('data', (chunk: string) => {
    if (settled) return;
    buf += chunk;
    const nl = buf.indexOf('\n');
    if (nl < 0) return;
    let pod: string | undefined;
    try {
      pod = (JSON.parse(buf.slice(0, nl)) as { pod?: string }).pod;
    } catch {
      pod = undefined;
    }
    settled = true;
    connecting--;
    byConn.set(id, pod ?? '?');
  });
  let closed = false;
  const onClose = (why: string) => {
    if (closed) return;
    closed = true;
    retry(why);
  };
  sock.on('end', () => onClose('closed'));
  sock.on('error', (e: NodeJS.ErrnoException) => onClose(e.code ?? 'error'));
  sock.on('close', () => onClose('closed'));
}

for (let i = 0; i < cfg.count; i++) open(i, false);

const rl = createInterface({ input: process.stdin });
rl.on('line', () => {
  const byPod: Record<string, number> = {};
  for (const pod of byConn.values()) if (pod !== undefined) byPod[pod] = (byPod[pod] ?? 0) + 1;
  process.stdout.write(`${JSON.stringify({ stats: { open: byConn.size, connecting, byPod, reconnects, errors } })}\n`);
});
rl.on('close', () => process.exit(0));
process.stdout.write(`${JSON.stringify({ ready: true, pid: process.pid })}\n`);
