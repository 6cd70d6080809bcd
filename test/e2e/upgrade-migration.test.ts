// An upgrade across a map layout change, on one node, from where an operator
// starts: agent A (this build) serves a file-source NodePort Service on
// node1 (its only backend on node2, so the tc flows are DNATed and SNATed),
// with socket-LB connections from node1 (the agent's cgroup) and NodePort
// connections from an outside client running, and long-lived flows held
// open through the NodePort (TCP and UDP, each exchanging every 50 ms). A
// stops; agent B starts with SVCMAP_TEST_LAYOUT=1, whose backend value has
// another layout, and migrates the pinned maps; then back from B to A. Also
// a resize (--max-backends larger) through the same path, and a migration
// that cannot fit (--max-backends below the entries) leaving the old
// datapath serving. Every address lives in namespaces this test made.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { SVCMAP } from '../../lab/agent-process.ts';
import type { LabClient } from '../../lab/index.ts';
import { BpfMap } from '../../src/bpf/map.ts';
import { backendConnsMap, backendsMap, ctMap } from '../../src/maps/registry.ts';
import { serviceYaml } from './fixtures/manifests.ts';
import {
  NODE_IPS,
  REMOTE_NODEPORT,
  REMOTE_POD,
  REMOTE_UDP_NODEPORT,
  type RemoteNodePort,
  startRemoteNodePort,
} from './fixtures/tc-nodes.ts';

const VIP = '10.96.0.10';
const HELD_NODEPORT = 30081;
const HELD_PODS = [
  ['pod-c', '10.244.2.11'],
  ['pod-d', '10.244.2.12'],
] as const;
const HELD_TCP_FLOWS = 6;
const TEST_LAYOUT = { ...process.env, SVCMAP_TEST_LAYOUT: '1' };
const NORMAL = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'SVCMAP_TEST_LAYOUT'));

let c: RemoteNodePort;
let sockClient: LabClient;
t.before(async () => {
  c = await startRemoteNodePort();
  // A client on node1 in the agent's cgroup: its connections to the ClusterIP go through the socket hooks.
  sockClient = await c.lab.client(c.node1, { cgroup: c.cgroup });
  // The held TCP flows' Service: three backends on node2, so a flow that lost its conntrack entry would be
  // sent to a backend picked anew (most likely another: its connection reset), not quietly to the same one.
  for (const [name, ip] of HELD_PODS) await c.lab.echoServer(await c.lab.pod(c.node2, name, ip), { tcpPorts: [8080] });
  await c.writeManifest(
    'held.yaml',
    serviceYaml({
      name: 'held',
      clusterIP: '10.96.0.40',
      type: 'NodePort',
      externalTrafficPolicy: 'Cluster',
      ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: HELD_NODEPORT }],
      endpoints: [REMOTE_POD, ...HELD_PODS.map(([, ip]) => ip)].map((ip) => ({ ip, nodeName: 'node2' })),
    }),
  );
});
t.teardown(async () => {
  await sockClient?.close();
  await c?.destroy();
});

/** What the pinned maps serve, as `svcmap dump` (of the layout in use) decodes them: frontend -> backend addresses. */
function served(env: NodeJS.ProcessEnv): Record<string, string[]> {
  const d = JSON.parse(execFileSync(SVCMAP, ['dump', '-o', 'json', '--pin-dir', c.pinDir], { encoding: 'utf8', env })) as {
    frontends: Array<{ frontend: string; backends: Array<{ address: string; state: string }> }>;
  };
  return Object.fromEntries(d.frontends.map((f) => [f.frontend, f.backends.map((b) => `${b.address} ${b.state}`).sort()]));
}

function pinned(name: string): { valueSize: number; maxEntries: number } {
  const m = BpfMap.openPinned(join(c.pinDir, name));
  try {
    return { valueSize: m.valueSize, maxEntries: m.maxEntries };
  } finally {
    m.close();
  }
}

