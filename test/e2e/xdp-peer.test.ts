// XDP forwards only by devices that take its frames, where a user starts:
// the remote NodePort Service in the agent's manifest directory, the agent on
// node1 with --acceleration native on its eth0, a veth whose peer (n1, on
// the nodes' network) has neither GRO nor an XDP program, as a kind node's
// host side has by default. The agent says so (log with the fix, svcmap
// status, the metric), and NodePort to the remote backend answers through tc
// (XDP passes the flows on: passed_to_tc, nothing translated at XDP). The
// peer's GRO turned on in the test's own namespace: the agent notices (the
// netdev family's announcement; rtnetlink says nothing in node1), and XDP
// translates and forwards the flows itself. Off again: back to tc, no
// connection lost. Every address lives in namespaces this test made.
import t from 'tap';
import { SVCMAP } from '../../lab/agent-process.ts';
import { NODE_IPS, REMOTE_NODEPORT, type RemoteNodePort, startRemoteNodePort, tcCounters } from './fixtures/tc-nodes.ts';

const LEFT = 'xdp native; forwarding left to tc: the peer takes no XDP frames';

let c: RemoteNodePort;

/** svcmap status on node1: the external devices. */
async function devices(): Promise<Array<{ device: string; runs: string }>> {
  // A guard, not a bound: a CLI start takes long on a loaded machine.
  const out = await c.lab.exec(c.node1, SVCMAP, ['status', '-o', 'json', '--pin-dir', c.pinDir], { timeoutMs: 120_000 });
  return (JSON.parse(out) as { devices: Array<{ device: string; runs: string }> }).devices;
}

const deviceInfo = async () => (await c.metrics()).split('\n').filter((l) => l.startsWith('svcmap_external_device_info{'));

/** count connections from the client to the NodePort: what they gave and what they added to node1's xdp counters. */
async function connect(count: number) {
  const before = await tcCounters(c, 'xdp');
  const r = await c.client.tcpConnect({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, count, timeoutMs: 3000, concurrency: 8 });
  const after = await tcCounters(c, 'xdp');
  const added = (reason: string) => (after[reason] ?? 0) - (before[reason] ?? 0);
  return { r, added, after };
}

const peerGro = (on: boolean) => c.lab.exec(c.net, 'ethtool', ['-K', 'n1', 'gro', on ? 'on' : 'off']);

t.test('--acceleration native on a veth whose peer takes no XDP frames', async (t) => {
  t.before(async () => {
    c = await startRemoteNodePort(['--acceleration', 'native']);
    // Checksums complete, as from a NIC: XDP leaves a local socket's partial one to tc (bpf/lib/xdp_lb.h).
    await c.lab.exec(c.clientPod, 'ethtool', ['-K', c.clientPod.ifname, 'tx', 'off']);
    await c.lab.exec(c.node2, 'ethtool', ['-K', 'eth0', 'tx', 'off']);
  });
  t.teardown(() => c?.destroy());

  t.test("the agent says eth0's forwarding is left to tc, and how to fix it", async (t) => {
    t.match(
      await c.lab.exec(c.net, 'ethtool', ['-k', 'n1']),
      /^generic-receive-offload: off$/m,
      "the peer's GRO is off (a veth's default)",
    );
    const line = await c.agent.waitFor((l) => l.msg === 'XDP on eth0: forwarding left to tc: the peer takes no XDP frames', {
      what: 'the warning',
    });
    t.equal(line.level, 40, 'a warning');
    t.match(line.fix, /ethtool -K <peer> gro on/, 'naming the fix');
    t.same(await devices(), [{ device: 'eth0', runs: LEFT }], 'svcmap status says it');
    t.same(await deviceInfo(), [`svcmap_external_device_info{device="eth0",runs="${LEFT}"} 1`], 'and the metric');
  });

  t.test('NodePort to the remote backend answers through tc: XDP passes the flows on', async (t) => {
    const { r, added, after } = await connect(100);
    t.equal(r.failed, 0, JSON.stringify(r.errors));
    t.same(r.seenFrom, [NODE_IPS.node1], "the backend saw node1's address (SNAT, by tc)");
    t.equal(added('translated'), 0, `nothing translated at XDP: ${JSON.stringify(after)}`);
    t.equal(added('reply_translated'), 0, 'no reply either');
    t.ok(added('passed_to_tc') >= 200, `each SYN and SYN-ACK passed to tc at least (${added('passed_to_tc')})`);
  });

  t.test("the peer's GRO on: the agent notices, and XDP forwards", async (t) => {
    const from = c.agent.mark();
    await peerGro(true);
    const line = await c.agent.waitFor((l) => l.msg === 'XDP on eth0 forwards: the device takes XDP frames now', {
      from,
      what: 'the change',
    });
    t.equal(line.device, 'eth0');
    t.same(await devices(), [{ device: 'eth0', runs: 'xdp native' }], 'svcmap status');
    t.same(await deviceInfo(), ['svcmap_external_device_info{device="eth0",runs="xdp native"} 1'], 'the metric');
    const { r, added, after } = await connect(200);
    t.equal(r.failed, 0, JSON.stringify(r.errors));
    t.same(r.seenFrom, [NODE_IPS.node1]);
    t.ok(added('translated') >= 200, `each SYN translated at XDP at least (${added('translated')}): ${JSON.stringify(after)}`);
    t.ok(added('reply_translated') >= 200, `and each SYN-ACK (${added('reply_translated')})`);
  });

  t.test('off again: back to tc, a held connection never fails', async (t) => {
    const held = await c.client.udpStreamStart({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, intervalMs: 20, timeoutMs: 2000, tcp: true });
    await c.client.udpStreamReplies(held.stream!, 5);
    const from = c.agent.mark();
    await peerGro(false);
    await c.agent.waitFor((l) => l.msg === 'XDP on eth0: forwarding left to tc: the peer takes no XDP frames', {
      from,
      what: 'the warning again',
    });
    await c.client.udpStreamReplies(held.stream!, 5);
    const stream = await c.client.udpStreamStop(held.stream!);
    t.same(stream.errors, {}, 'the held connection never failed');
    t.equal(stream.reconnects, 0);
    t.same(await devices(), [{ device: 'eth0', runs: LEFT }]);
    const { r, added } = await connect(100);
    t.equal(r.failed, 0, JSON.stringify(r.errors));
    t.equal(added('translated'), 0, 'nothing translated at XDP');
  });
});
