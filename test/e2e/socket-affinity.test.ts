// sessionAffinity: ClientIP at the socket level, end to end: the real agent
// and its hooks on a cgroup of the test's own, real sockets from two client
// pods (two network namespaces, so two netns cookies: two clients) in that
// cgroup to the echo pods. What the upstream conformance specs check: many
// connections from one pod reach one backend; switching None <-> ClientIP on
// a live Service; after the timeout the backend may change. Plus: a removed
// backend is left at once, and the client identity is the namespace.
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { stringify } from 'yaml';
import t, { type Test as Tap } from 'tap';
import { BpfMap } from '../../src/bpf/map.ts';
import type { AffinityKey, AffinityValue } from '../../src/maps/codecs.ts';
import { AFFINITY_ORIGIN_SOCK, AFFINITY_ORIGIN_SOCK6, IPPROTO_TCP, SVC_SCOPE_EXT } from '../../src/maps/constants.ts';
import { DatapathMaps } from '../../src/maps/datapath-maps.ts';
import { affinityMap } from '../../src/maps/registry.ts';
import { TypedMap } from '../../src/maps/typed-map.ts';
import type { LabClient } from '../../lab/index.ts';
import { type Cluster, POD_IPS, POD_NAMES, echoService, startCluster } from './fixtures/cluster.ts';
import type { ServiceSpec } from './fixtures/manifests.ts';

const STICKY = '10.96.0.50';
const BRIEF = '10.96.0.51';
const NODE_IP = '10.244.0.100'; // the first client pod's address, standing in for the node's
const MAX_AFFINITY = 8192;

const affinity = (timeoutSeconds: number) => ({ sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds } } });
const sticky = (opts: Partial<ServiceSpec> = {}) => echoService('sticky', STICKY, { extraSpec: affinity(10800), ...opts });
const brief = echoService('brief', BRIEF, { extraSpec: affinity(2) });
const stickyNodePort: ServiceSpec = {
  ...echoService('stickynp', '10.96.0.52', { extraSpec: affinity(10800) }),
  type: 'NodePort',
  ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30090 }],
};

const STICKY6 = 'fd00:10:96::53';
const sticky6 = echoService('sticky6', '10.96.0.53', { clusterIP6: STICKY6, extraSpec: affinity(10800) });

let c: Cluster;
let client2: LabClient;
t.before(async () => {
  c = await startCluster([sticky(), brief, stickyNodePort, sticky6], { ipv6: true });
  writeFileSync(
    join(c.manifests, 'node.yaml'),
    stringify({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'node' },
      status: {
        addresses: [
          { type: 'InternalIP', address: NODE_IP },
          { type: 'Hostname', address: 'node' },
        ],
      },
    }),
  );
  const pod2 = await c.lab.pod(c.clientPod.node, 'client2', '10.244.0.101');
  client2 = await c.lab.client(pod2, { cgroup: c.cgroup });
  await c.startAgent(['--max-affinity', String(MAX_AFFINITY)]);
});
t.teardown(async () => {
  await c?.destroy();
});

const pods = (byPod: Record<string, number>) => Object.keys(byPod).sort();

/** The one pod `count` TCP connections from `client` reached (fails the test otherwise). */
async function onePod(
  tt: Tap,
  client: LabClient,
  ip: string,
  count: number,
  what: string,
  { port = 80, concurrency = 4 } = {},
): Promise<string> {
  const r = await client.tcpConnect({ ip, port, count, timeoutMs: 2000, concurrency });
  tt.equal(r.ok, count, `${what}: ${count} connections succeed (${JSON.stringify(r.errors)})`);
  tt.equal(pods(r.byPod).length, 1, `${what}: all reach one pod (${JSON.stringify(r.byPod)})`);
  return pods(r.byPod)[0]!;
}

/** The socket hooks' affinity entries, through the pinned map. */
function withAffinity<T>(fn: (m: TypedMap<AffinityKey, AffinityValue>, maps: DatapathMaps) => T): T {
  const maps = DatapathMaps.openPinned(c.pinDir);
  try {
    return fn(maps.affinity!, maps);
  } finally {
    maps.close();
  }
}

