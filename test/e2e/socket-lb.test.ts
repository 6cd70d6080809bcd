// The socket-level datapath end to end: the real agent, compiled and loaded
// BPF programs attached to a cgroup of the test's own, real TCP and UDP
// sockets from a client namespace in that cgroup to echo servers in pod
// namespaces. Nothing here touches the root namespace or the root cgroup.
import t from 'tap';
import {
  CLIENT_IP,
  CLIENT_IP6,
  type Cluster,
  POD_IPS,
  POD_IPS6,
  POD_NAMES,
  TCP_PORT,
  UDP_PORT,
  echoService,
  startCluster,
} from './fixtures/cluster.ts';
import { invalidSliceYaml } from './fixtures/manifests.ts';
import { hostPort } from '../../lab/protocol.ts';
import { SVCMAP_MAP_SERVICES } from '../../src/maps/constants.ts';

const WEB = '10.96.0.10';
const EMPTY = '10.96.0.20';
const OTHER = '10.96.0.30';

// Every Service is dual-stack: the tests of the socket LB's rules run for
// each family, through the IPv4 hooks and maps and through the IPv6 ones.
const FAMILIES = [
  { family: 4, web: WEB, empty: EMPTY, pods: POD_IPS, client: CLIENT_IP },
  { family: 6, web: 'fd00:10:96::10', empty: 'fd00:10:96::20', pods: POD_IPS6, client: CLIENT_IP6 },
] as const;
const V6 = FAMILIES[1];

let c: Cluster;
t.before(async () => {
  c = await startCluster(
    [
      echoService('web', WEB, { clusterIP6: V6.web }),
      echoService('empty', EMPTY, { clusterIP6: V6.empty, endpoints: [], endpoints6: [] }),
      echoService('other', OTHER, { clusterIP6: 'fd00:10:96::30' }),
    ],
    { ipv6: true },
  );
  await c.startAgent();
});
t.teardown(async () => {
  await c?.destroy();
});

t.test('without --veth-lb the agent loads the socket and tc programs, not the veth ones', async (t) => {
  const up = c.agent.lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('datapath up'));
  const objects = (up?.objects ?? []) as string[];
  t.same(
    objects.map((p) => /\/(\w+)-[0-9a-f]+\.o$/.exec(p)?.[1]),
    ['sock', 'tc'],
    `objects loaded: ${objects.join(', ')}`,
  );
});

for (const f of FAMILIES) {
  t.test(`IPv${f.family}: 300 TCP connections to a VIP reach each of 3 backends at least 15% of the time`, async (t) => {
    const r = await c.client.tcpConnect({ ip: f.web, port: 80, count: 300, timeoutMs: 2000, concurrency: 8 });
    t.equal(r.failed, 0, `no failures (${JSON.stringify(r.errors)})`);
    t.equal(r.ok, 300);
    for (const pod of POD_NAMES) t.ok((r.byPod[pod] ?? 0) >= 45, `${pod} got ${r.byPod[pod] ?? 0} of 300`);
    t.same(r.seenFrom, [f.client], 'backends see the client address (no SNAT)');
  });

  t.test(`IPv${f.family}: getpeername returns the VIP, not the backend`, async (t) => {
    const r = await c.client.tcpConnect({ ip: f.web, port: 80, count: 20, timeoutMs: 2000 });
    t.equal(r.ok, 20);
    t.same(r.peerNames, [hostPort(f.web, 80)]);
  });

  t.test(`IPv${f.family}: unconnected UDP to the VIP gets replies whose source is the VIP`, async (t) => {
    const r = await c.client.udpSend({ ip: f.web, port: 53, count: 60, connected: false, timeoutMs: 2000 });
    t.equal(r.failed, 0, JSON.stringify(r.errors));
    t.same(r.replySources, [hostPort(f.web, 53)]);
    t.equal(Object.keys(r.byPod).length, 3, `datagrams spread over the pods: ${JSON.stringify(r.byPod)}`);
  });

  t.test(`IPv${f.family}: connected UDP to the VIP works and shows the VIP as the peer`, async (t) => {
    const r = await c.client.udpSend({ ip: f.web, port: 53, count: 20, connected: true, timeoutMs: 2000 });
    t.equal(r.failed, 0, JSON.stringify(r.errors));
    t.same(r.replySources, [hostPort(f.web, 53)]);
  });

  t.test(`IPv${f.family}: a service with no endpoints fails connect at once`, async (t) => {
    // A connect that hung would end in the client's ETIMEDOUT; each of the 5
    // ended in the hook's refusal instead, whatever the machine's speed.
    const r = await c.client.tcpConnect({ ip: f.empty, port: 80, count: 5, timeoutMs: 3000 });
    t.equal(r.ok, 0);
    t.same(r.errors, { ECONNREFUSED: 5 }, `every connect refused, none timed out: ${JSON.stringify(r.errors)}`);
    const u = await c.client.udpSend({ ip: f.empty, port: 53, count: 2, connected: false, timeoutMs: 1000 });
    t.same(Object.keys(u.errors), ['ECONNREFUSED'], `UDP send refused too: ${JSON.stringify(u.errors)}`);
  });

  t.test(`IPv${f.family}: removing an endpoint from the manifest stops new connections to it once the agent synced`, async (t) => {
    const kept = (ips: readonly string[], mine: boolean) => (mine ? [ips[0]!, ips[2]!] : [...ips]).map((ip) => ({ ip }));
    // Resolves on the agent's sync of the file (its log line): how long that
    // takes is make bench's; what the maps hold right after it is checked here.
    await c.writeService(
      echoService('web', WEB, {
        clusterIP6: V6.web,
        endpoints: kept(POD_IPS, f.family === 4),
        endpoints6: kept(POD_IPS6, f.family === 6),
      }),
    );
    const dump = JSON.parse(c.svcmap('dump', '-o', 'json')) as { frontends: Array<{ frontend: string; backends: unknown[] }> };
    const count = (vip: string) => dump.frontends.find((x) => x.frontend === `${hostPort(vip, 80)}/TCP`)?.backends.length;
    t.equal(count(f.web), 2, 'synced: the maps hold the 2 endpoints left');
    const r = await c.client.tcpConnect({ ip: f.web, port: 80, count: 100, timeoutMs: 2000, concurrency: 4 });
    t.equal(r.ok, 100);
    t.notOk(r.byPod[POD_NAMES[1]!], 'the removed pod gets no new connection');
    const other = FAMILIES.find((x) => x !== f)!;
    const o = await c.client.tcpConnect({ ip: other.web, port: 80, count: 60, timeoutMs: 2000, concurrency: 4 });
    t.equal(Object.keys(o.byPod).length, 3, `the other family still has all 3 pods: ${JSON.stringify(o.byPod)}`);
    await c.writeService(echoService('web', WEB, { clusterIP6: V6.web }));
  });
}

