// loadBalancerSourceRanges at tc, where a user starts: dual-stack
// LoadBalancer Services (status.loadBalancer.ingress set, as a cloud's
// controller writes it) with their EndpointSlices in the agent's manifest
// directory, and two clients outside the cluster on the nodes' network, one
// inside the ranges and one outside them, over IPv4 and IPv6. The client
// inside is answered by the Service's pod; the one outside gets no answer
// (a drop, as kube-proxy's firewall chain drops), counted by the datapath as
// source_denied. Ranges of one family restrict that family's frontends only
// (kube-proxy ignores the others), and a change of the ranges takes effect
// while the agent runs. The agent runs on node1 only (fixtures/tc-nodes.ts);
// the only backend is on node2, so each answer went through node1's tc.
// Every address lives in namespaces this test made.
import t, { type Test } from 'tap';
import { stringify } from 'yaml';
import { SVCMAP } from '../../lab/agent-process.ts';
import type { LabClient } from '../../lab/index.ts';
import { hostPort } from '../../lab/protocol.ts';
import { type ServiceSpec, serviceObject, sliceObject } from './fixtures/manifests.ts';
import {
  CLIENT2,
  CLIENT_IP,
  NODE_IPS,
  REMOTE_POD,
  type RemoteNodePort,
  V6_IPS,
  addClient2,
  startRemoteNodePort,
  tcCounters,
} from './fixtures/tc-nodes.ts';

const CLIENT = { 4: CLIENT_IP, 6: V6_IPS.client } as const;
/** The LoadBalancer IPs (in LB_NET, which the clients route to node1). */
const lbIp = (family: 4 | 6, n: number) => (family === 4 ? `192.168.210.${n}` : `fd00:192:168:210::${n}`);
/**
 * Ranges holding the first client and not the second, written as a user may
 * (host bits set, IPv6 in capitals): 192.168.100.64/26 and
 * fd00:192:168:100::100/120 once normalized.
 */
const FIRST_ONLY = { 4: '192.168.100.100/26', 6: 'FD00:192:168:100::1AB/120' } as const;
/** The second client only. */
const SECOND_ONLY = { 4: '192.168.100.200/32', 6: 'fd00:192:168:100::200/128' } as const;

interface LbService {
  name: string;
  /** The last octet / group of its LoadBalancer IPs, and its cluster IPs'. */
  n: number;
  ranges: string[];
}

/** A dual-stack LoadBalancer Service (port 80 -> the pod's 8080) with its two EndpointSlices, the pod on node2 in each family. */
function lbYaml(s: LbService): string {
  const spec: ServiceSpec = {
    name: s.name,
    clusterIP: `10.96.0.${s.n}`,
    clusterIP6: `fd00:10:96::${s.n}`,
    type: 'LoadBalancer',
    externalTrafficPolicy: 'Cluster',
    ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30000 + s.n }],
    endpoints: [{ ip: REMOTE_POD, nodeName: 'node2' }],
    endpoints6: [{ ip: V6_IPS.pod, nodeName: 'node2' }],
    extraSpec: { loadBalancerSourceRanges: s.ranges },
  };
  const svc = {
    ...serviceObject(spec),
    status: {
      loadBalancer: {
        ingress: [
          { ip: lbIp(4, s.n), ipMode: 'VIP' },
          { ip: lbIp(6, s.n), ipMode: 'VIP' },
        ],
      },
    },
  };
  return [svc, sliceObject(spec), sliceObject(spec, 'v6abc', spec.endpoints6, 'IPv6')].map((o) => stringify(o)).join('---\n');
}

const RANGED: LbService = { name: 'ranged', n: 20, ranges: [FIRST_ONLY[4], FIRST_ONLY[6]] };
const ONLY6: LbService = { name: 'only6', n: 21, ranges: [FIRST_ONLY[6]] };
const ONLY4: LbService = { name: 'only4', n: 22, ranges: [FIRST_ONLY[4]] };

let c: RemoteNodePort;
let client2: LabClient;
t.before(async () => {
  c = await startRemoteNodePort([], { ipv6: true });
  client2 = (await addClient2(c)).client; // outside the first ranges
  for (const s of [RANGED, ONLY6, ONLY4]) await c.writeManifest(`${s.name}.yaml`, lbYaml(s));
});
t.teardown(() => c?.destroy());

/** What `fn` added to node1's tc_ingress source_denied counter. */
async function deniedDuring(fn: () => Promise<unknown>): Promise<number> {
  const before = (await tcCounters(c, 'tc_ingress')).source_denied ?? 0;
  await fn();
  return ((await tcCounters(c, 'tc_ingress')).source_denied ?? 0) - before;
}

/** A client inside the ranges: every connection answered by the pod, through node1 (SNATed, Cluster policy). */
async function answered(t: Test, who: LabClient, ip: string, what: string): Promise<void> {
  const r = await who.tcpConnect({ ip, port: 80, count: 20, timeoutMs: 2000, concurrency: 4 });
  t.equal(r.ok, 20, `${what}: 20 of 20 answered ${JSON.stringify(r.errors)}`);
  t.same(r.byPod, { 'pod-b': 20 }, `${what}: by the Service's pod`);
  t.same(r.peerNames, [hostPort(ip, 80)], `${what}: the client talked to the LoadBalancer IP`);
}

/** A client outside: no answer (the SYNs are dropped, nothing is refused), each counted as source_denied. */
async function refused(t: Test, who: LabClient, ip: string, what: string): Promise<void> {
  const denied = await deniedDuring(async () => {
    const r = await who.tcpConnect({ ip, port: 80, count: 3, timeoutMs: 700 });
    t.equal(r.ok, 0, `${what}: no connection`);
    t.same(Object.keys(r.errors), ['ETIMEDOUT'], `${what}: a timeout, as with kube-proxy's drop`);
  });
  t.ok(denied >= 3, `${what}: the datapath counted each SYN as source_denied (${denied})`);
}

