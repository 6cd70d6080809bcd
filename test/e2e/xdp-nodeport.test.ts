// XDP in front of tc (--acceleration), where a user starts: dual-stack
// NodePort and LoadBalancer Services with their EndpointSlices in the
// agent's manifest directory, the agent on node1 with --acceleration native
// on its eth0 (a veth: driver mode), clients outside the cluster on the
// nodes' network (fixtures/tc-nodes.ts). Each family: a NodePort spread over
// a local and a remote backend (the remote one sees node1's address, the
// local one the client's), UDP replies from the NodePort, ETP=Local with the
// endpoint here and with none here, loadBalancerSourceRanges, 1,000
// connections without a failure; the packets were translated at XDP (its
// counters), not only at tc; a held connection survives an agent restart
// (the XDP link pinned, its program swapped in place). Then the devices
// followed at run time (a second NIC leaving the device list and coming
// back), and best-effort and native on a device whose driver refuses
// driver mode (node1's pod bridge).
// Every address lives in namespaces this test made.
import t, { type Test } from 'tap';
import { stringify } from 'yaml';
import { SVCMAP } from '../../lab/agent-process.ts';
import type { LabClient } from '../../lab/index.ts';
import { hostPort } from '../../lab/protocol.ts';
import { type ServiceSpec, serviceObject, sliceObject } from './fixtures/manifests.ts';
import {
  CLIENT_IP,
  LINK_IPS,
  NODE1_POD,
  NODE_IPS,
  REMOTE_NODEPORT,
  REMOTE_POD,
  REMOTE_UDP_NODEPORT,
  type RemoteNodePort,
  V6_IPS,
  addClient2,
  addNode1Pod,
  startRemoteNodePort,
  tcCounters,
} from './fixtures/tc-nodes.ts';
import { xdpPassObject } from './fixtures/xdp-pass.ts';

/**
 * What status says of a native device whose veth peer runs neither XDP nor
 * GRO (the topologies below but the first, which gives n1 an XDP program):
 * XDP decides, tc forwards (xdp-peer.test.ts).
 */
const LEFT_TO_TC = 'xdp native; forwarding left to tc: the peer takes no XDP frames';

/** The LoadBalancer IPs (in LB_NET): the clients route them to node1. */
const LB_IP = { 4: '192.168.210.20', 6: 'fd00:192:168:210::20' } as const;

const FAMILIES = [
  { family: 4, client: CLIENT_IP, node1: NODE_IPS.node1, podA: NODE1_POD.ip, podB: REMOTE_POD },
  { family: 6, client: V6_IPS.client, node1: V6_IPS.node1, podA: NODE1_POD.ip6, podB: V6_IPS.pod },
] as const;

const both = (name: string, n: number, spec: Partial<ServiceSpec>): ServiceSpec => ({
  name,
  clusterIP: `10.96.0.${n}`,
  clusterIP6: `fd00:10:96::${n}`,
  type: 'NodePort',
  externalTrafficPolicy: 'Cluster',
  ports: [{ name: 'tcp', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30000 + n }],
  endpoints: [],
  ...spec,
});
const POD_A = { ip: NODE1_POD.ip, nodeName: 'node1' };
const POD_A6 = { ip: NODE1_POD.ip6, nodeName: 'node1' };
const POD_B = { ip: REMOTE_POD, nodeName: 'node2' };
const POD_B6 = { ip: V6_IPS.pod, nodeName: 'node2' };
/** Both pods, Cluster policy. */
const MIXED = both('mixed', 82, { endpoints: [POD_A, POD_B], endpoints6: [POD_A6, POD_B6] });
/** Local policy, its endpoint on node1: served with the client's address kept. */
const LOCAL = both('local', 81, { externalTrafficPolicy: 'Local', endpoints: [POD_A], endpoints6: [POD_A6] });
/** Local policy, its endpoint on node2 only: node1 drops. */
const AWAY = both('away', 84, { externalTrafficPolicy: 'Local', endpoints: [POD_B], endpoints6: [POD_B6] });
/** A LoadBalancer whose ranges hold the first client only. */
const RANGED = both('ranged', 20, {
  type: 'LoadBalancer',
  endpoints: [POD_B],
  endpoints6: [POD_B6],
  extraSpec: { loadBalancerSourceRanges: [`${CLIENT_IP}/32`, `${V6_IPS.client}/128`] },
});

