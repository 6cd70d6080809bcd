// Path MTU discovery through a NodePort, end to end: a router namespace
// between node2 and the backend pod has a smaller MTU (1200) towards the
// pod, so the first full-sized segments of a SNATed flow (client ->
// node1:NodePort -> node1:SNAT port -> pod, DF set as TCP sets it) meet an
// ICMP "fragmentation needed" from the router, addressed to node1's SNAT
// address and quoting the packet as node1 sent it. node1's tc program must
// translate it back (outer destination, quoted addresses and ports) for the
// client's kernel to lower its path MTU to node1 and resend smaller: then a
// large write completes (the pod reads all of it before it closes its
// side), and the client's route cache shows the router's MTU. Untranslated,
// node1's stack would get the error for a port it has no socket on and the
// client would resend the same large segments until its timeout (TCP MTU
// probing is off by default). An external client, node1 running the agent,
// every address in namespaces this test made.
//
// For both families on one dual-stack topology: over IPv6 the router sends
// an ICMPv6 "packet too big" (bpf/lib/icmp6.h translates it). The router's
// MTU is IPv6's minimum, 1280, which IPv4 takes too.
import t from 'tap';
import { NODE_IPS, REMOTE_NODEPORT, type RemoteNodePort, V6_IPS, startRemoteNodePort, tcCounters } from './fixtures/tc-nodes.ts';

const MTU = 1280;
const BYTES = 256 * 1024;

let c: RemoteNodePort;
t.before(async () => {
  c = await startRemoteNodePort([], { routerMtu: MTU, ipv6: true });
});
t.teardown(async () => {
  await c?.destroy();
});

/** The client's cached route to node1, as `ip route get` shows it (with "mtu N" once PMTU lowered it). */
const clientRoute = async (node1: string) => (await c.lab.ip(c.clientPod, 'route', 'get', node1)).replace(/\s+/g, ' ').trim();

/** In the client's namespace: connect to the NodePort, write `bytes` and close; resolves once the pod closed its side after reading it all. */
async function bigWrite(node1: string, bytes: number, timeoutMs: number): Promise<{ ok: boolean; code?: string; read?: number }> {
  const script = `
    const s = require('node:net').connect({ host: ${JSON.stringify(node1)}, port: ${REMOTE_NODEPORT} });
    let read = 0;
    const done = (o) => { console.log(JSON.stringify(o)); process.exit(0); };
    setTimeout(() => done({ ok: false, code: 'ETIMEDOUT' }), ${timeoutMs});
    s.on('connect', () => s.end(Buffer.alloc(${bytes}, 0x61)));
    s.on('data', (d) => { read += d.length; });
    s.on('end', () => done({ ok: true, read }));
    s.on('error', (e) => done({ ok: false, code: e.code }));`;
  return JSON.parse(await c.lab.exec(c.clientPod, process.execPath, ['-e', script], { timeoutMs: timeoutMs + 10_000 })) as {
    ok: boolean;
    code?: string;
  };
}

for (const [family, node1, error] of [
  [4, NODE_IPS.node1, '"fragmentation needed"'],
  [6, V6_IPS.node1, '"packet too big"'],
] as const) {
  t.test(`IPv${family}: a ${error} from a router behind node2 reaches the client translated: PMTU discovery works`, async (t) => {
    const before = await clientRoute(node1);
    t.notMatch(before, / mtu /, `no path MTU cached for node1 yet (${before})`);
    const c0 = await tcCounters(c, 'tc_ingress');
    // Not a timed assertion: the bound only turns a black hole into a failure.
    const r = await bigWrite(node1, BYTES, 30_000);
    t.ok(r.ok, `the ${BYTES}-byte write went through and the pod closed after reading it: ${JSON.stringify(r)}`);
    const c1 = await tcCounters(c, 'tc_ingress');
    const icmp = (c1.icmp_translated ?? 0) - (c0.icmp_translated ?? 0);
    t.ok(icmp >= 1, `node1 translated the router's ICMP error back (${icmp} icmp_translated)`);
    const after = await clientRoute(node1);
    t.match(after, new RegExp(` mtu ${MTU}( |$)`), `the client's route to node1 carries the router's MTU (${after})`);
  });
}
