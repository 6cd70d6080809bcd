// make e2e-network's selection and its per-spec table (lab/cluster/e2e-network.ts):
// the skip list as e2e.test and conformance.ts apply it, and the merge of
// two runs' summary.json files; how the specs are split over e2e.test processes.

import { mkdtempSync, readFileSync, rmSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { type ConformanceSummary, SLEEPERS, parseListing, specWeight, splitSpecs } from '../../lab/cluster/conformance.ts';
import { mergeResults } from '../../lab/cluster/conformance-junit.ts';
import { mergeTable, NETWORK_FOCUS, NETWORK_SKIP, SKIPS, tableMarkdown, writeTable } from '../../lab/cluster/e2e-network.ts';

t.test('the skip list: each reason leaves out what it names and nothing a service proxy is judged by', async (t) => {
  const focus = new RegExp(NETWORK_FOCUS);
  const skip = new RegExp(NETWORK_SKIP);
  const out = [
    '[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv4]',
    '[sig-network] Networking should provider Internet connection for containers using DNS [Feature:Networking-DNS]',
    '[sig-network] LoadBalancers should be able to change the type and ports of a TCP service [Slow]',
    '[sig-network] Netpol NetworkPolicy between server and client should support a default-deny ingress policy [Feature:NetworkPolicy]',
    '[sig-network] Networking Granular Checks: Services should function for pod-Service: sctp [Feature:SCTPConnectivity]',
    '[sig-network] KubeProxy should set TCP CLOSE_WAIT timeout [Privileged]',
    '[sig-network] Networking should check kube-proxy urls',
    '[sig-network] Services should work after restarting kube-proxy [Disruptive]',
  ];
  const kept = [
    '[sig-network] Services should serve a basic endpoint from pods [Conformance]',
    '[sig-network] Conntrack should be able to preserve UDP traffic when initial unready endpoints get ready',
    '[sig-network] DNS should provide DNS for services [Conformance]',
    '[sig-network] HostPort validates that there is no conflict between pods with same hostPort but different hostIP and protocol [LinuxOnly] [Conformance]',
    '[sig-network] Services should be rejected when no endpoints exist',
  ];
  for (const n of out) t.ok(focus.test(n) && skip.test(n), `left out: ${n}`);
  for (const n of kept) t.ok(focus.test(n) && !skip.test(n), `run: ${n}`);
  t.ok(
    SKIPS.every((s) => s.why.length > 0),
    'every pattern has its reason',
  );
});

const summary = (proxy: 'svcmap' | 'kube-proxy', specs: ConformanceSummary['specs']): ConformanceSummary => ({
  proxy,
  focus: NETWORK_FOCUS,
  skip: NETWORK_SKIP,
  parallel: 4,
  startedAt: '2026-12-01T20:00:00.000Z',
  durations: { total: 600 },
  counts: {
    passed: specs.filter((s) => s.state === 'passed').length,
    failed: specs.filter((s) => s.state === 'failed').length,
    skipped: specs.filter((s) => s.state === 'skipped').length,
  },
  specs,
  suiteFailures: [],
  artifacts: '/x',
});

t.test("the table: one row per spec either run ran, each proxy's state, the failure text", async (t) => {
  const left = { name: 'C left out', state: 'skipped' as const, seconds: 0, reason: `left out by --skip '${NETWORK_SKIP}'` };
  const table = mergeTable({
    svcmap: summary('svcmap', [
      { name: 'A', state: 'passed', seconds: 1.5, reason: '' },
      { name: 'B', state: 'failed', seconds: 60, reason: 'timed out | waiting' },
      left,
    ]),
    'kube-proxy': summary('kube-proxy', [
      { name: 'B', state: 'passed', seconds: 3, reason: '' },
      { name: 'D', state: 'skipped', seconds: 0, reason: 'skipped - needs 3 nodes' },
      left,
    ]),
  });
  t.same(
    table.rows.map((r) => r.name),
    ['A', 'B', 'D'],
    'the spec --skip left out in both is no row',
  );
  t.equal(table.rows[0]!.results['kube-proxy'], undefined, 'A: no kube-proxy result');
  t.same(table.rows[1]!.results, {
    svcmap: { state: 'failed', seconds: 60, reason: 'timed out | waiting' },
    'kube-proxy': { state: 'passed', seconds: 3, reason: '' },
  });
  t.same(table.runs.svcmap?.counts, { passed: 1, failed: 1, skipped: 1 });
  const md = tableMarkdown(table);
  t.match(md, /^\| svcmap \| 1 \| 1 \| 1 \| 2026-12-01T20:00:00.000Z, 600 s \|$/m, 'the counts of each run');
  t.match(md, /^\| B \| \*\*FAIL\*\* \(60\.0\) \| pass \(3\.0\) \| svcmap: timed out \\\| waiting \|$/m, 'a row, its | escaped');
  t.match(md, /^\| A \| pass \(1\.5\) \| - \|  \|$/m, 'a run without the spec shows -');
});

t.test('writeTable reads whichever summaries exist', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'e2e-network-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, 'svcmap'));
  writeFileSync(
    join(root, 'svcmap', 'summary.json'),
    JSON.stringify(summary('svcmap', [{ name: 'A', state: 'passed', seconds: 1, reason: '' }])),
  );
  const { md, json } = writeTable(root);
  t.match(readFileSync(md, 'utf8'), /^\| A \| pass \(1\.0\) \| - \|  \|$/m);
  t.same(Object.keys((JSON.parse(readFileSync(json, 'utf8')) as { runs: object }).runs), ['svcmap']);
});

