// Socket-LB bypass per Pod and per Namespace (svcmap.io/socket-lb: bypass),
// end to end: the real agent in the node's namespace with the socket LB for
// every pod (--socket-lb=all) and veth translation on; Pods and a Namespace
// from the file source. Each "pod" is a namespace on the node's bridge whose
// client runs in a cgroup laid out as the kubelet's cgroupfs driver lays a
// Pod's out below the hooks' cgroup (kubepods/<qos>/pod<UID>/<container>).
// What a sidecar sees is checked where it looks: a rule in the pod's own
// OUTPUT chain matching the ClusterIP (the match a mesh's iptables REDIRECT
// uses) counts the packets that leave the pod's sockets for the ClusterIP.
// With the socket LB they leave for a pod IP and the rule counts none; a
// bypassed pod's go out to the ClusterIP and are still answered by a
// backend (translated at its veth).
import t, { type Test } from 'tap';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { LogLine } from '../../lab/agent-process.ts';
import { hostPort } from '../../lab/protocol.ts';
import type { LabClient, LabPod } from '../../lab/index.ts';
import type { StatusReport } from '../../src/cli/status.ts';
import { SOCK_CFG_POD_BYPASS } from '../../src/maps/constants.ts';
import { DatapathMaps } from '../../src/maps/datapath-maps.ts';
import { type Cluster, FAMILIES, NODE_IP6, POD_NAMES, dualStackEchoService, startCluster } from './fixtures/cluster.ts';

const WEB = 40;
const BYPASSED = "the socket LB leaves this Pod's sockets to its veth";
const TRANSLATED_AGAIN = "the socket LB translates this Pod's sockets again";

interface TestPod {
  name: string;
  uid: string;
  ip: string;
  ip6: string;
  qos: string;
  ns?: LabPod;
  client?: LabClient;
}

const PODS: TestPod[] = [
  { name: 'meshed', uid: '6a1f2b3c-0000-4000-8000-00000000a001', ip: '10.244.0.120', ip6: 'fd00:10:244::120', qos: 'burstable' },
  { name: 'plain', uid: '6a1f2b3c-0000-4000-8000-00000000a002', ip: '10.244.0.121', ip6: 'fd00:10:244::121', qos: 'besteffort' },
];
const [MESHED, PLAIN] = PODS as [TestPod, TestPod];

let c: Cluster;
t.before(async () => {
  c = await startCluster([dualStackEchoService('web', WEB)], { ipv6: true });
  await c.lab.sysctl(c.node, 'net.ipv4.ip_forward', 1);
  await c.lab.sysctl(c.node, 'net.ipv6.conf.all.forwarding', 1);
  for (const p of PODS) {
    p.ns = await c.lab.pod(c.node, p.name, p.ip);
    await c.lab.ipv6(p.ns, p.ip6, { dev: p.ns.ifname, gateway: NODE_IP6 });
    // The kubelet's cgroupfs layout below the hooks' cgroup; the client is the Pod's container.
    const container = join(c.cgroup, 'kubepods', p.qos, `pod${p.uid}`, 'c0ffee');
    mkdirSync(container, { recursive: true });
    p.client = await c.lab.client(p.ns, { cgroup: container });
    for (const f of FAMILIES) {
      const tables = f.family === 4 ? 'iptables' : 'ip6tables';
      for (const proto of ['tcp', 'udp']) {
        await c.lab.exec(p.ns, tables, ['-w', '-A', 'OUTPUT', '-d', f.vip(WEB), '-p', proto, '-j', 'ACCEPT']);
      }
    }
  }
  await c.startAgent(['--veth-lb=true'], { inNode: true });
});
t.teardown(async () => {
  await c?.destroy();
});

