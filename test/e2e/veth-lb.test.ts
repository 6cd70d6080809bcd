// Per-packet Service translation at the pods' veths, end to end: the real
// agent in the node's namespace with --socket-lb=host-only, so the client
// pod's sockets (in the hooks' cgroup) are left alone by the socket LB and
// its packets to a ClusterIP are DNATed at the host side of its veth, with
// the replies translated back there. Pods are namespaces on the node's
// bridge; Services come from the file source. Both families, TCP and UDP.
import t from 'tap';
import { closeSync, existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { type LogLine, SVCMAP } from '../../lab/agent-process.ts';
import { VETH_PIN_DIR_GONE } from '../../src/agent/datapath/veth-datapath.ts';
import { linkInfo, openPinned } from '../../src/bpf/link.ts';
import { linkPinDir } from '../../src/bpf/loader.ts';
import { hostPort } from '../../lab/protocol.ts';
import { DatapathMaps } from '../../src/maps/datapath-maps.ts';
import { IPPROTO_UDP } from '../../src/maps/constants.ts';
import type { StatusReport } from '../../src/cli/status.ts';
import {
  CLIENT_IP,
  CLIENT_IP6,
  type Cluster,
  FAMILIES,
  POD_IPS,
  POD_IPS6,
  POD_NAMES,
  dualStackEchoService,
  startCluster,
} from './fixtures/cluster.ts';

const WEB = 10;
const ONE = 20;
const SELF = 30;
const CLIENTS = { 4: CLIENT_IP, 6: CLIENT_IP6 } as const;

let c: Cluster;
t.before(async () => {
  c = await startCluster(
    [
      dualStackEchoService('web', WEB),
      dualStackEchoService('one', ONE),
      // pod-a alone: its own connections to it are hairpin flows.
      dualStackEchoService('self', SELF, { endpoints: [{ ip: POD_IPS[0]! }], endpoints6: [{ ip: POD_IPS6[0]! }] }),
    ],
    { ipv6: true },
  );
  // A node forwards its pods' traffic (the translated packets go on through the node's stack).
  await c.lab.sysctl(c.node, 'net.ipv4.ip_forward', 1);
  await c.lab.sysctl(c.node, 'net.ipv6.conf.all.forwarding', 1);
  await c.startAgent(['--socket-lb=host-only'], { inNode: true });
});
t.teardown(async () => {
  await c?.destroy();
});

/** The kinds of the BPF objects an agent's "datapath up" names (sock, tc, veth). */
const loadedObjects = (lines: readonly LogLine[]): Array<string | undefined> => {
  const up = lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('datapath up'));
  return ((up?.objects ?? []) as string[]).map((p) => /\/(\w+)-[0-9a-f]+\.o$/.exec(p)?.[1]);
};

const status = (): StatusReport => JSON.parse(c.svcmap('status', '-o', 'json')) as StatusReport;
const counter = (s: StatusReport, hook: string, reason: string) =>
  s.counters.find((x) => x.hook === hook && x.reason === reason)?.packets ?? 0;

t.test("status: host-only, programs on every pod's veth", async (t) => {
  const s = status();
  t.equal(s.socketLb, 'host-only');
  const want = [...c.pods, c.clientPod].map((p) => p.hostIfname).sort();
  t.same(s.veths, want, 'each pod veth has its programs');
  for (const dev of want) {
    t.ok(
      s.programs.some((p) => p.program === 'svcmap_veth_in' && p.attachedTo === `device ${dev}`),
      `svcmap_veth_in on ${dev}`,
    );
    t.ok(
      s.programs.some((p) => p.program === 'svcmap_veth_out' && p.attachedTo === `device ${dev}`),
      `svcmap_veth_out on ${dev}`,
    );
  }
});