function yamlOf(spec: ServiceSpec): string {
  const svc =
    spec.type === 'LoadBalancer'
      ? {
          ...serviceObject(spec),
          status: {
            loadBalancer: {
              ingress: [
                { ip: LB_IP[4], ipMode: 'VIP' },
                { ip: LB_IP[6], ipMode: 'VIP' },
              ],
            },
          },
        }
      : serviceObject(spec);
  return [svc, sliceObject(spec), sliceObject(spec, 'v6abc', spec.endpoints6 ?? [], 'IPv6')].map((o) => stringify(o)).join('---\n');
}

/** node1's counters at hook xdp, by reason. */
async function xdpCounters(c: RemoteNodePort): Promise<Record<string, number>> {
  return tcCounters(c, 'xdp');
}

/** What `fn` added to node1's counter `reason` at `hook`. */
async function addedDuring(c: RemoteNodePort, hook: string, reason: string, fn: () => Promise<unknown>): Promise<number> {
  const before = (await tcCounters(c, hook))[reason] ?? 0;
  await fn();
  return ((await tcCounters(c, hook))[reason] ?? 0) - before;
}

/** svcmap status on node1, as JSON. */
async function status(c: RemoteNodePort): Promise<{ devices: Array<{ device: string; runs: string }>; programs: Array<{ link: string }> }> {
  // A guard, not a bound: a CLI start takes long on a loaded machine.
  return JSON.parse(await c.lab.exec(c.node1, SVCMAP, ['status', '-o', 'json', '--pin-dir', c.pinDir], { timeoutMs: 120_000 }));
}

/** svcmap_external_device_info's samples, sorted. */
const deviceInfo = (metrics: string) =>
  metrics
    .split('\n')
    .filter((l) => l.startsWith('svcmap_external_device_info{'))
    .sort();

/** The id of the XDP link pinned for a device, by bpftool (not by svcmap's own code). */
async function xdpLinkId(c: RemoteNodePort, device: string): Promise<number> {
  const link = JSON.parse(
    await c.lab.exec(c.node1, 'bpftool', ['-j', 'link', 'show', 'pinned', `${c.pinDir}/links/svcmap_xdp@${device}`]),
  ) as { id: number };
  return link.id;
}

let c: RemoteNodePort;
let client2: LabClient;