for (const f of [4, 6] as const) {
  t.test(`IPv${f}: inside the ranges is answered; outside is dropped and counted`, async (t) => {
    await answered(t, c.client, lbIp(f, RANGED.n), `${CLIENT[f]} (inside)`);
    await refused(t, client2, lbIp(f, RANGED.n), `${CLIENT2[f]} (outside)`);
  });
}

t.test("the ranges apply to LoadBalancer IPs only: the client outside them reaches the same Service's NodePort", async (t) => {
  for (const f of [4, 6] as const) {
    const node = f === 4 ? NODE_IPS.node1 : V6_IPS.node1;
    const r = await client2.tcpConnect({ ip: node, port: 30000 + RANGED.n, count: 10, timeoutMs: 2000 });
    t.equal(r.ok, 10, `IPv${f}: ${JSON.stringify(r.errors)}`);
    t.same(r.byPod, { 'pod-b': 10 });
  }
});

t.test("the maps hold the normalized ranges; explain --from gives each client's verdict", async (t) => {
  const ranges = async (map: string) =>
    (
      JSON.parse(await c.lab.exec(c.node1, SVCMAP, ['dump', '--map', map, '-o', 'json', '--pin-dir', c.pinDir])) as {
        entries: Array<{ key: { prefixlen: number; addr: string } }>;
      }
    ).entries
      .map((e) => `${e.key.addr}/${e.key.prefixlen - 32}`)
      .sort();
  t.same(await ranges('svcmap_srcrng'), ['192.168.100.64/26', '192.168.100.64/26'], 'IPv4: ranged and only4, host bits cleared');
  t.same(
    await ranges('svcmap_srcrng6'),
    ['fd00:192:168:100::100/120', 'fd00:192:168:100::100/120'],
    'IPv6: ranged and only6, canonical, host bits cleared',
  );
  for (const f of [4, 6] as const) {
    const explain = async (from: string) =>
      JSON.parse(
        await c.lab.exec(c.node1, SVCMAP, [
          'explain',
          `${hostPort(lbIp(f, RANGED.n), 80)}/TCP`,
          '--from',
          from,
          '-o',
          'json',
          '--pin-dir',
          c.pinDir,
        ]),
      ) as { path: string; verdict: { kind: string; text?: string } };
    const inside = await explain(CLIENT[f]);
    t.not(inside.verdict.kind, 'dropped', `IPv${f}: explain --from ${CLIENT[f]}: ${inside.verdict.kind}`);
    const outside = await explain(CLIENT2[f]);
    t.match(
      outside,
      { path: 'tc', verdict: { kind: 'dropped', text: /not in the frontend's loadBalancerSourceRanges/ } },
      `IPv${f}: explain --from ${CLIENT2[f]}`,
    );
  }
});

t.test("ranges of one family only restrict that family; the other family's LoadBalancer IP takes every client (kube-proxy)", async (t) => {
  // only6: IPv6 ranges. Its IPv4 LoadBalancer IP is open to both clients, its IPv6 one to the first.
  await answered(t, c.client, lbIp(4, ONLY6.n), 'only6, IPv4, first client');
  await answered(t, client2, lbIp(4, ONLY6.n), 'only6, IPv4, second client');
  await answered(t, c.client, lbIp(6, ONLY6.n), 'only6, IPv6, first client (inside)');
  await refused(t, client2, lbIp(6, ONLY6.n), 'only6, IPv6, second client (outside)');
  // only4: the reverse.
  await answered(t, c.client, lbIp(6, ONLY4.n), 'only4, IPv6, first client');
  await answered(t, client2, lbIp(6, ONLY4.n), 'only4, IPv6, second client');
  await answered(t, c.client, lbIp(4, ONLY4.n), 'only4, IPv4, first client (inside)');
  await refused(t, client2, lbIp(4, ONLY4.n), 'only4, IPv4, second client (outside)');
});

t.test('the ranges change while the agent runs: the client let in is refused, the one refused is let in, both families', async (t) => {
  const pid = c.agent.child.pid;
  await c.writeManifest(`${RANGED.name}.yaml`, lbYaml({ ...RANGED, ranges: [SECOND_ONLY[4], SECOND_ONLY[6]] }));
  for (const f of [4, 6] as const) {
    await refused(t, c.client, lbIp(f, RANGED.n), `IPv${f}: ${CLIENT[f]}, inside before, outside now`);
    await answered(t, client2, lbIp(f, RANGED.n), `IPv${f}: ${CLIENT2[f]}, outside before, inside now`);
  }
  // And the ranges removed: no restriction at all.
  await c.writeManifest(`${RANGED.name}.yaml`, lbYaml({ ...RANGED, ranges: [] }));
  for (const f of [4, 6] as const) {
    for (const [who, ip] of [
      [c.client, CLIENT[f]],
      [client2, CLIENT2[f]],
    ] as const)
      await answered(t, who, lbIp(f, RANGED.n), `IPv${f}: ${ip}, no ranges`);
  }
  const dump = JSON.parse(await c.lab.exec(c.node1, SVCMAP, ['dump', '--map', 'svcmap_srcrng6', '-o', 'json', '--pin-dir', c.pinDir])) as {
    entries: unknown[];
  };
  t.equal(dump.entries.length, 1, "the removed IPv6 ranges left svcmap_srcrng6 (only only6's is there)");
  t.equal(c.agent.child.pid, pid, 'the same agent process throughout');
});
