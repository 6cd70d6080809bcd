// A node with three pods and a client: TCP and UDP echo from the client to each pod.

import t from 'tap';
import { Lab } from '../../lab/index.ts';

import type { EchoServer, LabClient, LabNode, LabPod } from '../../lab/index.ts';

const names = ['pod-a', 'pod-b', 'pod-c'];
let lab: Lab;
let node: LabNode;
let pods: LabPod[];
let clientPod: LabPod;
let servers: EchoServer[];
let client: LabClient;

t.before(async () => {
  lab = await Lab.create();
  t.teardown(() => lab.destroy());
  node = await lab.node('node1', { cidr: '10.244.1.0/24' });
  pods = await Promise.all(names.map((n, i) => lab.pod(node, n, `10.244.1.${10 + i}`)));
  clientPod = await lab.pod(node, 'client', '10.244.1.100');
  servers = await Promise.all(pods.map((p) => lab.echoServer(p, { tcpPorts: [8080, 9090], udpPorts: [5353] })));
  client = await lab.client(clientPod);
});

t.test('names fit and carry the run id', async (t) => {
  t.equal(node.bridgeIp, '10.244.1.1', 'bridge gets the first host of the cidr');
  t.match(lab.id, /^[0-9a-f]{6}$/);
  for (const ns of lab.namespaces) {
    t.ok(ns.startsWith(`sm${lab.id}-`), ns);
    t.ok(ns.length <= 15, `${ns} fits in 15 chars`);
  }
  for (const p of pods) t.ok(p.hostIfname.length <= 15, p.hostIfname);
  const links = JSON.parse(await lab.ip(node, '-j', 'link', 'show', 'master', 'br0')) as Array<{ ifname: string }>;
  t.same(links.map((l) => l.ifname).sort(), [...pods, clientPod].map((p) => p.hostIfname).sort(), 'every pod veth is on the bridge');
  const routes = JSON.parse(await lab.ip(clientPod, '-j', 'route')) as Array<{ dst: string; gateway?: string }>;
  t.same(routes.find((r) => r.dst === 'default')?.gateway, '10.244.1.1', 'pod default route is the bridge');
});

t.test('TCP to each pod', async (t) => {
  for (const [i, p] of pods.entries()) {
    for (const port of [8080, 9090]) {
      const r = await client.tcpConnect({ ip: p.ip, port, count: 10, timeoutMs: 2000, concurrency: 3 });
      t.equal(r.ok, 10, `${p.name}:${port} all ok`);
      t.equal(r.failed, 0);
      t.same(r.byPod, { [names[i] as string]: 10 }, 'answered by that pod');
      t.same(r.peerNames, [`${p.ip}:${port}`], 'getpeername is the pod');
      t.same(r.seenFrom, ['10.244.1.100'], 'the pod saw the client address');
      t.equal(r.connectMs.length, 10);
    }
  }
  const stats = await servers[0]!.stats();
  t.equal(stats.accepted, 20, 'server counted the connections');
});

t.test('UDP to each pod, connected and not', async (t) => {
  for (const [i, p] of pods.entries()) {
    for (const connected of [true, false]) {
      const r = await client.udpSend({ ip: p.ip, port: 5353, count: 5, connected, timeoutMs: 2000 });
      t.equal(r.ok, 5, `${p.name} connected=${connected}`);
      t.same(r.byPod, { [names[i] as string]: 5 });
      t.same(r.replySources, [`${p.ip}:5353`], 'replies come from the pod');
      t.same(r.seenFrom, ['10.244.1.100']);
    }
  }
});

t.test('failures are counted, not hung on', async (t) => {
  const refused = await client.tcpConnect({ ip: pods[0]!.ip, port: 1, count: 3, timeoutMs: 1000 });
  t.same({ ok: refused.ok, failed: refused.failed, errors: refused.errors }, { ok: 0, failed: 3, errors: { ECONNREFUSED: 3 } });
  const udpRefused = await client.udpSend({ ip: pods[0]!.ip, port: 1, count: 2, connected: true, timeoutMs: 1000 });
  t.same(udpRefused.errors, { ECONNREFUSED: 2 }, 'connected UDP sees ICMP port unreachable');
  const udpLost = await client.udpSend({ ip: pods[0]!.ip, port: 1, count: 2, connected: false, timeoutMs: 100 });
  t.same(udpLost.errors, { ETIMEDOUT: 2 }, 'unconnected UDP times out');
  const nobody = await client.tcpConnect({ ip: '10.244.1.200', port: 80, count: 1, timeoutMs: 200 });
  t.equal(nobody.failed, 1, 'no such host fails');
  t.ok(nobody.errors.ETIMEDOUT === 1 || nobody.errors.EHOSTUNREACH === 1, JSON.stringify(nobody.errors));
});

t.test('tcpLoop runs while other requests are served', async (t) => {
  const loop = client.tcpLoop({ ip: pods[1]!.ip, port: 8080, count: 300, timeoutMs: 1000 });
  const who = await client.whoami();
  t.equal(who.pid, client.pid, 'whoami answered during the loop');
  const r = await loop;
  t.equal(r.ok, 300);
  t.same(r.failures, []);
  t.same(r.byPod, { 'pod-b': 300 });
});

t.test('long-lived connections stay open', async (t) => {
  const before = await servers[2]!.stats();
  t.equal(before.open, 0);
  // Open a connection from the client pod with a plain process and keep it open.
  const keeper = lab.spawn(clientPod, process.execPath, [
    '-e',
    `const s=require('net').connect(8080,'${pods[2]!.ip}');s.once('data',d=>process.stdout.write(d));setTimeout(()=>{},60000)`,
  ]);
  const line = await new Promise<string>((resolve) => keeper.stdout!.once('data', (d: Buffer) => resolve(d.toString())));
  t.match(JSON.parse(line), { pod: 'pod-c', peer: /^10\.244\.1\.100:/, local: `${pods[2]!.ip}:8080`, proto: 'tcp' });
  t.equal((await servers[2]!.stats()).open, 1, 'the connection is still open');
  keeper.kill('SIGKILL');
});

t.test('exec and errors', async (t) => {
  t.match(await lab.exec(clientPod, 'ip', ['-br', 'addr', 'show', 'eth0']), /10\.244\.1\.100\/24/);
  await t.rejects(lab.exec(clientPod, 'ip', ['link', 'show', 'nosuchdev']), /does not exist/);
  t.throws(() => lab.nsName('sm000000-x'), /not a namespace of lab/);
  await t.rejects(lab.pod(node, 'bad', '10.9.9.9'), /not in node/);
  await t.rejects(lab.echoServer(pods[0]!, { tcpPorts: [8080] }), /EADDRINUSE/, 'server failure carries its stderr');
});