t.test('with ClientIP affinity every connection from one pod reaches one backend', async (t) => {
  const first = await onePod(t, c.client, STICKY, 60, 'client 1, TCP');
  t.equal(
    await onePod(t, c.client, STICKY, 15, 'client 1, 15 consecutive connections', { concurrency: 1 }),
    first,
    'the same pod as before',
  );
  await onePod(t, client2, STICKY, 60, 'client 2, TCP');

  const u = await c.client.udpSend({ ip: STICKY, port: 53, count: 30, connected: false, timeoutMs: 2000 });
  t.equal(u.ok, 30, JSON.stringify(u.errors));
  t.equal(pods(u.byPod).length, 1, `unconnected UDP: every datagram to one pod (${JSON.stringify(u.byPod)})`);
  t.same(u.replySources, [`${STICKY}:53`], 'replies still show the VIP');
  const cu = await c.client.udpSend({ ip: STICKY, port: 53, count: 10, connected: true, timeoutMs: 2000 });
  t.same(pods(cu.byPod), pods(u.byPod), 'connected UDP sockets of the same pod reach the same pod');
});

t.test('the client is the network namespace: one entry per pod, each honoured on its own', async (t) => {
  const master = { addr: STICKY, port: 80, proto: IPPROTO_TCP, scope: SVC_SCOPE_EXT, slot: 0 };
  const revNatId = withAffinity((_, maps) => maps.v4.services.get(master)!.rev_nat_id);
  const entriesOfFrontend = () => withAffinity((aff) => aff.entries().filter(([k]) => k.rev_nat_id === revNatId));
  // Forget the frontend's entries, then let each client make its own, one after the other.
  withAffinity((aff) => {
    for (const [k] of entriesOfFrontend()) aff.delete(k);
  });
  await onePod(t, c.client, STICKY, 5, 'client 1');
  const afterOne = entriesOfFrontend();
  t.equal(afterOne.length, 1, 'client 1 made one entry');
  await onePod(t, client2, STICKY, 5, 'client 2');
  const afterTwo = entriesOfFrontend();
  t.equal(afterTwo.length, 2, 'client 2 made another');
  const key1 = afterOne[0]![0];
  const key2 = afterTwo.find(([k]) => k.netns_cookie !== key1.netns_cookie)?.[0];
  t.ok(key2, 'with another netns cookie');
  for (const k of [key1, key2!]) {
    t.match(k, { client_addr: '0.0.0.0', origin: AFFINITY_ORIGIN_SOCK }, 'a socket entry carries no address');
    t.ok(k.netns_cookie > 0n, 'but a netns cookie');
  }
  const dump = JSON.parse(c.svcmap('dump', '--map', 'svcmap_affin', '-o', 'json')) as {
    entries: Array<{ key: { rev_nat_id: number; origin: string } }>;
  };
  t.equal(
    dump.entries.filter((e) => e.key.rev_nat_id === revNatId && e.key.origin === 'socket').length,
    2,
    'svcmap dump --map svcmap_affin shows both',
  );

  // Point the two clients at two different backends: each follows its own entry.
  withAffinity((aff, maps) => {
    const slot = (s: number) => ({ slot: s, backend_id: maps.v4.services.get({ ...master, slot: s })!.backend_id });
    aff.put(key1, { ...aff.get(key1)!, ...slot(1) });
    aff.put(key2!, { ...aff.get(key2!)!, ...slot(2) });
  });
  const one = await onePod(t, c.client, STICKY, 20, 'client 1 after the change');
  const two = await onePod(t, client2, STICKY, 20, 'client 2 after the change');
  t.not(one, two, `each client follows its own entry (${one}, ${two})`);
});

// (127.0.0.1:NodePort serves the node's own processes only, not a pod: test/e2e/nodeport-host.test.ts.)
t.test('NodeIP:NodePort with affinity is sticky too', async (t) => {
  const viaNode = await onePod(t, c.client, NODE_IP, 40, 'NodeIP:NodePort', { port: 30090 });
  t.equal(await onePod(t, c.client, NODE_IP, 15, 'NodeIP:NodePort, consecutive', { port: 30090, concurrency: 1 }), viaNode);
});

