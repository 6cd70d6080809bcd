// The lab's echo server: a standalone program, run by `node lab/echo-server.ts '<json config>'`
// inside a pod namespace (see Lab.echoServer). Never imported.
//
// TCP: on each connection writes one JSON line {"pod","peer","local","proto"} and keeps
// the connection open until the client closes; answers every line the client sends
// with the same JSON plus "echo". UDP: answers every datagram with the same JSON
// (peer = the source recvfrom saw, echo = the datagram).
// stdout: one readiness line {"ready":true,...}, then answers to "stats" requests.
// stdin: "stats" lines; end of stdin (the lab went away) exits.

import { createServer, type Socket } from 'node:net';
import { createSocket } from 'node:dgram';
import { createInterface } from 'node:readline';
import type { EchoReady, EchoReply, EchoServerConfig, EchoStats } from './protocol.ts';
import { hostPort } from './protocol.ts';

const ECHO_MAX = 512;

function fail(msg: string): never {
  process.stderr.write(`echo-server: ${msg}\n`);
  process.exit(1);
}

let config: EchoServerConfig;
try {
  config = JSON.parse(process.argv[2] ?? '') as EchoServerConfig;
} catch {
  fail(`usage: echo-server.ts '{"pod":"name","tcpPorts":[80],"udpPorts":[53]}'`);
}
const host = config.host ?? '0.0.0.0';
const stats: EchoStats = { open: 0, accepted: 0, datagrams: 0 };

function reply(r: EchoReply): string {
  return JSON.stringify(r);
}

function onConnection(sock: Socket): void {
  stats.open++;
  stats.accepted++;
  sock.setNoDelay(true);
  const base = {
    pod: config.pod,
    peer: hostPort(sock.remoteAddress, sock.remotePort),
    local: hostPort(sock.localAddress, sock.localPort),
    proto: 'tcp' as const,
  };
  sock.write(`${reply(base)}\n`);
  let buf = '';
  sock.setEncoding('utf8');
  sock.on('data', (chunk: string) => {
    buf += chunk;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      sock.write(`${reply({ ...base, echo: line.slice(0, ECHO_MAX) })}\n`);
    }
    if (buf.length > 64 * 1024) buf = '';
  });
  sock.on('end', () => sock.end());
  sock.on('error', () => sock.destroy());
  sock.on('close', () => stats.open--);
}

async function listenTcp(port: number): Promise<void> {
  const server = createServer(onConnection);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host, backlog: 4096 }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (e) => process.stderr.write(`echo-server: tcp ${port}: ${e.message}\n`));
}

async function listenUdp(port: number): Promise<void> {
  const sock = createSocket(host.includes(':') ? 'udp6' : 'udp4');
  sock.on('message', (msg, rinfo) => {
    stats.datagrams++;
    const r = reply({
      pod: config.pod,
      peer: hostPort(rinfo.address, rinfo.port),
      local: hostPort(config.ip ?? host, port),
      proto: 'udp',
      echo: msg.toString('utf8').slice(0, ECHO_MAX),
    });
    sock.send(r, rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve, reject) => {
    sock.once('error', reject);
    sock.bind({ port, address: host }, () => {
      sock.off('error', reject);
      resolve();
    });
  });
  sock.on('error', (e) => process.stderr.write(`echo-server: udp ${port}: ${e.message}\n`));
}

try {
  await Promise.all([...config.tcpPorts.map(listenTcp), ...config.udpPorts.map(listenUdp)]);
} catch (e) {
  fail((e as Error).message);
}

const ready: EchoReady = { ready: true, pid: process.pid, tcpPorts: config.tcpPorts, udpPorts: config.udpPorts };
process.stdout.write(`${JSON.stringify(ready)}\n`);

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  if (line.trim() === 'stats') process.stdout.write(`${JSON.stringify({ stats })}\n`);
});
rl.on('close', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