for (const f of FAMILIES) {
  const client = CLIENTS[f.family];

  t.test(`IPv${f.family}: TCP to a ClusterIP is translated at the veth and spread over the backends`, async (t) => {
    const before = status();
    const connectHook = f.family === 4 ? 'connect4' : 'connect6';
    const r = await c.client.tcpConnect({ ip: f.vip(WEB), port: 80, count: 150, timeoutMs: 3000, concurrency: 4 });
    t.equal(r.failed, 0, `no failures (${JSON.stringify(r.errors)})`);
    for (const pod of POD_NAMES) t.ok((r.byPod[pod] ?? 0) >= 15, `${pod} got ${r.byPod[pod] ?? 0} of 150`);
    t.same(r.seenFrom, [client], 'backends see the client address (DNAT only)');
    t.same(r.peerNames, [hostPort(f.vip(WEB), 80)], 'the socket is connected to the ClusterIP');
    const after = status();
    t.ok(
      counter(after, 'veth_ingress', 'translated') - counter(before, 'veth_ingress', 'translated') >= 150,
      'the veth translated the connections',
    );
    t.ok(counter(after, 'veth_egress', 'reply_translated') > counter(before, 'veth_egress', 'reply_translated'), 'replies translated back');
    t.equal(counter(after, connectHook, 'translated'), counter(before, connectHook, 'translated'), 'the socket LB translated none');
  });

  t.test(`IPv${f.family}: UDP replies come from the ClusterIP; new flows spread over the backends`, async (t) => {
    const byPod: Record<string, number> = {};
    for (let i = 0; i < 30; i++) {
      // A new socket each time: a new flow (one flow keeps its backend, as with conntrack).
      const r = await c.client.udpSend({ ip: f.vip(WEB), port: 53, count: 2, connected: i % 2 === 0, timeoutMs: 3000 });
      t.equal(r.failed, 0, JSON.stringify(r.errors));
      t.same(r.replySources, [hostPort(f.vip(WEB), 53)], 'reply source is the ClusterIP');
      t.equal(Object.keys(r.byPod).length, 1, 'one flow, one backend');
      for (const [pod, n] of Object.entries(r.byPod)) byPod[pod] = (byPod[pod] ?? 0) + n;
    }
    t.equal(Object.keys(byPod).length, 3, `flows spread over the pods: ${JSON.stringify(byPod)}`);
  });

  t.test(`IPv${f.family}: traffic to a pod address passes the veth untouched`, async (t) => {
    const before = status();
    const r = await c.client.tcpConnect({ ip: f.pods[1]!, port: 8080, count: 5, timeoutMs: 3000 });
    t.equal(r.failed, 0, JSON.stringify(r.errors));
    t.same(Object.keys(r.byPod), [POD_NAMES[1]]);
    t.ok(counter(status(), 'veth_ingress', 'passed') > counter(before, 'veth_ingress', 'passed'), 'counted as passed');
  });
}

t.test('hairpin: a pod reaches a Service whose backend is itself, seen from the frontend address', async (t) => {
  const self = await c.lab.client(c.pods[0]!, { cgroup: c.cgroup });
  for (const f of FAMILIES) {
    const r = await self.tcpConnect({ ip: f.vip(SELF), port: 80, count: 20, timeoutMs: 3000 });
    t.equal(r.failed, 0, `IPv${f.family}: ${JSON.stringify(r.errors)}`);
    t.same(Object.keys(r.byPod), [POD_NAMES[0]], `IPv${f.family}: pod-a answered itself`);
    t.same(r.seenFrom, [f.vip(SELF)], `IPv${f.family}: it saw the frontend's address as the client`);
    t.same(r.peerNames, [hostPort(f.vip(SELF), 80)]);
    const u = await self.udpSend({ ip: f.vip(SELF), port: 53, count: 5, connected: false, timeoutMs: 3000 });
    t.equal(u.failed, 0, JSON.stringify(u.errors));
    t.same(u.replySources, [hostPort(f.vip(SELF), 53)], `IPv${f.family}: UDP replies from the frontend`);
  }
});

t.test('a pod that comes up after the agent gets the programs on its veth (rtnetlink)', async (t) => {
  const from = c.agent.mark();
  const pod = await c.lab.pod(c.node, 'late', '10.244.0.102');
  const client2 = await c.lab.client(pod, { cgroup: c.cgroup });
  const dev = pod.hostIfname;
  await c.agent.waitFor((l: LogLine) => l.msg === "pods' veths attached" && ((l.added as string[] | undefined) ?? []).includes(dev), {
    from,
    timeoutMs: 15000,
    what: `the agent's attach to ${dev}`,
  });
  const r = await client2.tcpConnect({ ip: FAMILIES[0].vip(WEB), port: 80, count: 30, timeoutMs: 3000 });
  t.equal(r.failed, 0, JSON.stringify(r.errors));
  t.same(r.seenFrom, ['10.244.0.102']);
  await client2.close();
  // The pod goes: its veth with it, and the agent removes the pins of its links.
  const gone = c.agent.mark();
  await c.lab.ip(c.node, 'link', 'del', dev);
  await c.agent.waitFor((l: LogLine) => l.msg === "pods' veths attached" && ((l.removed as string[] | undefined) ?? []).includes(dev), {
    from: gone,
    timeoutMs: 15000,
    what: `the agent's removal of ${dev}'s pins`,
  });
  t.notOk(status().veths.includes(dev), `${dev} no longer listed`);
});

