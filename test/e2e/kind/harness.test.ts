// The kind e2e harness itself needs Docker and kind (not here, not in
// `make test`). What can be checked without them is checked here: the kind
// configuration, the workload manifests, run.sh's preflight, and the echo
// server/client on loopback.
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';

const HERE = dirname(fileURLToPath(import.meta.url));
const ECHO = join(HERE, 'echo.mjs');

t.test('kind config: no kube-proxy, a control plane and a worker', async (t) => {
  const cfg = parse(readFileSync(join(HERE, 'kind-config.yaml'), 'utf8')) as {
    kind: string;
    apiVersion: string;
    networking?: { kubeProxyMode?: string };
    nodes?: { role: string }[];
  };
  t.equal(cfg.kind, 'Cluster');
  t.equal(cfg.apiVersion, 'kind.x-k8s.io/v1alpha4');
  t.equal(cfg.networking?.kubeProxyMode, 'none');
  t.same(
    cfg.nodes?.map((n) => n.role),
    ['control-plane', 'worker'],
  );
});

t.test('workloads: Services the checks use, images substituted by run.sh', async (t) => {
  const text = readFileSync(join(HERE, 'workloads.yaml'), 'utf8');
  const docs = parseAllDocuments(text).map((d) => d.toJS() as { kind: string; metadata: { name: string }; spec?: Record<string, unknown> });
  const svc = (name: string) => docs.find((d) => d.kind === 'Service' && d.metadata.name === name)?.spec;
  t.match(svc('echo'), {
    ports: [
      { port: 80, protocol: 'TCP' },
      { port: 5353, protocol: 'UDP' },
    ],
  });
  t.match(svc('echo-nodeport'), { type: 'NodePort', ports: [{ nodePort: 30080 }, { nodePort: 30081 }] });
  t.match(svc('echo-affinity'), { sessionAffinity: 'ClientIP' });
  t.equal((text.match(/image: __IMAGE__/g) ?? []).length, 2, 'echo and client use the image placeholder');
  const runSh = readFileSync(join(HERE, 'run.sh'), 'utf8');
  for (const port of ['30080', '30081', '5353']) t.match(runSh, port, `run.sh checks port ${port}`);
});

t.test('run.sh: syntax, and a loud failure without kind or Docker', async (t) => {
  const syntax = spawnSync('bash', ['-n', join(HERE, 'run.sh')], { encoding: 'utf8' });
  t.equal(syntax.status, 0, syntax.stderr);
  const r = spawnSync('bash', [join(HERE, 'run.sh')], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', KIND: 'svcmap-no-such-kind' },
    timeout: 30_000,
  });
  t.equal(r.status, 1);
  t.match(r.stderr, /FAIL: svcmap-no-such-kind not found/);
  t.match(r.stderr, /FAIL: svcmap e2e on kind/);
});

function runEcho(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [ECHO, ...args]);
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

// A free loopback port for TCP or UDP (bound, read, released).
async function freePort(kind: 'tcp' | 'udp'): Promise<number> {
  if (kind === 'tcp') {
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as AddressInfo).port;
    await new Promise<void>((r) => srv.close(() => r()));
    return port;
  }
  const sock = createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
  const port = sock.address().port;
  await new Promise<void>((r) => sock.close(r));
  return port;
}

t.test('echo.mjs on loopback: server, TCP and UDP clients', async (t) => {
  const tcpPort = await freePort('tcp');
  const udpPort = await freePort('udp');
  const server = spawn(process.execPath, [ECHO, 'serve'], {
    env: { ...process.env, POD_NAME: 'echo-a', TCP_PORT: String(tcpPort), UDP_PORT: String(udpPort) },
  });
  t.teardown(() => {
    server.kill('SIGTERM');
  });
  let out = '';
  let err = '';
  server.stdout.on('data', (d: Buffer) => (out += d.toString()));
  server.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const deadline = Date.now() + 5000;
  while (!(out.includes('tcp :') && out.includes('udp :')) && Date.now() < deadline && server.exitCode === null) {
    await new Promise((r) => setTimeout(r, 25));
  }
  t.match(out, `tcp :${tcpPort} as echo-a`, err);
  t.match(out, `udp :${udpPort} as echo-a`, err);
  const tcp = await runEcho(['tcp', '127.0.0.1', String(tcpPort), '3']);
  t.equal(tcp.code, 0, tcp.stderr);
  t.same(tcp.stdout.trim().split('\n'), ['echo-a', 'echo-a', 'echo-a']);
  const udp = await runEcho(['udp', '127.0.0.1', String(udpPort), '2']);
  t.equal(udp.code, 0, udp.stderr);
  t.same(udp.stdout.trim().split('\n'), ['echo-a', 'echo-a']);
  const dns = await runEcho(['dns', 'localhost']);
  t.equal(dns.code, 0, dns.stderr);
  t.equal(dns.stdout.trim(), '127.0.0.1');
});

t.test('echo.mjs client failures exit 1 with the reason', async (t) => {
  const bad = await runEcho(['tcp', '127.0.0.1', 'x']);
  t.equal(bad.code, 1);
  t.match(bad.stderr, /usage: tcp HOST PORT/);
  const none = await runEcho(['nonsense']);
  t.equal(none.code, 1);
  t.match(none.stderr, /usage: echo\.mjs serve/);
});
