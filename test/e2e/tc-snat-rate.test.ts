// SNAT at rate, end to end across namespaces: 20,000 short TCP connections
// from an outside client to a NodePort whose only backend is on the other
// node (externalTrafficPolicy Cluster: DNAT + SNAT to node1), far more than
// the 4536 SNAT ports, all succeed. The ports come back in the datapath: a
// closed flow's port goes to a new flow once the old one has been quiet for
// the hold in bpf/lib/nat.h, without waiting for the conntrack GC
// (which runs at its default interval here, and would free them only after
// the 10 s closing lifetime). No time is asserted. An external client, node1
// running the agent with its tc programs on eth0, the backend on node2;
// every address lives in namespaces this test made.
import t from 'tap';
import { NODE_IPS, REMOTE_NODEPORT, type RemoteNodePort, startRemoteNodePort, tcCounters } from './fixtures/tc-nodes.ts';

const COUNT = 20_000; // more than four times the 4536 SNAT ports

let c: RemoteNodePort;
t.before(async () => {
  c = await startRemoteNodePort();
});
t.teardown(async () => {
  await c?.destroy();
});

const ingressCounters = () => tcCounters(c, 'tc_ingress');

t.test(`${COUNT} short connections to a remote backend through a SNATed NodePort: 0 failures`, async (t) => {
  const before = await ingressCounters();
  const started = performance.now();
  const r = await c.client.tcpConnect({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, count: COUNT, timeoutMs: 15_000, concurrency: 32 });
  const seconds = (performance.now() - started) / 1000;
  t.equal(r.failed, 0, `0 failures: ${JSON.stringify(r.errors)}`);
  t.equal(r.ok, COUNT, `${COUNT} connections answered`);
  const after = await ingressCounters();
  const delta = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
  t.ok(
    delta('translated') + delta('to_stack_no_route') >= COUNT,
    `node1 translated the connections' packets (${delta('translated')} translated)`,
  );
  // Where ports came back only through the GC (10 s after a flow closed), the
  // 4536 ports ran out after as many connections and every new SYN was
  // dropped until the GC's next pass: thousands of drops. A SYN dropped for
  // want of a port is retransmitted by the client, so the count is checked
  // here, loosely (it depends on the client's rate, which is not asserted).
  t.ok(delta('snat_ports_exhausted') < COUNT / 100, `(almost) no SYN found every probed port taken: ${delta('snat_ports_exhausted')}`);
  t.comment(
    `${COUNT} connections in ${seconds.toFixed(1)} s (${Math.round(COUNT / seconds)}/s); snat_ports_exhausted: ${delta('snat_ports_exhausted')}`,
  );
});