t.test('when the chosen backend leaves the Service the client moves to a remaining one at once', async (t) => {
  const before = await onePod(t, c.client, STICKY, 10, 'before');
  const gone = POD_NAMES.indexOf(before);
  await c.writeService(sticky({ endpoints: POD_IPS.filter((_, i) => i !== gone).map((ip) => ({ ip })) }));
  const after = await onePod(t, c.client, STICKY, 30, 'after the removal', { concurrency: 1 });
  t.not(after, before, `the removed pod ${before} gets no new connection; the client is on ${after}`);
  await c.writeService(sticky());
  t.equal(await onePod(t, c.client, STICKY, 20, 'after the pod is back'), after, 'and stays there when the old pod returns');
});

t.test('switching None <-> ClientIP on a live Service', async (t) => {
  await c.writeService(sticky({ extraSpec: {} }));
  const spread = await c.client.tcpConnect({ ip: STICKY, port: 80, count: 90, timeoutMs: 2000, concurrency: 4 });
  t.equal(spread.ok, 90, JSON.stringify(spread.errors));
  t.same(
    pods(spread.byPod),
    [...POD_NAMES].sort(),
    `without affinity connections spread over every pod again (${JSON.stringify(spread.byPod)})`,
  );
  await c.writeService(sticky());
  await onePod(t, c.client, STICKY, 15, 'ClientIP again, 15 consecutive connections', { concurrency: 1 });
  await onePod(t, client2, STICKY, 15, 'ClientIP again, client 2', { concurrency: 1 });
});

t.test('after the timeout (2 s) a new choice is made', async (t) => {
  // One connection per round, then more than the timeout without any: the
  // entry expires and the next connection chooses at random again. A
  // change of pod within 15 rounds is certain but for (1/3)^15.
  const seen = [await onePod(t, c.client, BRIEF, 1, 'round 0')];
  for (let round = 1; round < 15 && seen.every((p) => p === seen[0]); round++) {
    await new Promise((r) => setTimeout(r, 2600));
    seen.push(await onePod(t, c.client, BRIEF, 1, `round ${round}`));
  }
  t.ok(
    seen.some((p) => p !== seen[0]),
    `the backend changed after the timeout (${seen.join(', ')})`,
  );
});

t.test('the map is pinned, sized by --max-affinity, listed by status, and kept across a restart', async (t) => {
  const status = c.svcmap('status');
  t.match(status, new RegExp(`svcmap_affin\\s+lru_hash\\s+\\d+/${MAX_AFFINITY}\\b`));
  const pinned = BpfMap.openPinned(join(c.pinDir, affinityMap.name));
  t.equal(pinned.maxEntries, MAX_AFFINITY);
  pinned.close();

  const before = await onePod(t, c.client, STICKY, 10, 'before the restart');
  c.agent.kill('SIGTERM');
  await c.agent.exited;
  await c.startAgent(['--max-affinity', String(MAX_AFFINITY)]);
  const up = c.agent.lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('datapath up'));
  t.ok((up?.reusedMaps as string[] | undefined)?.includes(affinityMap.name), 'the restarted agent reused the pinned affinity map');
  t.equal(await onePod(t, c.client, STICKY, 10, 'after the restart'), before, 'the client keeps its backend across the restart');
});

t.test('IPv6 frontends: ClientIP affinity per pod, in entries of their own origin', async (t) => {
  const first = await onePod(t, c.client, STICKY6, 60, 'IPv6, TCP');
  t.equal(await onePod(t, c.client, STICKY6, 15, 'IPv6, 15 consecutive connections', { concurrency: 1 }), first, 'the same pod as before');
  const u = await c.client.udpSend({ ip: STICKY6, port: 53, count: 30, connected: false, timeoutMs: 2000 });
  t.equal(pods(u.byPod).length, 1, `unconnected UDP over IPv6: every datagram to one pod (${JSON.stringify(u.byPod)})`);
  const master = { addr: STICKY6, port: 80, proto: IPPROTO_TCP, scope: SVC_SCOPE_EXT, slot: 0 };
  withAffinity((aff, maps) => {
    const revNatId = maps.v6!.services.get(master)!.rev_nat_id;
    const mine = aff.entries().filter(([k]) => k.origin === AFFINITY_ORIGIN_SOCK6 && k.rev_nat_id === revNatId);
    t.equal(mine.length, 1, 'one IPv6 socket entry for the client pod');
    const be = maps.v6!.backends.get(mine[0]![1].backend_id);
    t.equal(be?.port, 8080, 'naming a backend of the IPv6 maps');
  });
  await onePod(t, c.client, '10.96.0.53', 30, 'the same Service over IPv4 sticks on its own');
});