t.test('a listed name with a trailing blank (a label taken out) is the spec its JUnit report names: run, not "not run"', async (t) => {
  const listed = parseListing(
    [
      '  test/e2e/network/service.go:123: [sig-network] Services should be updated after adding or deleting ports ',
      '  test/e2e/network/proxy.go:45: [sig-network] Proxy version v1 should proxy logs on node using proxy subresource',
      'not a spec line',
    ].join('\n'),
  );
  t.same(
    listed.map((s) => s.name),
    [
      '[sig-network] Services should be updated after adding or deleting ports',
      '[sig-network] Proxy version v1 should proxy logs on node using proxy subresource',
    ],
  );
  const names = listed.map((s) => s.name);
  const cases = names.map((name) => ({ name, status: 'passed', seconds: 1, message: '', filteredOut: false }));
  const { specs } = mergeResults([{ shard: 1, assigned: names, cases }], names);
  t.same(
    specs.map((s) => [s.name, s.state]),
    names.map((n) => [n, 'passed']),
    'each counted once, as passed',
  );
});

t.test('the split: the sleeping affinity-timeout specs in a process of their own, the rest balanced by weight', async (t) => {
  const sleepers = [
    '[sig-network] Services should have session affinity timeout work for NodePort service [LinuxOnly]',
    '[sig-network] Services should have session affinity timeout work for service with type clusterIP [LinuxOnly]',
  ];
  const heavy = Array.from({ length: 4 }, (_, i) => `[sig-network] Networking Granular Checks: Services should function for case ${i}`);
  const light = Array.from({ length: 20 }, (_, i) => `[sig-network] Services should do thing ${i}`);
  const names = [...light, ...sleepers, ...heavy];
  const shards = splitSpecs(names, 4);
  t.equal(shards.length, 5, 'four shards and the sleepers');
  t.same(shards[4], sleepers, 'the last holds the sleepers, and only them');
  t.ok(sleepers.every((s) => SLEEPERS.test(s)) && !heavy.some((s) => SLEEPERS.test(s)), 'SLEEPERS names them');
  t.same(shards.flat().sort(), [...names].sort(), 'every spec in exactly one shard');
  t.same(
    shards.slice(0, 4).map((s) => s.filter((n) => heavy.includes(n)).length),
    [1, 1, 1, 1],
    'one granular check per shard',
  );
  const loads = shards.slice(0, 4).map((s) => s.reduce((n, x) => n + specWeight(x), 0));
  t.ok(Math.max(...loads) - Math.min(...loads) <= 1, `balanced loads (${loads.join(', ')})`);
  t.same(splitSpecs(sleepers, 4), [sleepers], 'only sleepers: one process');
  t.same(splitSpecs(light.slice(0, 2), 4).length, 2, 'no empty shards');
});
