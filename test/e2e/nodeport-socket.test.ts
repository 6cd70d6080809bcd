// NodePort from the node itself: the socket hooks translate connect() to
// NodeIP:NodePort and to 127.0.0.1:NodePort (the wildcard entry), TCP and
// UDP, with getpeername and UDP replies showing the address the client used.
// The "node" here is the client namespace: it holds the address the Node
// object gives as InternalIP.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import t from 'tap';
import { CLIENT_IP6, type Cluster, POD_IPS, POD_IPS6, POD_NAMES, TCP_PORT, UDP_PORT, startCluster } from './fixtures/cluster.ts';
import { hostPort } from '../../lab/protocol.ts';
import type { ServiceSpec } from './fixtures/manifests.ts';

const NODE_IP = '10.244.0.100'; // the client pod's address, standing in for the node's
const svc: ServiceSpec = {
  name: 'np',
  clusterIP: '10.96.0.40',
  type: 'NodePort',
  ports: [
    { name: 'tcp', protocol: 'TCP', port: 80, targetPort: TCP_PORT, nodePort: 30080 },
    { name: 'udp', protocol: 'UDP', port: 53, targetPort: UDP_PORT, nodePort: 30053 },
  ],
  endpoints: POD_IPS.map((ip) => ({ ip })),
  clusterIP6: 'fd00:10:96::40',
  endpoints6: POD_IPS6.map((ip) => ({ ip })),
};

let c: Cluster;
t.before(async () => {
  c = await startCluster([svc], { ipv6: true });
  writeFileSync(
    join(c.manifests, 'node.yaml'),
    stringify({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'node' },
      status: {
        addresses: [
          { type: 'InternalIP', address: NODE_IP },
          { type: 'InternalIP', address: CLIENT_IP6 },
          { type: 'Hostname', address: 'node' },
        ],
      },
    }),
  );
  await c.startAgent();
});
t.teardown(async () => {
  await c?.destroy();
});

t.test('NodeIP:NodePort over TCP reaches the pods and shows the NodePort as the peer', async (t) => {
  const r = await c.client.tcpConnect({ ip: NODE_IP, port: 30080, count: 60, timeoutMs: 2000, concurrency: 4 });
  t.equal(r.ok, 60, JSON.stringify(r.errors));
  t.equal(Object.keys(r.byPod).length, 3, `spread: ${JSON.stringify(r.byPod)}`);
  t.same(r.peerNames, [`${NODE_IP}:30080`]);
});

t.test('127.0.0.1:NodePort over TCP works through the wildcard entry', async (t) => {
  const r = await c.client.tcpConnect({ ip: '127.0.0.1', port: 30080, count: 30, timeoutMs: 2000 });
  t.equal(r.ok, 30, JSON.stringify(r.errors));
  t.ok(Object.keys(r.byPod).every((p) => POD_NAMES.includes(p)));
});

t.test('UDP to NodeIP:NodePort and 127.0.0.1:NodePort replies from the address asked', async (t) => {
  const a = await c.client.udpSend({ ip: NODE_IP, port: 30053, count: 20, connected: false, timeoutMs: 2000 });
  t.equal(a.ok, 20, JSON.stringify(a.errors));
  t.same(a.replySources, [`${NODE_IP}:30053`]);
  const b = await c.client.udpSend({ ip: '127.0.0.1', port: 30053, count: 20, connected: false, timeoutMs: 2000 });
  t.equal(b.ok, 20, JSON.stringify(b.errors));
  t.same(b.replySources, ['127.0.0.1:30053']);
});

t.test('IPv6: NodeIP:NodePort and [::1]:NodePort, TCP and UDP, show the address asked', async (t) => {
  for (const ip of [CLIENT_IP6, '::1']) {
    const r = await c.client.tcpConnect({ ip, port: 30080, count: 30, timeoutMs: 2000, concurrency: 4 });
    t.equal(r.ok, 30, `${ip}: ${JSON.stringify(r.errors)}`);
    t.equal(Object.keys(r.byPod).length, 3, `${ip}: spread: ${JSON.stringify(r.byPod)}`);
    t.same(r.peerNames, [hostPort(ip, 30080)]);
    const u = await c.client.udpSend({ ip, port: 30053, count: 20, connected: false, timeoutMs: 2000 });
    t.equal(u.ok, 20, JSON.stringify(u.errors));
    t.same(u.replySources, [hostPort(ip, 30053)]);
  }
});

t.test('a loopback port that is no NodePort is untouched', async (t) => {
  const r = await c.client.tcpConnect({ ip: '127.0.0.1', port: 30081, count: 1, timeoutMs: 1000 });
  t.same(Object.keys(r.errors), ['ECONNREFUSED'], 'nothing listens there and nothing translated it');
});

t.test('the dump shows the NodePort frontends', async (t) => {
  const d = c.svcmap('dump');
  t.match(d, /10\.244\.0\.100:30080\/TCP\s+NodePort/);
  t.match(d, /0\.0\.0\.0:30080\/TCP\s+NodePort,wildcard/);
});