t.test('--acceleration native on a veth', async (t) => {
  t.before(async () => {
    c = await startRemoteNodePort(['--acceleration', 'native'], { ipv6: true });
    await addNode1Pod(c);
    const second = await addClient2(c); // outside the source ranges
    client2 = second.client;
    // Checksums complete, as from a NIC: a veth hands a local socket's partial one on, which XDP leaves to tc
    // (bpf/lib/xdp_lb.h). The clients' and node2's (the remote pod's replies) transmit checksumming off.
    for (const pod of [c.clientPod, second.pod]) await c.lab.exec(pod, 'ethtool', ['-K', pod.ifname, 'tx', 'off']);
    await c.lab.exec(c.node2, 'ethtool', ['-K', 'eth0', 'tx', 'off']);
    // The network side of node1's eth0 (a veth) takes the frames XDP redirects to it only while it runs XDP (or GRO: xdp-peer.test.ts), as a NIC's wire would.
    const from = c.agent.mark();
    await c.lab.ip(
      c.net,
      'link',
      'set',
      'dev',
      'n1',
      'xdpdrv',
      'obj',
      xdpPassObject((fn) => t.teardown(fn)),
      'program',
      'xdp_pass_a',
    );
    // The agent started before it: it left forwarding to tc until now, and follows.
    await c.agent.waitFor((l) => l.msg === 'XDP on eth0 forwards: the device takes XDP frames now', { from, what: 'XDP forwards' });
    for (const s of [MIXED, LOCAL, AWAY, RANGED]) await c.writeManifest(`${s.name}.yaml`, yamlOf(s));
  });
  t.teardown(() => c?.destroy());

  t.test('the agent says eth0 runs XDP in driver mode; svcmap status and explain --from say so too', async (t) => {
    const line = await c.agent.waitFor((l) => l.msg === 'XDP attached (native)', { what: 'XDP attached' });
    t.match(line, { device: 'eth0', mode: 'native' }, 'the log names the device and the mode');
    const s = await status(c);
    t.same(s.devices, [{ device: 'eth0', runs: 'xdp native' }]);
    t.same(deviceInfo(await c.metrics()), ['svcmap_external_device_info{device="eth0",runs="xdp native"} 1'], 'and the metrics');
    t.match(
      await c.lab.exec(c.node1, 'ip', ['-d', 'link', 'show', 'eth0']),
      /prog\/xdp id \d+/,
      'ip link shows a driver-mode XDP program (xdpgeneric would say prog/xdpgeneric)',
    );
    const explain = await c.lab.exec(c.node1, SVCMAP, [
      'explain',
      `${hostPort(NODE_IPS.node1, REMOTE_NODEPORT)}/TCP`,
      '--from',
      CLIENT_IP,
      '--pin-dir',
      c.pinDir,
    ]);
    t.match(explain, /^Hook: +eth0: XDP in native mode \(what XDP passes on: tc ingress\)$/m);
  });

  for (const f of FAMILIES) {
    const v = `IPv${f.family}`;

    t.test(`${v}: 1,000 connections through a NodePort with a local and a remote backend: 0 failures, translated at XDP`, async (t) => {
      const before = await xdpCounters(c);
      const r = await c.client.tcpConnect({ ip: f.node1, port: 30082, count: 1000, timeoutMs: 3000, concurrency: 8 });
      t.equal(r.failed, 0, JSON.stringify(r.errors));
      t.equal(r.ok, 1000);
      t.ok((r.byPod['pod-a'] ?? 0) > 300 && (r.byPod['pod-b'] ?? 0) > 300, `both backends used: ${JSON.stringify(r.byPod)}`);
      t.same([...r.seenFrom].sort(), [f.client, f.node1].sort(), 'the local backend saw the client, the remote one saw node1 (SNAT)');
      t.same(r.peerNames, [hostPort(f.node1, 30082)], 'the client talked to the NodePort throughout');
      const after = await xdpCounters(c);
      const added = (reason: string) => (after[reason] ?? 0) - (before[reason] ?? 0);
      const remote = r.byPod['pod-b'] ?? 0;
      // A remote backend's flow leaves by eth0 again (redirected): XDP translates it both ways. A local one's
      // way is the pod bridge, which takes no XDP frames: XDP passes it to tc.
      t.ok(added('translated') >= remote, `XDP translated at least the ${remote} remote flows' SYNs (${added('translated')})`);
      t.ok(added('reply_translated') >= remote, `and their replies, each SYN-ACK at least (${added('reply_translated')})`);
      t.ok(added('passed_to_tc') >= 1000 - remote, `the local flows passed to tc (${added('passed_to_tc')}): ${JSON.stringify(after)}`);
    });

    t.test(`${v}: UDP through a NodePort to a remote backend: the replies come from the NodePort`, async (t) => {
      const r = await c.client.udpSend({ ip: f.node1, port: REMOTE_UDP_NODEPORT, count: 30, connected: false, timeoutMs: 2000 });
      t.equal(r.ok, 30, JSON.stringify(r.errors));
      t.same(r.replySources, [hostPort(f.node1, REMOTE_UDP_NODEPORT)]);
      t.same(r.seenFrom, [f.node1], "the backend saw node1's address");
    });

    t.test(`${v}: externalTrafficPolicy Local: the endpoint here is reached with the client's address; none here: dropped`, async (t) => {
      const r = await c.client.tcpConnect({ ip: f.node1, port: 30081, count: 20, timeoutMs: 2000 });
      t.equal(r.ok, 20, JSON.stringify(r.errors));
      t.same(r.byPod, { 'pod-a': 20 });
      t.same(r.seenFrom, [f.client], "the client's address kept");
      const dropped = await c.client.tcpConnect({ ip: f.node1, port: 30084, count: 2, timeoutMs: 700 });
      t.equal(dropped.ok, 0, 'no endpoint on node1: no connection');
      t.same(Object.keys(dropped.errors), ['ETIMEDOUT']);
    });

    t.test(`${v}: loadBalancerSourceRanges: the client inside is answered, the one outside is dropped at XDP`, async (t) => {
      const r = await c.client.tcpConnect({ ip: LB_IP[f.family], port: 80, count: 20, timeoutMs: 2000, concurrency: 4 });
      t.equal(r.ok, 20, JSON.stringify(r.errors));
      t.same(r.byPod, { 'pod-b': 20 });
      const denied = await addedDuring(c, 'xdp', 'source_denied', async () => {
        const out = await client2.tcpConnect({ ip: LB_IP[f.family], port: 80, count: 3, timeoutMs: 700 });
        t.equal(out.ok, 0, 'outside the ranges: no connection');
        t.same(Object.keys(out.errors), ['ETIMEDOUT']);
      });
      t.ok(denied >= 3, `each SYN counted as source_denied at XDP (${denied})`);
    });
  }

  t.test('a held connection survives an agent restart: the XDP link stays, its program is swapped in place', async (t) => {
    const linkBefore = await xdpLinkId(c, 'eth0');
    const held = await c.client.udpStreamStart({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, intervalMs: 20, timeoutMs: 2000, tcp: true });
    await c.client.udpStreamReplies(held.stream!, 5);
    await c.stopAgent();
    await c.client.udpStreamReplies(held.stream!, 5); // answered while no agent runs
    await c.startAgent();
    await c.client.udpStreamReplies(held.stream!, 5);
    const stream = await c.client.udpStreamStop(held.stream!);
    t.same(stream.errors, {}, 'the held connection never failed');
    t.equal(stream.reconnects, 0, 'and never reconnected');
    t.same(Object.keys(stream.byPod), ['pod-b']);
    t.equal(await xdpLinkId(c, 'eth0'), linkBefore, 'the same XDP link');
    t.match(
      await c.agent.waitFor((l) => l.msg === 'XDP attached (native)', { what: 'XDP attached' }),
      { device: 'eth0' },
      'the new agent attached it again',
    );
    const r = await c.client.tcpConnect({ ip: NODE_IPS.node1, port: 30082, count: 100, timeoutMs: 3000, concurrency: 8 });
    t.equal(r.failed, 0, `after the restart: ${JSON.stringify(r.errors)}`);
  });

  t.test('svcmap cleanup takes XDP off eth0', async (t) => {
    await c.stopAgent();
    await c.lab.exec(c.node1, SVCMAP, ['cleanup', '--pin-dir', c.pinDir]);
    t.notMatch(await c.lab.exec(c.node1, 'ip', ['-d', 'link', 'show', 'eth0']), /prog\/xdp/, 'no XDP program on eth0');
  });
});

