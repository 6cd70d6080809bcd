// svcmap_xdp with real sockets, on the tc tests' topology (fixtures/tc-nodes.ts:
// a client and two nodes on one L2 network, the agent with its tc programs on
// node1's eth0, the NodePort's only pod on node2), both families. The XDP
// program is loaded by this test on the agent's pinned maps and attached in
// driver mode to node1's eth0, listed in its svcmap_xdp_tx (the agent's
// --acceleration does this for a user; here the datapath is the subject),
// written from node1's namespace: a devmap takes the ifindex in the writer's.
// Every NodePort packet comes in on eth0 and leaves by it again, so XDP
// redirects what it translates back out of it; the network side of that
// veth runs an XDP program that passes everything, without which (or GRO) a
// veth takes no redirected frames (ctx_xdp.h, test/e2e/xdp-peer.test.ts).
//
// The checksums, as real sockets leave them:
//  - as sent: the client's and node2's veths checksum for the sender
//    (CHECKSUM_PARTIAL), and veth runs XDP on such an skb unresolved (its
//    L4 field holds only the pseudo-header's sum). XDP must leave those to
//    tc, which rewrites them right: every connection works, XDP counts them
//    passed_to_tc, tc translates;
//  - with transmit checksumming off on the client and on node2's eth0, the
//    checksums arrive complete, as from a NIC: XDP translates both ways
//    (translated, reply_translated) and every connection works, which the
//    pod's and the client's TCP would not allow with a wrong checksum.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { compileBpf } from '../../src/bpf/compile.ts';
import { BpfObject } from '../../src/bpf/object.ts';
import { NODE_IPS, REMOTE_NODEPORT, type RemoteNodePort, V6_IPS, startRemoteNodePort, tcCounters } from './fixtures/tc-nodes.ts';

const COUNT = 200;
/** XDP_PASS (2) for every frame; no headers needed. */
const PASS_C = `struct xdp_md;
__attribute__((section("xdp"), used)) int pass(struct xdp_md *ctx) { return 2; }
char _license[] __attribute__((section("license"), used)) = "GPL";
`;
const FAMILIES = [
  { family: 4, node1: NODE_IPS.node1 },
  { family: 6, node1: V6_IPS.node1 },
] as const;

let c: RemoteNodePort;
let attached = false;
t.before(async () => {
  c = await startRemoteNodePort([], { ipv6: true });
  // The XDP object on the agent's pins: the same conntrack, services, counters.
  const object = BpfObject.open(compileBpf({ program: 'xdp' }).path, c.pinDir);
  try {
    object.load();
    const eth0 = (JSON.parse(await c.lab.ip(c.node1, '-j', 'link', 'show', 'eth0')) as Array<{ ifindex: number }>)[0]!.ifindex;
    // Written from node1's namespace: a devmap resolves the ifindex in the writer's (as the agent's is, in the node's).
    const bytes = [0, 8, 16, 24].map((shift) => String((eth0 >> shift) & 0xff));
    const tx = String(object.map('svcmap_xdp_tx').info.id);
    await c.lab.exec(c.node1, 'bpftool', ['map', 'update', 'id', tx, 'key', ...bytes, 'value', ...bytes]);
    const fd = object.programFd('svcmap_xdp');
    const id = /prog_id:\s*(\d+)/.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1];
    if (!id) throw new Error('no prog_id in the program fd info');
    await c.lab.exec(c.node1, 'bpftool', ['net', 'attach', 'xdpdrv', 'id', id, 'dev', 'eth0']);
    attached = true;
  } finally {
    object.close(); // the device holds the program now
  }
  // The network side's XDP program: a fixture, compiled here.
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-xdp-pass-'));
  try {
    writeFileSync(join(dir, 'pass.c'), PASS_C);
    execFileSync('clang', ['-O2', '-g', '-target', 'bpf', '-c', join(dir, 'pass.c'), '-o', join(dir, 'pass.o')]);
    await c.lab.ip(c.net, 'link', 'set', 'dev', 'n1', 'xdpdrv', 'obj', join(dir, 'pass.o'), 'sec', 'xdp');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
t.teardown(async () => {
  if (attached) await c.lab.exec(c.node1, 'bpftool', ['net', 'detach', 'xdpdrv', 'dev', 'eth0']).catch(() => undefined);
  await c?.destroy();
});

/** What COUNT connections to the NodePort over `ip` moved at hooks xdp and tc_ingress; fails the test on any failed connection. */
async function connections(tt: Test, ip: string): Promise<{ xdp: Record<string, number>; tc: Record<string, number> }> {
  const before = { xdp: await tcCounters(c, 'xdp'), tc: await tcCounters(c, 'tc_ingress') };
  const r = await c.client.tcpConnect({ ip, port: REMOTE_NODEPORT, count: COUNT, timeoutMs: 3000, concurrency: 8 });
  tt.equal(r.failed, 0, `0 of ${COUNT} connections failed (${JSON.stringify(r.errors)})`);
  tt.equal(r.ok, COUNT);
  const after = { xdp: await tcCounters(c, 'xdp'), tc: await tcCounters(c, 'tc_ingress') };
  const delta = (a: Record<string, number>, b: Record<string, number>) =>
    Object.fromEntries(Object.entries(a).flatMap(([k, v]) => (v - (b[k] ?? 0) ? [[k, v - (b[k] ?? 0)]] : [])));
  return { xdp: delta(after.xdp, before.xdp), tc: delta(after.tc, before.tc) };
}

t.test('checksums as local sockets leave them (partial): XDP leaves the packets to tc, every connection works', async (t) => {
  for (const f of FAMILIES) {
    const moved = await connections(t, f.node1);
    t.ok((moved.xdp.passed_to_tc ?? 0) >= COUNT, `IPv${f.family}: XDP passed them to tc (${JSON.stringify(moved.xdp)})`);
    t.ok((moved.tc.translated ?? 0) >= COUNT, `IPv${f.family}: tc translated them (${JSON.stringify(moved.tc)})`);
  }
});

t.test('complete checksums (transmit checksumming off, as from a NIC): XDP translates both ways, every connection works', async (t) => {
  await c.lab.exec(c.clientPod, 'ethtool', ['-K', c.clientPod.ifname, 'tx', 'off']);
  await c.lab.exec(c.node2, 'ethtool', ['-K', 'eth0', 'tx', 'off']);
  for (const f of FAMILIES) {
    const moved = await connections(t, f.node1);
    t.ok((moved.xdp.translated ?? 0) >= COUNT, `IPv${f.family}: the clients' packets translated at XDP (${JSON.stringify(moved.xdp)})`);
    t.ok((moved.xdp.reply_translated ?? 0) >= COUNT, `IPv${f.family}: the pod's replies translated at XDP`);
    t.equal(moved.tc.translated ?? 0, 0, `IPv${f.family}: none left to tc to translate (${JSON.stringify(moved.tc)})`);
  }
});