/** Connections in rounds until stop() is called: new ones through the socket hooks and through the NodePort. */
function connectUntilStopped(): { stop: () => Promise<{ sock: Counts; tc: Counts }> } {
  let running = true;
  const total = () => ({ ok: 0, failed: 0, errors: {} as Record<string, number> });
  const sums = { sock: total(), tc: total() };
  const loop = async (client: LabClient, ip: string, port: number, into: Counts) => {
    while (running) {
      const r = await client.tcpConnect({ ip, port, count: 10, timeoutMs: 3000, concurrency: 2, reset: true });
      into.ok += r.ok;
      into.failed += r.failed;
      for (const [k, n] of Object.entries(r.errors)) into.errors[k] = (into.errors[k] ?? 0) + n;
    }
  };
  const loops = [loop(sockClient, VIP, 80, sums.sock), loop(c.client, NODE_IPS.node1, REMOTE_NODEPORT, sums.tc)];
  return {
    stop: async () => {
      running = false;
      await Promise.all(loops);
      return sums;
    },
  };
}
type Counts = { ok: number; failed: number; errors: Record<string, number> };

/**
 * Stops the running agent and starts one with `env` and `args` while
 * connections run and flows are held: every connection succeeds, every held
 * flow is still answered afterwards, without a reconnect or an error.
 */
async function switchAgents(t: Test, env: NodeJS.ProcessEnv, args: string[] = []): Promise<void> {
  const held = [await c.client.udpStreamStart({ ip: NODE_IPS.node1, port: REMOTE_UDP_NODEPORT, intervalMs: 50, timeoutMs: 2000 })];
  for (let i = 0; i < HELD_TCP_FLOWS; i++)
    held.push(await c.client.udpStreamStart({ ip: NODE_IPS.node1, port: HELD_NODEPORT, intervalMs: 50, timeoutMs: 2000, tcp: true }));
  const conns = connectUntilStopped();
  await c.stopAgent();
  const agent = await c.startAgent(args, env);
  const done = await agent.waitFor((l) => l.msg === 'migration done', { timeoutMs: 5000, what: '"migration done"' });
  t.comment(
    `the migration took ${done.ms} ms (loading the new programs included)${done.holdMs === undefined ? '' : `, new tc flows held for ${done.holdMs} ms`}`,
  );
  // The held flows answer again and again under the new agent's programs.
  for (const h of held) await c.client.udpStreamReplies(h.stream!, 20);
  const counts = await conns.stop();
  for (const [i, h] of held.entries()) {
    const r = await c.client.udpStreamStop(h.stream!);
    const what = i === 0 ? 'the held UDP flow' : `held TCP flow ${i}`;
    t.same(r.errors, {}, `${what} through the NodePort: no error`);
    t.equal(r.reconnects, 0, `${what}: the same socket throughout`);
    t.same(Object.keys(r.byPod), [h.pod], `${what}: answered by its backend (${h.pod}) throughout`);
  }
  t.equal(counts.sock.failed, 0, `socket LB: ${counts.sock.ok} connections, 0 failed (${JSON.stringify(counts.sock.errors)})`);
  t.equal(counts.tc.failed, 0, `NodePort: ${counts.tc.ok} connections, 0 failed (${JSON.stringify(counts.tc.errors)})`);
  t.ok(counts.sock.ok > 0 && counts.tc.ok > 0, 'connections ran through the switch');
  t.comment(`connections during the switch: socket LB ${counts.sock.ok}, NodePort ${counts.tc.ok}; 0 failed`);
  t.notOk(existsSync(join(c.pinDir, 'migrating')), 'no migration pins left');
}

