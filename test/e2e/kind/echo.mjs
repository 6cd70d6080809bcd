// The e2e workload and its client, in plain Node so that both run in the
// svcmap image (no other image has to be pulled into kind) and on the host.
//
//   node echo.mjs serve                 TCP :8080 and UDP :8081 (TCP_PORT, UDP_PORT),
//                                       answer with $POD_NAME
//   node echo.mjs tcp HOST PORT [N]     N TCP connections, print who answered (one a line)
//   node echo.mjs udp HOST PORT [N]     N datagrams from one unconnected socket; every
//                                       reply must come from HOST:PORT (reverse NAT)
//   node echo.mjs dns NAME              print NAME's IPv4 address (the pod's resolver)
//
// The client exits 1 on the first failure, with the reason on stderr.
import { lookup } from 'node:dns/promises';
import dgram from 'node:dgram';
import net from 'node:net';

const TIMEOUT_MS = 3000;
const [mode, ...rest] = process.argv.slice(2);

// `tap test/e2e/kind` runs every file in the directory; say this is no test.
if (mode === undefined && process.env.TAP === '1') {
  process.stdout.write('1..0 # SKIP echo.mjs is the e2e workload, not a test\n');
  process.exit(0);
}

function die(msg) {
  process.stderr.write(`echo.mjs: ${msg}\n`);
  process.exit(1);
}

function serve() {
  const name = process.env.POD_NAME ?? 'unknown';
  const tcpPort = Number(process.env.TCP_PORT ?? '8080');
  const udpPort = Number(process.env.UDP_PORT ?? '8081');
  const tcp = net.createServer((sock) => {
    sock.on('error', () => {});
    sock.end(`${name}\n`);
  });
  tcp.on('error', (err) => die(`tcp :${tcpPort}: ${err.message}`));
  tcp.listen(tcpPort, () => process.stdout.write(`tcp :${tcpPort} as ${name}\n`));
  const udp = dgram.createSocket('udp4');
  udp.on('error', (err) => die(`udp :${udpPort}: ${err.message}`));
  udp.on('message', (_msg, rinfo) => udp.send(name, rinfo.port, rinfo.address));
  udp.bind(udpPort, () => process.stdout.write(`udp :${udpPort} as ${name}\n`));
  for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
}

function tcpOnce(host, port) {
  return new Promise((resolve, reject) => {
    let data = '';
    const sock = net.connect({ host, port, timeout: TIMEOUT_MS });
    sock.setEncoding('utf8');
    sock.on('data', (d) => (data += d));
    sock.on('end', () => resolve(data.trim()));
    sock.on('timeout', () => sock.destroy(new Error(`no answer from ${host}:${port} within ${TIMEOUT_MS}ms`)));
    sock.on('error', reject);
  });
}

async function tcp(host, port, n) {
  for (let i = 0; i < n; i++) {
    const who = await tcpOnce(host, port).catch((err) => die(`tcp ${host}:${port} #${i + 1}: ${err.message}`));
    if (!who) die(`tcp ${host}:${port} #${i + 1}: empty answer`);
    process.stdout.write(`${who}\n`);
  }
}

async function udp(host, port, n) {
  const sock = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
  await new Promise((r) => sock.bind(0, r));
  try {
    for (let i = 0; i < n; i++) {
      const answer = new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no answer within ${TIMEOUT_MS}ms`)), TIMEOUT_MS);
        sock.once('message', (msg, rinfo) => {
          clearTimeout(timer);
          resolve({ who: msg.toString('utf8'), rinfo });
        });
      });
      sock.send(`ping ${i}`, port, host);
      const { who, rinfo } = await answer.catch((err) => die(`udp ${host}:${port} #${i + 1}: ${err.message}`));
      if (rinfo.address !== host || rinfo.port !== port) {
        die(`udp ${host}:${port} #${i + 1}: reply came from ${rinfo.address}:${rinfo.port}, not from the address asked`);
      }
      process.stdout.write(`${who}\n`);
    }
  } finally {
    sock.close();
  }
}

async function dns(name) {
  const r = await lookup(name, { family: 4 }).catch((err) => die(`dns ${name}: ${err.message}`));
  process.stdout.write(`${r.address}\n`);
}

function hostPortCount() {
  const [host, portText, countText] = rest;
  const port = Number(portText);
  const n = Number(countText ?? '1');
  if (!host || !Number.isInteger(port) || !Number.isInteger(n) || n < 1) die(`usage: ${mode} HOST PORT [COUNT]`);
  return [host, port, n];
}

switch (mode) {
  case 'serve':
    serve();
    break;
  case 'tcp':
    await tcp(...hostPortCount());
    break;
  case 'udp':
    await udp(...hostPortCount());
    break;
  case 'dns':
    if (!rest[0]) die('usage: dns NAME');
    await dns(rest[0]);
    break;
  default:
    die('usage: echo.mjs serve | tcp HOST PORT [N] | udp HOST PORT [N] | dns NAME');
}
