// Load-balancing algorithms at the socket level, end to end, for each
// family (dual-stack Services, reached through their IPv4 and their IPv6
// VIPs): the real agent from manifests, its hooks on the test's own cgroup,
// real sockets from two client pods (two network namespaces) to the echo
// pods. rr: sequential connections rotate exactly through the 3 backends;
// sh: one client pod always reaches one backend (its netns cookie is
// hashed), whatever its source port; an algorithm svcmap does not know is
// the node's default (--lb-algorithm rr here), and the Service still works.
// (maglev: socket-maglev.test.ts.)
import t from 'tap';
import type { LabClient } from '../../lab/index.ts';
import { LB_ALG_RR, LB_ALG_SH } from '../../src/maps/constants.ts';
import { type Cluster, FAMILIES, POD_NAMES, dualStackEchoService, masterEntry, secondClient, startCluster } from './fixtures/cluster.ts';

const [RR, SH, NOT_YET] = [60, 61, 62];

let c: Cluster;
let client2: LabClient;
t.before(async () => {
  c = await startCluster(
    [
      dualStackEchoService('rr', RR, { annotations: { 'svcmap.io/lb-algorithm': 'rr' } }),
      dualStackEchoService('sh', SH, { annotations: { 'svcmap.io/lb-algorithm': 'sh' } }),
      dualStackEchoService('later', NOT_YET, { annotations: { 'svcmap.io/lb-algorithm': 'fastest' } }),
    ],
    { ipv6: true },
  );
  client2 = await secondClient(c, 'client2', '10.244.0.101', 'fd00:10:244::101');
  await c.startAgent(['--lb-algorithm', 'rr']);
});
t.teardown(async () => {
  await c?.destroy();
});

/** The pods `count` sequential connections (one at a time) reached, in order. */
async function sequence(client: LabClient, ip: string, count: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const r = await client.tcpConnect({ ip, port: 80, count: 1, timeoutMs: 2000, concurrency: 1 });
    const pods = Object.keys(r.byPod);
    if (r.ok !== 1 || pods.length !== 1) throw new Error(`connection ${i} to ${ip} failed: ${JSON.stringify(r)}`);
    out.push(pods[0]!);
  }
  return out;
}

const masterAlgorithm = (ip: string) => masterEntry(c, ip)?.algorithm;

for (const f of FAMILIES) {
  t.test(`IPv${f.family}: rr: sequential connections rotate exactly through the 3 backends`, async (t) => {
    t.equal(masterAlgorithm(f.vip(RR)), LB_ALG_RR, 'the master entry says rr');
    const got = await sequence(c.client, f.vip(RR), 12);
    const first = POD_NAMES.indexOf(got[0]!);
    t.ok(first >= 0, `the first reached a known pod (${got[0]})`);
    const slots = got.map((p) => POD_NAMES.indexOf(p));
    const step = (slots[1]! - slots[0]! + 3) % 3;
    t.not(step, 0, 'consecutive connections reach different pods');
    t.same(
      slots,
      slots.map((_, i) => (first + i * step) % 3),
      `a fixed cycle over all 3 pods: ${got.join(', ')}`,
    );
    // A second client shares the frontend's wheel: interleaved, still a rotation.
    const a = await sequence(client2, f.vip(RR), 1);
    const b = await sequence(c.client, f.vip(RR), 1);
    t.equal(POD_NAMES.indexOf(a[0]!), (first + 12 * step) % 3, 'the other client takes the next turn');
    t.equal(POD_NAMES.indexOf(b[0]!), (first + 13 * step) % 3, 'and this one the turn after');
  });

  t.test(`IPv${f.family}: sh: one client pod always reaches the same backend`, async (t) => {
    t.equal(masterAlgorithm(f.vip(SH)), LB_ALG_SH, 'the master entry says sh');
    const one = await c.client.tcpConnect({ ip: f.vip(SH), port: 80, count: 40, timeoutMs: 2000, concurrency: 4 });
    t.equal(one.ok, 40, '40 connections succeed');
    t.equal(Object.keys(one.byPod).length, 1, `client 1: one pod (${JSON.stringify(one.byPod)})`);
    const two = await client2.tcpConnect({ ip: f.vip(SH), port: 80, count: 40, timeoutMs: 2000, concurrency: 4 });
    t.equal(two.ok, 40, '40 connections succeed');
    t.equal(Object.keys(two.byPod).length, 1, `client 2: one pod (${JSON.stringify(two.byPod)}); it may or may not be client 1's`);
    const again = await c.client.tcpConnect({ ip: f.vip(SH), port: 80, count: 10, timeoutMs: 2000, concurrency: 1 });
    t.same(Object.keys(again.byPod), Object.keys(one.byPod), 'client 1 again: its pod');
  });

  t.test(`IPv${f.family}: an unknown algorithm: the node default (rr), and the Service works`, async (t) => {
    t.equal(masterAlgorithm(f.vip(NOT_YET)), LB_ALG_RR, 'the master entry has --lb-algorithm');
    const got = await sequence(c.client, f.vip(NOT_YET), 6);
    t.equal(new Set(got).size, 3, `6 sequential connections reach all 3 pods (${got.join(', ')})`);
  });
}
