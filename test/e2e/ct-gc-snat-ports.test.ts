// The conntrack GC in the real agent, end to end across namespaces: more
// short connections through a SNATed NodePort than there are SNAT ports
// (61000-65535: 4536) all succeed, and the GC removes every closed flow. An
// external client, node1 running the agent with its tc programs on eth0, the
// only backend on node2. Every address lives in namespaces this test made.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { stringify } from 'yaml';
import { AgentProcess, assertBuilt } from '../../lab/agent-process.ts';
import { Lab, type LabClient, type LabNode, registerTeardown, unregisterTeardown } from '../../lab/index.ts';
import { cleanupPins } from '../../src/cli/cleanup.ts';
import { ensureBpffs, labPinDir, sweepStalePins } from '../../lab/pins.ts';
import { type ServiceSpec, serviceObject, sliceObject } from './fixtures/manifests.ts';

const CLIENT_IP = '192.168.100.100';
const NODE_IPS = { node1: '192.168.100.11', node2: '192.168.100.12' } as const;
const POD = '10.244.2.10'; // on node2
const ROUND = 2500; // two rounds: more connections than SNAT ports

const svc: ServiceSpec = {
  name: 'remote', clusterIP: '10.96.0.10', type: 'NodePort', externalTrafficPolicy: 'Cluster',
  ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30080 }],
  endpoints: [{ ip: POD, nodeName: 'node2' }],
};

let lab: Lab;
let client: LabClient;
let node1: LabNode;
let agent: AgentProcess | undefined;
let pinDir = '';
let manifests = '';
let metricsPort = 0;
const emergency = {
  emergency() {
    agent?.kill('SIGKILL');
    if (pinDir) {
      try { cleanupPins(pinDir); } catch { /* best effort */ }
    }
    if (manifests) rmSync(manifests, { recursive: true, force: true });
  },
};

t.before(async () => {
  assertBuilt();
  ensureBpffs();
  sweepStalePins();
  lab = await Lab.create();
  registerTeardown(emergency);
  const net = await lab.node('net', { cidr: '192.168.100.0/24' });
  const clientPod = await lab.pod(net, 'client', `${CLIENT_IP}/24`);
  const makeNode = async (name: 'node1' | 'node2', cidr: string, uplink: string) => {
    const node = await lab.node(name, { cidr, forward: true });
    const link = await lab.link(node, net, `${NODE_IPS[name]}/24`, `192.168.100.${name === 'node1' ? 251 : 252}/24`, { names: ['eth0', uplink] });
    await lab.ip(net, 'addr', 'flush', 'dev', link.b.ifname);
    await lab.ip(net, 'link', 'set', link.b.ifname, 'master', 'br0');
    return node;
  };
  node1 = await makeNode('node1', '10.244.1.0/24', 'n1');
  const node2 = await makeNode('node2', '10.244.2.0/24', 'n2');
  await lab.route(node1, '10.244.2.0/24', NODE_IPS.node2);
  await lab.route(node2, '10.244.1.0/24', NODE_IPS.node1);
  await lab.echoServer(await lab.pod(node2, 'pod-b', POD), { tcpPorts: [8080] });
  client = await lab.client(clientPod);

  manifests = mkdtempSync(join(tmpdir(), `svcmap-ctgc-${lab.id}-`));
  const docs: unknown[] = [serviceObject(svc), sliceObject(svc)];
  for (const [name, ip] of Object.entries(NODE_IPS)) {
    docs.push({ apiVersion: 'v1', kind: 'Node', metadata: { name }, status: { addresses: [{ type: 'InternalIP', address: ip }] } });
  }
  writeFileSync(join(manifests, 'all.yaml'), docs.map((d) => stringify(d)).join('---\n'));
  pinDir = labPinDir(lab.id, 'node1');
  const cgroup = await lab.cgroup('node1'); // the socket hooks need a cgroup; nothing runs in it
  agent = new AgentProcess([
    '--manifests', manifests, '--cgroup', cgroup, '--pin-dir', pinDir, '--node-name', 'node1', '--devices', 'eth0',
    '--metrics-port', '0', '--health-port', '0', '--ct-gc-interval', '1s',
  ], (cmd, args) => lab.spawn(node1, cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  await agent.waitFor((l) => l.msg === 'tc datapath attached', { timeoutMs: 30000, what: 'tc datapath attached' });
  await agent.waitForSync(0, 30000);
  const serving = await agent.waitFor((l) => l.msg === 'serving metrics and health', { timeoutMs: 5000, what: 'metrics port' });
  metricsPort = Number(serving.metricsPort);
});

t.teardown(async () => {
  try {
    if (agent) {
      agent.kill('SIGTERM');
      await Promise.race([agent.exited, new Promise((r) => setTimeout(r, 3000))]);
      agent.kill('SIGKILL');
    }
    if (pinDir) cleanupPins(pinDir);
  } finally {
    if (manifests) rmSync(manifests, { recursive: true, force: true });
    unregisterTeardown(emergency);
    await lab?.destroy();
  }
});

/** The agent's conntrack metrics, read inside node1. */
async function ctMetrics(): Promise<{ entries: number; deleted: number }> {
  const text = await lab.exec(node1, process.execPath, ['-e',
    `fetch('http://127.0.0.1:${metricsPort}/metrics').then(async (r) => console.log(await r.text()))`]);
  const num = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { entries: num('svcmap_conntrack_entries'), deleted: num('svcmap_conntrack_gc_deleted_total') };
}

/** Until the GC has left fewer than `below` entries (it runs every second here). */
async function untilEntriesBelow(below: number, timeoutMs: number): Promise<{ entries: number; deleted: number }> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const m = await ctMetrics();
    if (m.entries < below || Date.now() > until) return m;
    await new Promise((r) => setTimeout(r, 500));
  }
}

// A closed flow's port may also go to a new flow in the datapath before the
// GC sees it (after SNAT_CLOSED_HOLD_NS, bpf/lib/nat.h), which replaces the
// old flow's two entries: so the GC removes at most two entries per flow,
// and the map empties.
t.test(`${2 * ROUND} short connections through a SNATed NodePort (4536 SNAT ports): 0 failures`, async (t) => {
  const first = await client.tcpConnect({ ip: NODE_IPS.node1, port: 30080, count: ROUND, timeoutMs: 2000, concurrency: 8 });
  t.equal(first.failed, 0, `round 1 (FIN close): ${JSON.stringify(first.errors)}`);
  // Closed flows go 10 s after their last packet; the GC runs every second.
  const after1 = await untilEntriesBelow(50, 20_000);
  t.ok(after1.entries < 50, `the GC removed round 1's closed flows: ${after1.entries} entries left, ${after1.deleted} removed`);
  t.ok(after1.deleted > ROUND, `by deleting their entries (${after1.deleted})`);

  const second = await client.tcpConnect({ ip: NODE_IPS.node1, port: 30080, count: ROUND, timeoutMs: 2000, concurrency: 8, reset: true });
  t.equal(second.failed, 0, `round 2 (RST close), on the ports round 1 gave back: ${JSON.stringify(second.errors)}`);
  const after2 = await untilEntriesBelow(50, 20_000);
  t.ok(after2.deleted > after1.deleted + ROUND, `and round 2's after its RSTs (${after2.deleted} entries in all)`);
  t.ok(after2.entries < 50, `the map is (nearly) empty again: ${after2.entries} entries`);
});
