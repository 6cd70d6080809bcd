// svcmap explain against the real pinned maps of a running agent (the e2e
// fixture: namespaces, echo pods, a client pod in the test's own cgroup),
// cross-checked with what real connections through the datapath do: a
// plain service, an affinity service after a connection, a service without
// endpoints, and an address that is no service; the same Services' IPv6
// frontends (they are dual-stack), --from an IPv6 client, and an
// IPv4-mapped address.
import t from 'tap';
import type { Explanation } from '../../src/cli/explain-view.ts';
import { NO_ENDPOINTS, UNTOUCHED } from '../../src/cli/explain-view.ts';
import { bootTimeNs } from '../../src/cli/explain.ts';
import { tcAffinityKey } from '../../src/maps/affinity-client.ts';
import { AFFINITY_ORIGIN_TC, IPPROTO_TCP, SVC_SCOPE_EXT } from '../../src/maps/constants.ts';
import { DatapathMaps } from '../../src/maps/datapath-maps.ts';
import { execFileSync } from 'node:child_process';
import { SVCMAP } from '../../lab/agent-process.ts';
import { type Cluster, POD_IPS, POD_IPS6, POD_NAMES, echoService, startCluster } from '../e2e/fixtures/cluster.ts';

const WEB = '10.96.0.70';
const STICKY = '10.96.0.71';
const EMPTY = '10.96.0.72';
const [WEB6, STICKY6, EMPTY6] = ['fd00:10:96::46', 'fd00:10:96::47', 'fd00:10:96::48'];

let c: Cluster;
t.before(async () => {
  c = await startCluster(
    [
      echoService('web', WEB, { clusterIP6: WEB6 }),
      echoService('sticky', STICKY, {
        clusterIP6: STICKY6,
        extraSpec: { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 10800 } } },
      }),
      echoService('empty', EMPTY, { clusterIP6: EMPTY6, endpoints: [], endpoints6: [] }),
    ],
    { ipv6: true },
  );
  await c.startAgent();
});
t.teardown(async () => {
  await c?.destroy();
});

const explainJson = (...args: string[]) => JSON.parse(c.svcmap('explain', ...args, '-o', 'json')) as Explanation;
const podAddress = (pod: string) => `${POD_IPS[POD_NAMES.indexOf(pod)]}:8080`;

t.test('a plain ClusterIP: its backends, random among them, as real connections find', async (t) => {
  const e = explainJson(`${WEB}:80/TCP`);
  t.match(e.frontend, {
    frontend: `${WEB}:80/TCP`,
    flags: ['ClusterIP'],
    scope: 'external',
    algorithm: 'random (uniform)',
    affinityTimeoutSeconds: null,
    problems: [],
  });
  t.same(
    e.frontend!.backends.map((b) => b.address).sort(),
    POD_IPS.map((ip) => `${ip}:8080`),
  );
  t.same(
    e.frontend!.backends.map((b) => b.state),
    ['active', 'active', 'active'],
  );
  t.same(e.verdict, { kind: 'random', among: 3, text: 'random among 3' });
  t.same(
    explainJson(`${WEB}:53/UDP`)
      .frontend!.backends.map((b) => b.address)
      .sort(),
    POD_IPS.map((ip) => `${ip}:5353`),
    'the UDP port: the UDP backends',
  );

  const text = c.svcmap('explain', `${WEB}:80`);
  t.match(text, new RegExp(`^Frontend: {3}${WEB.replace(/\./g, '\\.')}:80/TCP$`, 'm'), 'the protocol defaults to TCP');
  t.match(text, /^Backends: {3}3$/m);
  t.match(text, /^Verdict: {4}random among 3\n$/m);

  const r = await c.client.tcpConnect({ ip: WEB, port: 80, count: 60, timeoutMs: 2000, concurrency: 4 });
  t.equal(r.ok, 60, JSON.stringify(r.errors));
  t.same(Object.keys(r.byPod).sort(), [...POD_NAMES].sort(), `the datapath spreads over the same three (${JSON.stringify(r.byPod)})`);
});

