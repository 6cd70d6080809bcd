// A client port reused for a direct connection (BPF_PROG_TEST_RUN, both tc
// objects): a pod (veth) or an outside client (node device, a NodePort with
// a backend on this node: DNAT only) connects through a frontend, then, with
// the same source port, straight to the backend it was sent to. The earlier
// flow's reply entry names exactly that backend -> client tuple; left in
// place, it would turn the direct connection's replies into the frontend's,
// and the client would never see its SYN answered. The new SYN that svcmap
// leaves untranslated forgets the earlier flow, so the replies pass as sent.
import t from 'tap';
import { SVC_F_CLUSTERIP, SVC_F_NODEPORT, SVC_SCOPE_INT } from '../../src/maps/constants.ts';
import { TCP_ACK, TCP_SYN, buildIpv4, parseIpv4 } from './fixtures/packets.ts';
import { buildIpv6, parseIpv6 } from './fixtures/packets6.ts';
import { TcHarness } from './fixtures/tc-harness.ts';

const CASES = [
  {
    object: 'veth' as const,
    what: "a pod's ClusterIP flow, then the same port straight to the backend",
    scope: SVC_SCOPE_INT,
    flags: SVC_F_CLUSTERIP,
    v4: { client: '10.244.1.7', vip: '10.96.0.10', backend: '10.244.2.5' },
    v6: { client: 'fd00:244:1::7', vip: 'fd00:10:96::a', backend: 'fd00:244:2::5' },
    vport: 80,
  },
  {
    object: 'tc' as const,
    what: 'an outside NodePort flow to a local backend (DNAT only), then the same port straight to the backend',
    flags: SVC_F_NODEPORT,
    local: true,
    v4: { client: '203.0.113.7', vip: '198.51.100.1', backend: '10.244.1.5' },
    v6: { client: '2001:db8:c::7', vip: '2001:db8:1::1', backend: 'fd00:244:1::5' },
    vport: 30080,
  },
];

for (const c of CASES) {
  for (const family of [4, 6] as const) {
    t.test(`IPv${family}, ${c.object}: ${c.what}: its replies pass untouched`, async (t) => {
      const h = TcHarness.open({ ctMax: 64, program: c.object });
      t.teardown(() => h.close());
      const a = family === 4 ? c.v4 : c.v6;
      const spec = {
        addr: a.vip,
        port: c.vport,
        proto: 'tcp' as const,
        revNatId: 1,
        flags: c.flags,
        backends: [{ id: 1, addr: a.backend, port: 8080, ...(c.local ? { local: true } : {}) }],
        ...(c.scope !== undefined ? { scope: c.scope } : {}),
      };
      // A ClusterIP is written in both scopes, as the agent writes it.
      const specs = c.scope === undefined ? [spec] : [spec, { ...spec, scope: undefined }];
      if (family === 4) h.configure('198.51.100.1');
      else h.configure6('2001:db8:1::1');
      for (const s of specs) family === 4 ? h.addService(s) : h.addService6(s);
      const build = family === 4 ? buildIpv4 : buildIpv6;
      const parse = family === 4 ? parseIpv4 : parseIpv6;
      const tcp = (saddr: string, daddr: string, sport: number, dport: number, tcpFlags: number) =>
        build({ saddr, daddr, proto: 'tcp', sport, dport, tcpFlags });

      // The first flow, through the frontend: translated, its reply translated back.
      const first = parse(h.ingress(tcp(a.client, a.vip, 40000, c.vport, TCP_SYN)).packetOut);
      t.same([first.daddr, first.dport], [a.backend, 8080], 'the first SYN goes to the backend');
      const back = parse(h.egress(tcp(a.backend, a.client, 8080, 40000, TCP_SYN | TCP_ACK)).packetOut);
      t.same([back.saddr, back.sport], [a.vip, c.vport], "the first flow's reply comes from the frontend");

      // The same port, straight to the backend: untouched both ways.
      const direct = tcp(a.client, a.backend, 40000, 8080, TCP_SYN);
      t.ok(h.ingress(direct).packetOut.equals(direct), 'the direct SYN passes untouched');
      const answer = tcp(a.backend, a.client, 8080, 40000, TCP_SYN | TCP_ACK);
      t.ok(h.egress(answer).packetOut.equals(answer), "the direct connection's SYN-ACK passes untouched (not shown as the frontend's)");
    });
  }
}
