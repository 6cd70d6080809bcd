// IP fragments through a NodePort, end to end: an outside client sends UDP
// datagrams larger than the path MTU (1500) to a NodePort whose only backend
// is on the other node, so its kernel sends each in fragments, and only the
// first carries the ports. node1's tc program translates the first with the
// flow (DNAT + SNAT) and the later ones by the datagram's IP id; the pod gets
// each datagram whole and answers it. Untranslated, the fragments would be
// reassembled by node1 itself, which has no socket on the NodePort, and no
// answer would come. Every address lives in namespaces this test made.
import t from 'tap';
import { NODE_IPS, REMOTE_UDP_NODEPORT, type RemoteNodePort, startRemoteNodePort, tcCounters } from './fixtures/tc-nodes.ts';

const COUNT = 20;
const BYTES = 4000; // three fragments at MTU 1500

let c: RemoteNodePort;
t.before(async () => {
  c = await startRemoteNodePort();
});
t.teardown(async () => {
  await c?.destroy();
});

/** In the client's namespace: COUNT datagrams of `bytes`, one at a time; how many were answered by the pod. */
async function bigDatagrams(bytes: number, timeoutMs: number): Promise<{ ok: number; pods: string[]; errors: string[] }> {
  const script = `
    const s = require('node:dgram').createSocket('udp4');
    let ok = 0, i = 0, timer;
    const pods = new Set(), errors = [];
    const next = () => {
      if (i === ${COUNT}) { console.log(JSON.stringify({ ok, pods: [...pods], errors })); process.exit(0); }
      const tag = 'dgram-' + (i++) + '-';
      const msg = Buffer.concat([Buffer.from(tag), Buffer.alloc(${bytes} - tag.length, 0x62)]);
      timer = setTimeout(() => { errors.push(tag + 'ETIMEDOUT'); next(); }, ${timeoutMs});
      s.once('message', (m) => { clearTimeout(timer); const r = JSON.parse(m); if (r.echo.startsWith(tag)) { ok++; pods.add(r.pod); } else errors.push(tag + 'mismatch'); next(); });
      s.send(msg, ${REMOTE_UDP_NODEPORT}, ${JSON.stringify(NODE_IPS.node1)});
    };
    s.on('error', (e) => { errors.push(String(e.code)); });
    next();`;
  const out = await c.lab.exec(c.clientPod, process.execPath, ['-e', script], { timeoutMs: COUNT * timeoutMs + 10_000 });
  return JSON.parse(out) as { ok: number; pods: string[]; errors: string[] };
}

t.test(`${COUNT} UDP datagrams of ${BYTES} bytes, in fragments, through a SNATed NodePort: all answered`, async (t) => {
  const before = await tcCounters(c, 'tc_ingress');
  // Not a timed assertion: the bound only turns a lost datagram into a failure.
  const r = await bigDatagrams(BYTES, 5000);
  t.equal(r.ok, COUNT, `every datagram reached the pod whole and was answered: ${JSON.stringify(r)}`);
  t.same(r.pods, ['pod-b']);
  const after = await tcCounters(c, 'tc_ingress');
  const delta = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
  t.ok(delta('translated') >= 3 * COUNT, `node1 translated every fragment (${delta('translated')} translated)`);
  t.equal(delta('fragment'), 0, 'no fragment was left untranslated');
});