t.test('IPv4-mapped IPv6 sockets (::ffff:VIP) go through the IPv4 maps, showing the mapped VIP', async (t) => {
  const mapped = `::ffff:${WEB}`;
  const r = await c.client.tcpConnect({ ip: mapped, port: 80, count: 150, timeoutMs: 2000, concurrency: 4 });
  t.equal(r.failed, 0, JSON.stringify(r.errors));
  t.equal(Object.keys(r.byPod).length, 3, `spread over the IPv4 backends: ${JSON.stringify(r.byPod)}`);
  t.same(r.peerNames, [hostPort(mapped, 80)], 'getpeername shows the mapped VIP');
  t.same(r.seenFrom, [CLIENT_IP], 'the backends see an IPv4 client');
  for (const connected of [false, true]) {
    const u = await c.client.udpSend({ ip: mapped, port: 53, count: 20, connected, timeoutMs: 2000 });
    t.equal(u.failed, 0, JSON.stringify(u.errors));
    t.same(u.replySources, [hostPort(mapped, 53)], `${connected ? 'connected' : 'unconnected'} UDP: replies from the mapped VIP`);
  }
  const e = await c.client.tcpConnect({ ip: `::ffff:${EMPTY}`, port: 80, count: 3, timeoutMs: 3000 });
  t.same(Object.keys(e.errors), ['ECONNREFUSED'], 'an empty IPv4 service is refused at once over a mapped socket too');
});

t.test('traffic to a non-VIP address is untouched', async (t) => {
  const direct = await c.client.tcpConnect({ ip: POD_IPS[1]!, port: TCP_PORT, count: 10, timeoutMs: 2000 });
  t.same(direct.byPod, { [POD_NAMES[1]!]: 10 }, 'a pod IP reaches that pod only');
  t.same(direct.peerNames, [`${POD_IPS[1]}:${TCP_PORT}`]);
  const udp = await c.client.udpSend({ ip: POD_IPS[2]!, port: UDP_PORT, count: 5, connected: false, timeoutMs: 2000 });
  t.same(udp.replySources, [`${POD_IPS[2]}:${UDP_PORT}`]);
  // A VIP port that is no service port is not translated: it goes to the VIP
  // itself, which nothing in the lab answers (the node namespace routes it nowhere).
  const wrongPort = await c.client.tcpConnect({ ip: WEB, port: 81, count: 1, timeoutMs: 500 });
  t.equal(wrongPort.ok, 0);
  t.same(wrongPort.byPod, {}, 'no pod answered');
});

