// "Unreachable" through a NodePort, end to end, for each family: an outside
// client sends to NodePorts whose pod has nothing listening on the target
// port. The pod's kernel answers UDP with an ICMP port unreachable (ICMPv6
// for IPv6) and TCP with a reset; node1's tc programs (the real agent from
// manifests, fixtures/tc-nodes.ts) must translate them back for the client to
// see what it would see talking to the pod directly: ECONNREFUSED. Two
// paths: the pod on node2 (DNAT + SNAT: the error comes back to node1's SNAT
// address, translated at ingress) and the pod on node1 (DNAT only: the error
// leaves by eth0, translated at egress). Untranslated, the ICMP error would
// reach node1's own stack (or the client from the pod's address, quoting a
// packet the client never sent) and the client would wait for an answer
// that never comes. Every address lives in namespaces this test made.
import t from 'tap';
import { type ServiceSpec, serviceYaml } from './fixtures/manifests.ts';
import {
  NODE_IPS,
  REMOTE_POD,
  type RemoteNodePort,
  V6_IPS,
  addNode1Pod,
  NODE1_POD,
  startRemoteNodePort,
  tcCounters,
} from './fixtures/tc-nodes.ts';

const { ip: POD_A, ip6: POD_A6 } = NODE1_POD; // on node1
const CLOSED = 5999; // no socket on it in any pod

/** A dual-stack NodePort Service, TCP and UDP, to CLOSED on one pod. */
const closed = (name: string, n: number, ip: string, ip6: string, nodeName: string): ServiceSpec => ({
  name,
  clusterIP: `10.96.0.${n}`,
  clusterIP6: `fd00:10:96::${n}`,
  type: 'NodePort',
  externalTrafficPolicy: 'Cluster',
  ports: [
    { name: 'tcp', protocol: 'TCP', port: 80, targetPort: CLOSED, nodePort: 30100 + n },
    { name: 'udp', protocol: 'UDP', port: 53, targetPort: CLOSED, nodePort: 30100 + n },
  ],
  endpoints: [{ ip, nodeName }],
  endpoints6: [{ ip: ip6, nodeName }],
});
const PATHS = [
  // The hook that translates the error: ingress for an error to the SNAT address, egress for one leaving by eth0.
  { what: 'the pod on node2 (DNAT + SNAT)', svc: closed('closed-remote', 71, REMOTE_POD, V6_IPS.pod, 'node2'), hook: 'tc_ingress' },
  { what: 'the pod on node1 (DNAT only)', svc: closed('closed-local', 72, POD_A, POD_A6, 'node1'), hook: 'tc_egress' },
];

let c: RemoteNodePort;
t.before(async () => {
  c = await startRemoteNodePort([], { ipv6: true });
  await addNode1Pod(c);
  for (const p of PATHS) await c.writeManifest(`${p.svc.name}.yaml`, serviceYaml(p.svc));
});
t.teardown(async () => {
  await c?.destroy();
});

for (const [family, node1] of [
  [4, NODE_IPS.node1],
  [6, V6_IPS.node1],
] as const) {
  for (const p of PATHS) {
    const port = p.svc.ports[0]!.nodePort!;
    t.test(`IPv${family}: nothing listening on ${p.what}: the client gets ECONNREFUSED, for UDP and TCP`, async (t) => {
      const before = (await tcCounters(c, p.hook)).icmp_translated ?? 0;
      const udp = await c.client.udpSend({ ip: node1, port, count: 3, connected: true, timeoutMs: 3000 });
      t.equal(udp.ok, 0, 'no datagram is answered');
      t.same(
        Object.keys(udp.errors),
        ['ECONNREFUSED'],
        `the port unreachable reached the connected UDP socket: ${JSON.stringify(udp.errors)}`,
      );
      const after = (await tcCounters(c, p.hook)).icmp_translated ?? 0;
      t.ok(after > before, `counted as icmp_translated at ${p.hook} (${before} -> ${after})`);
      const tcp = await c.client.tcpConnect({ ip: node1, port, count: 3, timeoutMs: 3000 });
      t.same(Object.keys(tcp.errors), ['ECONNREFUSED'], `the pod's reset reached the client: ${JSON.stringify(tcp.errors)}`);
    });
  }
}
