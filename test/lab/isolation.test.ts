// Nothing leaves the lab: the root namespace is unchanged, and traffic to an address
// outside the lab fails inside the lab.

import t from 'tap';
import { Lab } from '../../lab/index.ts';
import { rootNetState } from './fixtures/helpers.ts';

/** A namespace's IpExt InNoRoutes: packets it received and could not route. */
async function inNoRoutes(lab: Lab, ns: Parameters<Lab['exec']>[0]): Promise<number> {
  const [names, values] = (await lab.exec(ns, 'cat', ['/proc/net/netstat']))
    .split('\n')
    .filter((l) => l.startsWith('IpExt:'))
    .map((l) => l.split(/\s+/));
  const i = names?.indexOf('InNoRoutes') ?? -1;
  if (i < 0 || !values?.[i]) throw new Error('no IpExt InNoRoutes in /proc/net/netstat');
  return Number(values[i]);
}

t.test('no route out, root namespace untouched', async (t) => {
  const before = rootNetState();
  const lab = await Lab.create();
  t.teardown(() => lab.destroy());
  const node = await lab.node('node', { cidr: '10.251.0.0/24' });
  const pod = await lab.pod(node, 'pod', '10.251.0.10');
  const other = await lab.netns('other');
  await lab.link(node, other, '10.251.9.1/30', '10.251.9.2/30');
  await lab.route(other, '10.251.0.0/24', '10.251.9.1');
  await lab.forward(node);
  const client = await lab.client(pod);
  t.same(rootNetState(), before, 'root routes, addresses and rules unchanged while the lab runs');

  // 192.0.2.1 (TEST-NET-1): the pod's default route points at the node's bridge,
  // and the node namespace has no route for it, so it goes nowhere.
  // The packets end in the node namespace, for want of a route: its
  // IpExt InNoRoutes counts each one (the ICMP error it sends back is rate
  // limited, so the client may see a timeout instead of ENETUNREACH).
  const noRoutesBefore = await inNoRoutes(lab, node);
  const r = await client.tcpConnect({ ip: '192.0.2.1', port: 80, count: 2, timeoutMs: 300 });
  t.equal(r.ok, 0);
  t.equal(r.failed, 2);
  const codes = Object.keys(r.errors);
  t.ok(
    codes.every((c) => c === 'ENETUNREACH' || c === 'ETIMEDOUT' || c === 'EHOSTUNREACH'),
    `fails: ${codes}`,
  );
  const dropped = (await inNoRoutes(lab, node)) - noRoutesBefore;
  t.ok(dropped >= 2, `the node namespace dropped them: no route (InNoRoutes +${dropped})`);
  const u = await client.udpSend({ ip: '192.0.2.1', port: 53, count: 1, connected: true, timeoutMs: 200 });
  t.equal(u.ok, 0, 'UDP out gets no answer');

  // A namespace without any default route: the kernel says ENETUNREACH at once.
  const lonely = await lab.client(other);
  const n = await lonely.tcpConnect({ ip: '192.0.2.1', port: 80, count: 1, timeoutMs: 1000 });
  t.same(n.errors, { ENETUNREACH: 1 }, 'no route at all: ENETUNREACH');

  const routes = JSON.parse(await lab.ip(node, '-j', 'route')) as Array<{ dst: string }>;
  t.notOk(
    routes.some((x) => x.dst === 'default'),
    'the node namespace has no default route',
  );

  // Forwarding works inside the lab (other -> node -> pod), proving link/route/forward.
  const server = await lab.echoServer(pod, { tcpPorts: [80] });
  const via = await lonely.tcpConnect({ ip: pod.ip, port: 80, count: 3, timeoutMs: 1000 });
  t.same(via.byPod, { pod: 3 }, 'routed across a lab link');
  t.same(via.seenFrom, ['10.251.9.2'], 'source is the link address');
  await server.stop();

  await lab.destroy();
  t.same(rootNetState(), before, 'root routes, addresses and rules unchanged after destroy');
});

t.test('refuses anything outside the lab', async (t) => {
  const lab = await Lab.create();
  t.teardown(() => lab.destroy());
  const ns = await lab.netns('x');
  await t.rejects(lab.route('1', '10.0.0.0/8', '10.0.0.1'), /not a namespace of lab/);
  t.throws(() => lab.spawn('init', 'true'), /not a namespace of lab/);
  await t.rejects(lab.exec('', 'true'), /not a namespace of lab/);
  await t.rejects(lab.link(ns, ns, '10.0.0.1/30', '10.0.0.2/30'), /two different/);
  await t.rejects(lab.sysctl(ns, 'kernel.hostname', 'x'), /per-netns/);
});