t.test("an affinity service after a connection: the pod's entry and its backend; a tc client's entry decides for it", async (t) => {
  const before = explainJson(`${STICKY}:80/TCP`);
  t.same(before.frontend!.flags, ['ClusterIP', 'affinity']);
  t.equal(before.frontend!.affinityTimeoutSeconds, 10800);
  t.same(before.remembered, [], 'no client yet');

  const r = await c.client.tcpConnect({ ip: STICKY, port: 80, count: 5, timeoutMs: 2000, concurrency: 1 });
  t.equal(r.ok, 5, JSON.stringify(r.errors));
  const pods = Object.keys(r.byPod);
  t.equal(pods.length, 1, 'one pod, by affinity');
  const after = explainJson(`${STICKY}:80/TCP`);
  t.equal(after.remembered.length, 1, 'the client pod is remembered');
  t.match(after.remembered[0], { origin: 'socket', client: /^netns \d+$/, backend: podAddress(pods[0]!), current: true });
  t.ok(after.remembered[0]!.lastUsedSecondsAgo < 60, `last used ${after.remembered[0]!.lastUsedSecondsAgo}s ago`);
  t.equal(
    after.verdict.text,
    'random among 3, unless the connecting pod has a current affinity entry (1 has one, see Remembered); the choice is remembered for 10800s',
  );
  t.match(
    c.svcmap('explain', `${STICKY}:80/TCP`),
    new RegExp(`^ {2}socket netns \\d+ +${podAddress(pods[0]!).replace(/\./g, '\\.')} +\\d +[\\d.]+s ago +yes$`, 'm'),
  );

  // The tc path's entries are keyed by client address. No packet from
  // outside reaches this fixture's node, so the entries are written as
  // lb4_affinity_select() writes them: one current, one whose slot now holds
  // another backend.
  const maps = DatapathMaps.openPinned(c.pinDir);
  t.teardown(() => maps.close());
  const key = { addr: STICKY, port: 80, proto: IPPROTO_TCP, scope: SVC_SCOPE_EXT };
  const revNatId = maps.v4.services.get({ ...key, slot: 0 })!.rev_nat_id;
  const [slot1, slot2] = [1, 2].map((slot) => maps.v4.services.get({ ...key, slot })!.backend_id);
  const client = (addr: string) => ({ netns_cookie: 0n, client_addr: addr, rev_nat_id: revNatId, origin: AFFINITY_ORIGIN_TC });
  maps.affinity!.put(client('192.0.2.10'), { last_used: bootTimeNs(), backend_id: slot2!, slot: 2 });
  maps.affinity!.put(client('192.0.2.11'), { last_used: bootTimeNs(), backend_id: slot1!, slot: 2 });
  t.teardown(() => {
    maps.affinity!.delete(client('192.0.2.10'));
    maps.affinity!.delete(client('192.0.2.11'));
  });

  const kept = explainJson(`${STICKY}:80/TCP`, '--from', '192.0.2.10');
  t.equal(kept.path, 'tc');
  t.equal(kept.verdict.kind, 'affinity');
  t.match(kept.verdict.backend, { slot: 2, id: slot2 });
  t.match(
    c.svcmap('explain', `${STICKY}:80/TCP`, '--from', '192.0.2.10'),
    /^Verdict: {4}10\.244\.0\.1\d:8080 \(slot 2\): the affinity entry of 192\.0\.2\.10, last used [\d.]+s ago$/m,
  );
  const stale = explainJson(`${STICKY}:80/TCP`, '--from', '192.0.2.11');
  t.equal(stale.verdict.kind, 'random');
  t.match(
    stale.verdict.text,
    new RegExp(`^random among 3: the affinity entry of 192\\.0\\.2\\.11 is stale \\(slot 2 no longer holds backend ${slot1}\\)`),
  );
  t.equal(
    explainJson(`${STICKY}:80/TCP`, '--from', '192.0.2.12').verdict.text,
    'random among 3: 192.0.2.12 has no affinity entry; the choice is remembered for 10800s',
  );
  t.equal(explainJson(`${STICKY}:80/TCP`).remembered.length, 3, 'every entry of the frontend is listed');
});