function podYaml(p: TestPod, socketLb?: string): string {
  const annotations = socketLb === undefined ? '' : `\n  annotations:\n    svcmap.io/socket-lb: ${socketLb}`;
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${p.name}
  namespace: default
  uid: ${p.uid}${annotations}
spec:
  nodeName: node
  containers: [{ name: c }]
status:
  phase: Running
  podIPs: [{ ip: ${p.ip} }, { ip: ${p.ip6} }]
`;
}

function namespaceYaml(socketLb?: string): string {
  const annotations = socketLb === undefined ? '' : `\n  annotations:\n    svcmap.io/socket-lb: ${socketLb}`;
  return `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: default${annotations}\n`;
}

/** Writes a manifest and waits for the agent's log line about each Pod named (msg). */
async function change(file: string, text: string, msg: string, pods: readonly TestPod[]): Promise<void> {
  const from = c.agent.mark();
  await c.writeManifest(file, text);
  for (const p of pods) {
    await c.agent.waitFor((l: LogLine) => l.msg === msg && l.pod === `default/${p.name}`, {
      from,
      timeoutMs: 15000,
      what: `${msg}: ${p.name}`,
    });
  }
}

/** Packets the pod's own OUTPUT chain saw leave for the ClusterIP (family, protocol). */
async function toClusterIp(p: TestPod, family: 4 | 6, proto: 'tcp' | 'udp'): Promise<number> {
  const out = await c.lab.exec(p.ns!, family === 4 ? 'iptables' : 'ip6tables', ['-w', '-nvxL', 'OUTPUT']);
  const vip = FAMILIES[family === 4 ? 0 : 1].vip(WEB);
  // pkts bytes target prot opt in out source destination; prot by name or number.
  const names = proto === 'tcp' ? ['tcp', '6'] : ['udp', '17'];
  const row = out
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .find((f) => names.includes(f[3] ?? '') && f.includes(vip));
  if (!row) throw new Error(`no ${proto} rule for ${vip} in ${p.name}:\n${out}`);
  return Number(row[0]);
}

const status = (): StatusReport => JSON.parse(c.svcmap('status', '-o', 'json')) as StatusReport;

/** The hooks' flag that makes them look the calling task's cgroups up (svcmap_sockcfg). */
function podBypassFlag(): boolean {
  const maps = DatapathMaps.openPinned(c.pinDir);
  try {
    return ((maps.sockConfig!.get(0)?.flags ?? 0) & SOCK_CFG_POD_BYPASS) !== 0;
  } finally {
    maps.close();
  }
}

/** TCP and UDP from the pod to the ClusterIP, both families: answered by the backends; whether the pod's sockets left for the ClusterIP. */
async function check(t: Test, p: TestPod, bypassed: boolean): Promise<void> {
  for (const f of FAMILIES) {
    const tcpBefore = await toClusterIp(p, f.family, 'tcp');
    const udpBefore = await toClusterIp(p, f.family, 'udp');
    const r = await p.client!.tcpConnect({ ip: f.vip(WEB), port: 80, count: 30, timeoutMs: 3000, concurrency: 2 });
    t.equal(r.failed, 0, `${p.name} IPv${f.family} TCP answered (${JSON.stringify(r.errors)})`);
    t.ok(
      Object.keys(r.byPod).every((pod) => POD_NAMES.includes(pod)) && Object.keys(r.byPod).length > 1,
      `spread: ${JSON.stringify(r.byPod)}`,
    );
    const u = await p.client!.udpSend({ ip: f.vip(WEB), port: 53, count: 3, connected: false, timeoutMs: 3000 });
    t.equal(u.failed, 0, `${p.name} IPv${f.family} UDP answered (${JSON.stringify(u.errors)})`);
    t.same(u.replySources, [hostPort(f.vip(WEB), 53)], 'UDP replies come from the ClusterIP');
    const tcp = (await toClusterIp(p, f.family, 'tcp')) - tcpBefore;
    const udp = (await toClusterIp(p, f.family, 'udp')) - udpBefore;
    if (bypassed) {
      t.ok(tcp >= 30, `${p.name} IPv${f.family}: the TCP connections left the pod for the ClusterIP (${tcp} packets)`);
      t.ok(udp >= 3, `${p.name} IPv${f.family}: the datagrams left the pod for the ClusterIP (${udp})`);
    } else {
      t.equal(tcp, 0, `${p.name} IPv${f.family}: the socket LB sent TCP to a pod IP (none to the ClusterIP)`);
      t.equal(udp, 0, `${p.name} IPv${f.family}: the socket LB sent UDP to a pod IP`);
    }
  }
}

t.test(
  'a Pod annotated bypass: its sockets go out to the ClusterIP and are translated at its veth; the other Pod keeps the socket LB',
  async (t) => {
    await c.writeManifest('plain.yaml', podYaml(PLAIN));
    await change('meshed.yaml', podYaml(MESHED, 'bypass'), BYPASSED, [MESHED]);
    await check(t, MESHED, true);
    await check(t, PLAIN, false);
    const s = status();
    t.same(
      s.socketLbBypass?.map((b) => b.pod),
      ['default/meshed'],
      'svcmap status lists the bypassed Pod',
    );
    t.ok(podBypassFlag(), "the hooks' flag is on");
    const dumped = JSON.parse(c.svcmap('dump', '--map', 'svcmap_sock_byp', '-o', 'json')) as {
      entries: Array<{ key: string; value: { pod: string } }>;
    };
    t.same(
      dumped.entries.map((e) => e.value.pod),
      ['default/meshed'],
      'svcmap dump shows the map: the Pod under its cgroup id',
    );
    t.equal(dumped.entries[0]!.key, s.socketLbBypass![0]!.cgroupId, 'the id status shows');
    const bypassedCounter = s.counters.find((x) => x.hook === 'connect4' && x.reason === 'socket_lb_bypassed')?.packets ?? 0;
    t.ok(bypassedCounter >= 30, `connect4 counted the bypass (${bypassedCounter})`);
  },
);

t.test('across an agent restart the Pod keeps bypassing: while the agent is down, and after it has read the Pods again', async (t) => {
  c.agent.kill('SIGTERM');
  await c.agent.exited;
  t.ok(podBypassFlag(), "the hooks' flag stays on with the agent stopped");
  await check(t, MESHED, true);
  await c.startAgent(['--veth-lb=true'], { inNode: true });
  t.ok(podBypassFlag(), 'the new agent kept the flag of the pinned entries');
  t.same(
    status().socketLbBypass.map((b) => b.pod),
    ['default/meshed'],
  );
  await check(t, MESHED, true);
  await check(t, PLAIN, false);
});

t.test('the annotation removed: new sockets of the Pod get the socket LB again', async (t) => {
  await change('meshed.yaml', podYaml(MESHED), TRANSLATED_AGAIN, [MESHED]);
  await check(t, MESHED, false);
});

t.test('the Namespace annotated bypass: every Pod of it bypasses; a Pod saying on keeps the socket LB', async (t) => {
  await change('namespace.yaml', namespaceYaml('bypass'), BYPASSED, [MESHED, PLAIN]);
  await check(t, MESHED, true);
  await check(t, PLAIN, true);
  await change('plain.yaml', podYaml(PLAIN, 'on'), TRANSLATED_AGAIN, [PLAIN]);
  await check(t, PLAIN, false);
  await check(t, MESHED, true);
});

t.test('an unknown value: a warning naming the Pod and the field; the Namespace value applies', async (t) => {
  const from = c.agent.mark();
  await c.writeManifest('plain.yaml', podYaml(PLAIN, 'maybe'));
  const l = await c.agent.waitFor((l: LogLine) => l.name === 'plain' && String(l.msg).includes('"maybe" is not one of bypass, on'), {
    from,
    timeoutMs: 15000,
    what: 'the warning about plain',
  });
  t.equal(l.field, 'metadata.annotations[svcmap.io/socket-lb]');
  await c.agent.waitFor((l: LogLine) => l.msg === BYPASSED && l.pod === 'default/plain', {
    from,
    timeoutMs: 15000,
    what: 'plain bypassed',
  });
  await check(t, PLAIN, true);
});

t.test("a Pod whose cgroup is not there yet keeps the socket LB; once the kubelet's directory appears it bypasses", async (t) => {
  const late: TestPod = {
    name: 'late',
    uid: '6a1f2b3c-0000-4000-8000-00000000a003',
    ip: '10.244.0.122',
    ip6: 'fd00:10:244::122',
    qos: 'burstable',
  };
  const from = c.agent.mark();
  await c.writeManifest('late.yaml', podYaml(late, 'bypass'));
  await c.agent.waitFor((l: LogLine) => String(l.msg).startsWith("the Pod's cgroup is not there yet") && l.pod === 'default/late', {
    from,
    timeoutMs: 15000,
    what: 'the agent missing the cgroup of late',
  });
  t.notOk(
    status().socketLbBypass.some((b) => b.pod === 'default/late'),
    'not in the map',
  );
  late.ns = await c.lab.pod(c.node, late.name, late.ip);
  await c.lab.ipv6(late.ns, late.ip6, { dev: late.ns.ifname, gateway: NODE_IP6 });
  const container = join(c.cgroup, 'kubepods', late.qos, `pod${late.uid}`, 'c0ffee');
  mkdirSync(container, { recursive: true });
  late.client = await c.lab.client(late.ns, { cgroup: container });
  for (const f of FAMILIES) {
    for (const proto of ['tcp', 'udp']) {
      await c.lab.exec(late.ns, f.family === 4 ? 'iptables' : 'ip6tables', [
        '-w',
        '-A',
        'OUTPUT',
        '-d',
        f.vip(WEB),
        '-p',
        proto,
        '-j',
        'ACCEPT',
      ]);
    }
  }
  // No change to the Pod: the agent's own retry finds the directory.
  await c.agent.waitFor((l: LogLine) => l.msg === BYPASSED && l.pod === 'default/late', { from, timeoutMs: 60000, what: 'late bypassed' });
  await check(t, late, true);
  await c.removeManifest('late.yaml');
});

t.test('the Pods deleted: the map is empty and the flag off', async (t) => {
  const from = c.agent.mark();
  await c.removeManifest('meshed.yaml');
  await c.removeManifest('plain.yaml');
  for (const p of PODS) {
    await c.agent.waitFor((l: LogLine) => l.msg === TRANSLATED_AGAIN && l.pod === `default/${p.name}`, {
      from,
      timeoutMs: 15000,
      what: p.name,
    });
  }
  // plain's unknown value went with it.
  await c.agent.waitFor((l: LogLine) => l.msg === 'problems resolved' && l.object === 'Pod default/plain socket-lb', {
    from,
    timeoutMs: 15000,
    what: "plain's warning resolved",
  });
  t.same(status().socketLbBypass, []);
  t.notOk(podBypassFlag(), "the hooks' flag is off");
  await check(t, MESHED, false);
});
