// The conntrack GC in the real agent, end to end across namespaces: more
// short connections through a SNATed NodePort than there are SNAT ports
// (61000-65535: 4536) all succeed, and the GC removes every closed flow. An
// external client, node1 running the agent with its tc programs on eth0, the
// only backend on node2. Every address lives in namespaces this test made.
import t from 'tap';
import { parseSamples, sampleValue } from '../../bench/prom.ts';
import { NODE_IPS, REMOTE_NODEPORT, type RemoteNodePort, startRemoteNodePort } from './fixtures/tc-nodes.ts';

const ROUND = 2500; // two rounds: more connections than SNAT ports

let c: RemoteNodePort;
t.before(async () => {
  c = await startRemoteNodePort(['--ct-gc-interval', '1s']);
});
t.teardown(async () => {
  await c?.destroy();
});

/** The agent's conntrack metrics, read inside node1. */
async function ctMetrics(): Promise<{ entries: number; deleted: number }> {
  const samples = parseSamples(await c.metrics());
  const num = (name: string) => sampleValue(samples, name) ?? NaN;
  return { entries: num('svcmap_conntrack_entries'), deleted: num('svcmap_conntrack_gc_deleted_total') };
}

/**
 * Until the GC has left fewer than `below` entries (it runs every second
 * here) in a pass that deleted something after `deletedBefore`: the gauge
 * is set by each pass, so right after a round it may still show the count
 * of a pass made before the round's flows existed.
 */
async function untilEntriesBelow(below: number, timeoutMs: number, deletedBefore: number): Promise<{ entries: number; deleted: number }> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const m = await ctMetrics();
    if ((m.entries < below && m.deleted > deletedBefore) || Date.now() > until) return m;
    await new Promise((r) => setTimeout(r, 500));
  }
}

// A closed flow's port may also go to a new flow in the datapath before the
// GC sees it (after SNAT_CLOSED_HOLD_NS, bpf/lib/nat.h), which replaces the
// old flow's two entries: so the GC removes at most two entries per flow,
// and the map empties.
t.test(`${2 * ROUND} short connections through a SNATed NodePort (4536 SNAT ports): 0 failures`, async (t) => {
  const start = await ctMetrics();
  const first = await c.client.tcpConnect({ ip: NODE_IPS.node1, port: REMOTE_NODEPORT, count: ROUND, timeoutMs: 2000, concurrency: 8 });
  t.equal(first.failed, 0, `round 1 (FIN close): ${JSON.stringify(first.errors)}`);
  // Closed flows go 10 s after their last packet; the GC runs every second.
  const after1 = await untilEntriesBelow(50, 20_000, start.deleted);
  t.ok(after1.entries < 50, `the GC removed round 1's closed flows: ${after1.entries} entries left, ${after1.deleted} removed`);
  t.ok(after1.deleted > ROUND, `by deleting their entries (${after1.deleted})`);

  const second = await c.client.tcpConnect({
    ip: NODE_IPS.node1,
    port: REMOTE_NODEPORT,
    count: ROUND,
    timeoutMs: 2000,
    concurrency: 8,
    reset: true,
  });
  t.equal(second.failed, 0, `round 2 (RST close), on the ports round 1 gave back: ${JSON.stringify(second.errors)}`);
  const after2 = await untilEntriesBelow(50, 20_000, after1.deleted);
  t.ok(after2.deleted > after1.deleted + ROUND, `and round 2's after its RSTs (${after2.deleted} entries in all)`);
  t.ok(after2.entries < 50, `the map is (nearly) empty again: ${after2.entries} entries`);
});