t.test('a service without endpoints: refused, as connect() is', async (t) => {
  const e = explainJson(`${EMPTY}:80/TCP`);
  t.same(e.frontend!.backends, []);
  t.same(e.verdict, { kind: 'refused', text: NO_ENDPOINTS });
  const text = c.svcmap('explain', `${EMPTY}:80/TCP`);
  t.match(text, /^Backends: {3}0$/m);
  t.match(text, /^Verdict: {4}refused: no endpoints \(ECONNREFUSED at connect \/ dropped at tc\)$/m);
  const r = await c.client.tcpConnect({ ip: EMPTY, port: 80, count: 3, timeoutMs: 2000 });
  t.same(r.errors, { ECONNREFUSED: 3 }, 'the datapath refuses');
});

t.test('an address that is no frontend: untouched, exit 0', async (t) => {
  const text = c.svcmap('explain', '10.96.0.99:80/TCP');
  t.equal(text, `Frontend:   10.96.0.99:80/TCP\nPath:       socket hooks (a connection made on this node)\nVerdict:    ${UNTOUCHED}\n`);
  const e = explainJson(`${WEB}:8080/TCP`);
  t.equal(e.frontend, null, "a frontend's address on a port it does not serve");
  t.same(e.verdict, { kind: 'untouched', text: UNTOUCHED });
  t.equal(explainJson('10.96.0.99:80/TCP', '--from', '192.0.2.10').verdict.kind, 'untouched');
});

t.test(
  'IPv6 frontends: [VIP]:PORT through the IPv6 maps, their own affinity entries; an IPv4-mapped VIP is the IPv4 frontend',
  async (t) => {
    const e = explainJson(`[${WEB6}]:80/TCP`);
    t.equal(e.query, `[${WEB6}]:80/TCP`);
    t.match(e.frontend, {
      frontend: `[${WEB6}]:80/TCP`,
      flags: ['ClusterIP'],
      scope: 'external',
      algorithm: 'random (uniform)',
      problems: [],
    });
    t.same(
      e.frontend!.backends.map((b) => b.address).sort(),
      POD_IPS6.map((ip) => `[${ip}]:8080`),
      'the IPv6 backends',
    );
    t.same(e.verdict, { kind: 'random', among: 3, text: 'random among 3' });
    t.match(
      c.svcmap('explain', `[${WEB6.toUpperCase()}]:53/udp`),
      new RegExp(`^Frontend: {3}\\[${WEB6}\\]:53/UDP$`, 'm'),
      'canonical text, the UDP port',
    );

    const r = await c.client.tcpConnect({ ip: STICKY6, port: 80, count: 5, timeoutMs: 2000, concurrency: 1 });
    t.equal(r.ok, 5, JSON.stringify(r.errors));
    const pods = Object.keys(r.byPod);
    t.equal(pods.length, 1, 'one pod, by affinity');
    const sticky = explainJson(`[${STICKY6}]:80/TCP`);
    t.same(sticky.frontend!.flags, ['ClusterIP', 'affinity']);
    t.equal(sticky.remembered.length, 1, "only the IPv6 frontend's entry (the IPv4 one's, whose id may be the same number, are not its)");
    t.match(sticky.remembered[0], {
      origin: 'socket',
      client: /^netns \d+$/,
      backend: `[${POD_IPS6[POD_NAMES.indexOf(pods[0]!)]}]:8080`,
      current: true,
    });

    const mapped = explainJson(`[::ffff:${WEB}]:80/TCP`);
    t.equal(mapped.query, `[::ffff:${WEB}]:80/TCP`);
    t.match(mapped.frontend, { frontend: `${WEB}:80/TCP`, matched: /IPv4-mapped/ });
    t.same(
      mapped.frontend!.backends.map((b) => b.address).sort(),
      POD_IPS.map((ip) => `${ip}:8080`),
      'the IPv4 backends',
    );

    t.same(explainJson(`[${EMPTY6}]:80/TCP`).verdict, { kind: 'refused', text: NO_ENDPOINTS });
    t.equal(explainJson('[fd00:10:96::99]:80/TCP').verdict.kind, 'untouched');
    t.equal(explainJson('[fd00:10:96::99]:80/TCP', '--from', '2001:db8::10').verdict.kind, 'untouched');
    try {
      execFileSync(SVCMAP, ['explain', `[${WEB6}]:80/TCP`, '--from', '192.0.2.10', '--pin-dir', c.pinDir], {
        encoding: 'utf8',
        stdio: 'pipe',
      });
      t.fail('an IPv4 client of an IPv6 frontend should be refused');
    } catch (err) {
      const e2 = err as { status: number; stderr: string };
      t.equal(e2.status, 2, 'a usage error');
      t.match(e2.stderr, /--from: 192\.0\.2\.10 is an IPv4 address and \[fd00:10:96::46\]:80\/TCP an IPv6 frontend/);
    }
  },
);