t.test("a removed backend's UDP conntrack entries are deleted, the others' kept", async (t) => {
  const vip = FAMILIES[0].vip(ONE);
  for (let i = 0; i < 30; i++) {
    const r = await c.client.udpSend({ ip: vip, port: 53, count: 1, connected: true, timeoutMs: 3000 });
    t.equal(r.failed, 0, JSON.stringify(r.errors));
  }
  const flowsTo = () => {
    const maps = DatapathMaps.openPinned(c.pinDir);
    try {
      const byBackend: Record<string, number> = {};
      for (const [k, v] of maps.family(4)!.ct!.entries()) {
        if (k.proto !== IPPROTO_UDP || k.saddr !== CLIENT_IP || k.daddr !== vip) continue;
        byBackend[v.new_daddr] = (byBackend[v.new_daddr] ?? 0) + 1;
      }
      return byBackend;
    } finally {
      maps.close();
    }
  };
  const before = flowsTo();
  t.ok((before[POD_IPS[0]!] ?? 0) > 0 && (before[POD_IPS[1]!] ?? 0) > 0, `flows to pod-a and pod-b: ${JSON.stringify(before)}`);
  await c.writeService(dualStackEchoService('one', ONE, { endpoints: POD_IPS.slice(1).map((ip) => ({ ip })) }));
  const after = flowsTo();
  t.equal(after[POD_IPS[0]!] ?? 0, 0, "pod-a's flows are gone");
  t.equal(after[POD_IPS[1]!], before[POD_IPS[1]!], "pod-b's flows are kept");
  const r = await c.client.udpSend({ ip: vip, port: 53, count: 5, connected: true, timeoutMs: 3000 });
  t.equal(r.failed, 0);
  t.notOk(r.byPod[POD_NAMES[0]!], 'new flows avoid the removed backend');
});

/** The kernel's ids of the pinned veth links (tcx links on the pods' veths). */
function vethLinkIds(): number[] {
  const dir = linkPinDir(c.pinDir);
  return readdirSync(dir)
    .filter((n) => n.startsWith('svcmap_veth_'))
    .map((n) => {
      const fd = openPinned(join(dir, n))!;
      try {
        return linkInfo(fd).id;
      } finally {
        closeSync(fd);
      }
    });
}

t.test('with host-only the agent loads the veth programs', async (t) => {
  t.same(loadedObjects(c.agent.lines), ['sock', 'tc', 'veth']);
});

t.test(
  'an agent restarted without host-only over pinned veth links still loads the veth programs, and the pods keep reaching Services',
  async (t) => {
    c.agent.kill('SIGTERM');
    await c.agent.exited;
    await c.startAgent([], { inNode: true });
    t.same(loadedObjects(c.agent.lines), ['sock', 'tc', 'veth'], 'the veth object is loaded (its links are pinned)');
    const r = await c.client.tcpConnect({ ip: FAMILIES[0].vip(WEB), port: 80, count: 10, timeoutMs: 3000 });
    t.equal(r.failed, 0, JSON.stringify(r.errors));
  },
);

t.test('the veth programs outlive the agent; svcmap cleanup detaches them', async (t) => {
  c.agent.kill('SIGTERM');
  await c.agent.exited;
  const r = await c.client.tcpConnect({ ip: FAMILIES[0].vip(WEB), port: 80, count: 10, timeoutMs: 3000 });
  t.equal(r.failed, 0, 'with the agent stopped, the pinned datapath still translates');
  const ids = vethLinkIds();
  t.equal(ids.length, 2 * (c.pods.length + 1), 'two links per pod veth');
  await c.lab.exec(c.node, SVCMAP, ['cleanup', '--pin-dir', c.pinDir]);
  // The kernel's list of links (bpftool, by id): none of them is left.
  const left = JSON.parse(await c.lab.exec(c.node, 'bpftool', ['link', 'show', '-j'])) as Array<{ id: number }>;
  t.same(
    left.filter((l) => ids.includes(l.id)),
    [],
    'no veth link left in the kernel',
  );
});

t.test(
  "svcmap cleanup under a running agent, as the chart's uninstall runs it: a pod that comes up afterwards brings no pin back",
  async (t) => {
    await c.startAgent(['--socket-lb=host-only'], { inNode: true });
    await c.lab.exec(c.node, SVCMAP, ['cleanup', '--force', '--pin-dir', c.pinDir]);
    t.notOk(existsSync(c.pinDir), 'svcmap cleanup removed the pin directory');
    const from = c.agent.mark();
    const pod = await c.lab.pod(c.node, 'after-cleanup', '10.244.0.103');
    await c.agent.waitFor((l: LogLine) => l.msg === VETH_PIN_DIR_GONE && Number(l.devices) > 0, {
      from,
      timeoutMs: 15000,
      what: `the agent's refresh after ${pod.hostIfname} came up`,
    });
    t.notOk(existsSync(c.pinDir), 'the pin directory stays gone');
  },
);