t.test('--acceleration native follows the devices: a device that stops being one loses XDP, one that comes back gets it', async (t) => {
  const d = await startRemoteNodePort(['--acceleration', 'native'], { twoNics: true, defaultDevices: true });
  t.teardown(() => d.destroy());
  const attached = async (from: number, device: string) =>
    d.agent.waitFor((l) => l.msg === 'XDP attached (native)' && l.device === device, { from, what: `XDP on ${device}` });
  await attached(0, 'eth0');
  await attached(0, 'eth1');
  t.same((await status(d)).devices, [
    { device: 'eth0', runs: LEFT_TO_TC },
    { device: 'eth1', runs: LEFT_TO_TC },
  ]);
  let from = d.agent.mark();
  await d.lab.ip(d.node1, 'route', 'del', '10.244.2.0/24'); // eth1's only route out of the node
  const detached = await d.agent.waitFor((l) => l.msg === 'XDP detached from a device no longer used', { from, what: 'eth1 detached' });
  t.equal(detached.device, 'eth1');
  t.notMatch(await d.lab.exec(d.node1, 'ip', ['-d', 'link', 'show', 'eth1']), /prog\/xdp/, 'no XDP program on eth1');
  t.same((await status(d)).devices, [{ device: 'eth0', runs: LEFT_TO_TC }]);
  from = d.agent.mark();
  await d.lab.route(d.node1, '10.244.2.0/24', LINK_IPS.node2);
  await attached(from, 'eth1');
  t.match(await d.lab.exec(d.node1, 'ip', ['-d', 'link', 'show', 'eth1']), /prog\/xdp id \d+/, 'XDP on eth1 again, driver mode');
  const r = await d.client.tcpConnect({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, count: 200, timeoutMs: 3000, concurrency: 8 });
  t.equal(r.failed, 0, JSON.stringify(r.errors));
  t.same(r.seenFrom, [LINK_IPS.node1]);
});