t.test('svcmap dump shows each VIP with its backends', async (t) => {
  const table = c.svcmap('dump');
  t.match(table, new RegExp(`${WEB.replace(/\./g, '\\.')}:80/TCP\\s+ClusterIP\\s+random\\s+3\\s+`));
  t.match(table, /10\.96\.0\.20:80\/TCP\s+ClusterIP\s+random\s+0\s+\(none: connections are refused\)/);
  const json = JSON.parse(c.svcmap('dump', '-o', 'json')) as {
    frontends: Array<{ frontend: string; backends: Array<{ address: string; state: string }> }>;
  };
  const web = json.frontends.find((f) => f.frontend === `${WEB}:53/UDP`)!;
  t.same(
    web.backends.map((b) => b.address).sort(),
    POD_IPS.map((ip) => `${ip}:${UDP_PORT}`),
  );
  t.ok(web.backends.every((b) => b.state === 'active'));
  t.match(c.svcmap('dump', '-o', 'yaml'), /frontend: 10\.96\.0\.10:80\/TCP/);
  t.match(c.svcmap('dump', '--map', 'svcmap_be'), /"addr":"10\.244\.0\.11","port":8080/);
  t.match(table, /\[fd00:10:96::10\]:80\/TCP\s+ClusterIP\s+random\s+3\s+\[fd00:10:244::1[123]\]:8080/, 'the IPv6 frontends too');
  t.match(c.svcmap('dump', '--map', 'svcmap_be6'), /"addr":"fd00:10:244::11","port":8080/);
});

t.test('svcmap status lists the hooks on the test cgroup and the map fill levels', async (t) => {
  const s = c.svcmap('status');
  for (const [hook, prog] of [
    ['connect4', 'connect4'],
    ['sendmsg4', 'sendmsg4'],
    ['recvmsg4', 'recvmsg4'],
    ['getpeername4', 'getpeer4'],
    ['connect6', 'connect6'],
    ['sendmsg6', 'sendmsg6'],
    ['recvmsg6', 'recvmsg6'],
    ['getpeername6', 'getpeer6'],
  ]) {
    t.match(s, new RegExp(`cgroup/${hook}\\s+svcmap_${prog}.*on cgroup ${c.cgroup}`));
  }
  t.match(s, /svcmap_svc\s+hash\s+\d+\/65536/);
});

t.test('an invalid manifest is reported and leaves the other services working', async (t) => {
  const from = c.agent.mark();
  await c.writeManifest('broken.yaml', invalidSliceYaml('other-broken', 'other'));
  const err = await c.agent.waitFor((l) => typeof l.msg === 'string' && l.msg.includes('other-broken'), {
    from,
    what: 'the error about other-broken',
  });
  t.match(err.msg, /broken\.yaml/, 'names the file');
  t.match(err.msg, /endpoints\[0\]\.addresses\[0\]|ports\[0\]\.port/, 'names the field');
  const r = await c.client.tcpConnect({ ip: OTHER, port: 80, count: 30, timeoutMs: 2000 });
  t.equal(r.ok, 30, 'the service the broken slice names still works with its valid slice');
  const w = await c.client.tcpConnect({ ip: WEB, port: 80, count: 30, timeoutMs: 2000 });
  t.equal(w.ok, 30, 'other services keep working');
  await c.removeManifest('broken.yaml');
});

t.test(
  'SIGTERM: the last log line says the datapath keeps serving and names its pins; with no agent, both families still connect',
  async (t) => {
    c.agent.kill('SIGTERM');
    await c.agent.exited;
    const last = c.agent.lines.at(-1)!;
    t.match(last.msg, /^agent stopped; the datapath keeps serving/, `the last line says so: ${last.msg}`);
    t.equal(last.pinDir, c.pinDir, 'it names the pin directory');
    t.ok((last.maps as string[]).includes(SVCMAP_MAP_SERVICES), `it lists the pinned maps (${(last.maps as string[]).join(', ')})`);
    t.ok(
      (last.links as string[]).length >= 4,
      `it lists the pinned links that keep the hooks attached (${(last.links as string[]).join(', ')})`,
    );
    for (const f of FAMILIES) {
      const r = await c.client.tcpConnect({ ip: f.web, port: 80, count: 30, timeoutMs: 2000 });
      t.equal(r.ok, 30, `IPv${f.family}: every connection succeeds while no agent runs (${JSON.stringify(r.errors)})`);
    }
    await c.startAgent();
  },
);

t.test('kill -9 and restart of the agent during 2,000 connections of each family: 0 failures', async (t) => {
  const loops = FAMILIES.map((f) => c.client.tcpLoop({ ip: f.web, port: 80, count: 2000, timeoutMs: 2000 }));
  await new Promise((r) => setTimeout(r, 150));
  c.agent.kill('SIGKILL');
  await c.agent.exited;
  await c.startAgent();
  const restartLog = c.agent.lines.find((l) => l.msg === 'read current map state');
  t.ok(restartLog && (restartLog.frontends as number) > 0, 'the restarted agent found the pinned maps full');
  for (const [i, loop] of loops.entries()) {
    const r = await loop;
    const f = FAMILIES[i]!;
    t.equal(r.ok, 2000, `IPv${f.family}: all connections succeeded (${JSON.stringify(r.errors)})`);
    t.equal(r.failed, 0);
    t.equal(Object.keys(r.byPod).length, 3);
  }
});