t.test("IPv6 --from: the tc path through the IPv6 maps, the client's tc6 entry (its /64 and folded interface id)", async (t) => {
  const e = explainJson(`[${WEB6}]:80/TCP`, '--from', '2001:db8::10');
  t.equal(e.path, 'tc');
  t.equal(e.client, '2001:db8::10');
  t.same(
    e.frontend!.backends.map((b) => b.address).sort(),
    POD_IPS6.map((ip) => `[${ip}]:8080`),
    'the IPv6 backends',
  );
  t.same(e.verdict, { kind: 'random', among: 3, text: 'random among 3' });
  t.same(explainJson(`[${EMPTY6}]:80/TCP`, '--from', '2001:db8::10').verdict, { kind: 'refused', text: NO_ENDPOINTS });

  // As for IPv4, no packet from outside reaches this node: the entries are
  // written as lb6_tc_select() keys them, one current, one whose slot now
  // holds another backend.
  const maps = DatapathMaps.openPinned(c.pinDir);
  t.teardown(() => maps.close());
  const key = { addr: STICKY6, port: 80, proto: IPPROTO_TCP, scope: SVC_SCOPE_EXT };
  const revNatId = maps.v6!.services.get({ ...key, slot: 0 })!.rev_nat_id;
  const [slot1, slot2] = [1, 2].map((slot) => maps.v6!.services.get({ ...key, slot })!.backend_id);
  const [kept, stale] = [tcAffinityKey('2001:db8:0:1::10', revNatId), tcAffinityKey('2001:db8:0:2::11', revNatId)];
  maps.affinity!.put(kept, { last_used: bootTimeNs(), backend_id: slot2!, slot: 2 });
  maps.affinity!.put(stale, { last_used: bootTimeNs(), backend_id: slot1!, slot: 2 });
  t.teardown(() => {
    maps.affinity!.delete(kept);
    maps.affinity!.delete(stale);
  });

  const k = explainJson(`[${STICKY6}]:80/TCP`, '--from', '2001:DB8:0:1:0::10');
  t.equal(k.client, '2001:db8:0:1::10', 'the client in canonical text');
  t.equal(k.verdict.kind, 'affinity');
  t.match(k.verdict.backend, { slot: 2, id: slot2 });
  t.match(k.clientAffinity, { origin: 'tc', client: '2001:db8:0:1::/64 fold 00000010', current: true });
  t.match(
    c.svcmap('explain', `[${STICKY6}]:80/TCP`, '--from', '2001:db8:0:1::10'),
    /^Verdict: {4}\[fd00:10:244::[\da-f]+\]:8080 \(slot 2\): the affinity entry of 2001:db8:0:1::10, last used [\d.]+s ago$/m,
  );
  const s = explainJson(`[${STICKY6}]:80/TCP`, '--from', '2001:db8:0:2::11');
  t.match(
    s.verdict.text,
    new RegExp(`^random among 3: the affinity entry of 2001:db8:0:2::11 is stale \\(slot 2 no longer holds backend ${slot1}\\)`),
  );
  t.equal(
    explainJson(`[${STICKY6}]:80/TCP`, '--from', '2001:db8:0:3::10').verdict.text,
    'random among 3: 2001:db8:0:3::10 has no affinity entry; the choice is remembered for 10800s',
  );
  t.same(
    explainJson(`[${STICKY6}]:80/TCP`)
      .remembered.map((r) => r.client)
      .filter((x) => x.includes('fold'))
      .sort(),
    ['2001:db8:0:1::/64 fold 00000010', '2001:db8:0:2::/64 fold 00000011'],
    'every tc6 entry of the frontend is listed',
  );
  t.equal(
    explainJson(`${STICKY}:80/TCP`, '--from', '192.0.2.20').remembered.filter((r) => r.client.includes('fold')).length,
    0,
    'not under the IPv4 frontend (whose id may be the same number)',
  );
});