t.test('A -> B across a backend layout change, and back: 0 failed connections, held flows answered, the maps as before', async (t) => {
  const before = served(NORMAL);
  t.same(before[`${VIP}:80/TCP`], [`${REMOTE_POD}:8080 active`], 'A serves the manifest: the ClusterIP -> pod-b');
  t.equal(pinned(backendsMap.name).valueSize, 12);

  await t.test('A -> B (test layout)', async (t) => {
    await switchAgents(t, TEST_LAYOUT);
    t.equal(pinned(backendsMap.name).valueSize, 16, 'svcmap_be is pinned with the test layout (reserved_test)');
    t.same(served(TEST_LAYOUT), before, "B's maps hold what A's held: every frontend with its backends");
    const log = c.agent.lines.find((l) => l.msg === 'map migrated' && l.map === backendsMap.name);
    t.match(log, { why: 'layout version 1 -> the test layout', zeroed: ['value.reserved_test'], dropped: [] });
  });

  await t.test('B -> A (back)', async (t) => {
    await switchAgents(t, NORMAL);
    t.equal(pinned(backendsMap.name).valueSize, 12, 'svcmap_be is pinned with the layout of this build again');
    t.same(served(NORMAL), before, 'the maps hold what they held before');
    const log = c.agent.lines.find((l) => l.msg === 'map migrated' && l.map === backendsMap.name);
    t.match(log, { why: 'the test layout -> layout version 1', dropped: ['value.reserved_test'] });
  });
});

t.test('larger --max-backends and --max-conntrack resize the maps they size through the same path', async (t) => {
  const before = served(NORMAL);
  const was = pinned(backendsMap.name).maxEntries;
  const ctWas = pinned(ctMap.name).maxEntries;
  // The held NodePort flows live on their conntrack entries (with their SNAT ports): the new map must have them.
  await switchAgents(t, NORMAL, ['--max-backends', String(was * 2), '--max-conntrack', String(ctWas * 2)]);
  t.equal(pinned(backendsMap.name).maxEntries, was * 2, 'svcmap_be has the new capacity');
  t.equal(pinned(backendConnsMap.name).maxEntries, was * 2, 'so has svcmap_be_conns (--max-backends sizes both)');
  t.equal(pinned(ctMap.name).maxEntries, ctWas * 2, 'and svcmap_ct');
  const ct = c.agent.lines.find((l) => l.msg === 'map migrated' && l.map === ctMap.name);
  t.ok(Number(ct?.copied) >= 2, `the conntrack entries were copied (${ct?.copied})`);
  t.same(served(NORMAL), before, 'with every entry');
});

t.test('a migration that cannot fit stops before the switch: the old datapath keeps serving, the error names the flag', async (t) => {
  // Five more endpoints: six backends in all.
  const pods = ['10.244.2.20', '10.244.2.21', '10.244.2.22', '10.244.2.23', '10.244.2.24'];
  await c.writeManifest(
    'more.yaml',
    serviceYaml({
      name: 'more',
      clusterIP: '10.96.0.30',
      ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080 }],
      endpoints: pods.map((ip) => ({ ip, nodeName: 'node2' })),
    }),
  );
  const before = served(NORMAL);
  const capacity = pinned(backendsMap.name).maxEntries;
  await c.stopAgent();
  const agent = await c.startAgent(['--max-backends', '3'], NORMAL, false);
  const code = await agent.exited;
  t.not(code, 0, 'the agent stops');
  t.match(
    agent.stderr,
    /map svcmap_be(_conns)? holds \d+ entries, more than the 3 of its new map: set --max-backends \(chart value maxBackends\) to at least \d+/,
  );
  t.match(agent.stderr, /The old datapath keeps serving/);
  t.notOk(existsSync(join(c.pinDir, 'migrating')), 'its new maps are gone');
  t.equal(pinned(backendsMap.name).maxEntries, capacity, 'the old maps are in place');
  const r = await sockClient.tcpConnect({ ip: VIP, port: 80, count: 20, timeoutMs: 3000 });
  t.equal(r.failed, 0, 'socket LB connections still succeed');
  const n = await c.client.tcpConnect({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, count: 20, timeoutMs: 3000 });
  t.equal(n.failed, 0, 'NodePort connections too');
  t.same(served(NORMAL), before, 'the maps are as they were');
  await c.startAgent([], NORMAL); // for the teardown's agent
});