/** node1's pod bridge refuses driver mode (a bridge's driver has no XDP): the fallbacks. */
function bridgeTest(t: Test, acceleration: 'best-effort' | 'native'): void {
  t.test(`--acceleration ${acceleration} with a device whose driver refuses driver mode (a bridge)`, async (t) => {
    const d = await startRemoteNodePort(['--acceleration', acceleration, '--devices', 'eth0,br0']);
    t.teardown(() => d.destroy());
    const s = await status(d);
    const br0 = acceleration === 'best-effort' ? 'xdp generic' : 'tc only';
    t.same(
      s.devices,
      [
        { device: 'br0', runs: br0 },
        { device: 'eth0', runs: LEFT_TO_TC },
      ],
      `br0: ${br0}, eth0: driver mode`,
    );
    t.same(
      deviceInfo(await d.metrics()),
      [`svcmap_external_device_info{device="br0",runs="${br0}"} 1`, `svcmap_external_device_info{device="eth0",runs="${LEFT_TO_TC}"} 1`],
      'the metrics say the same',
    );
    if (acceleration === 'best-effort') {
      const warned = await d.agent.waitFor((l) => String(l.msg).startsWith('the driver refuses XDP in native mode'), {
        what: 'the warning',
      });
      t.match(warned, { device: 'br0' }, 'a warning names br0');
      t.match(await d.agent.waitFor((l) => l.msg === 'XDP attached (generic)', { what: 'XDP generic' }), {
        device: 'br0',
        mode: 'generic',
      });
    } else {
      const err = await d.agent.waitFor((l) => l.msg === 'XDP in driver mode refused; the devices named run tc only', {
        what: 'the error',
      });
      t.match(JSON.stringify(err), /--acceleration native: XDP in driver mode is refused on br0: attach XDP in native mode on br0/);
    }
    const r = await d.client.tcpConnect({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, count: 200, timeoutMs: 3000, concurrency: 8 });
    t.equal(r.failed, 0, `eth0 still translates: ${JSON.stringify(r.errors)}`);
    t.same(r.seenFrom, [NODE_IPS.node1]);
    if (acceleration === 'best-effort') {
      // A restart keeps br0's generic-mode link: its driver refused driver mode once, it is not asked again.
      const link = await xdpLinkId(d, 'br0');
      await d.stopAgent();
      await d.startAgent();
      await d.agent.waitFor((l) => l.msg === 'XDP attached (generic)' && l.device === 'br0', { what: 'XDP generic again' });
      t.equal(await xdpLinkId(d, 'br0'), link, 'after a restart: the same link on br0, its program swapped');
      t.notOk(
        d.agent.lines.some((l) => String(l.msg).startsWith('the driver refuses XDP in native mode')),
        'driver mode not tried again',
      );
    }
  });
}
bridgeTest(t, 'best-effort');
bridgeTest(t, 'native');
