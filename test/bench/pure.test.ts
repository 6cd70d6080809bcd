// The bench's pure parts: kube-proxy's chain names, the rule generators, the
// histogram quantiles, the time budget's predictions.
import t from 'tap';
import { diffHistogram, histogramQuantile, parseHistogram } from '../../bench/agent.ts';
import { agentTargets } from '../../bench/agent-targets.ts';
import { Budget } from '../../bench/budget.ts';
import { peakGrowthPct, quarterPeaks } from '../../bench/churn.ts';
import { iptablesFull, iptablesPartial, probability, staleSepChains } from '../../bench/iptables.ts';
import { base32, iptSepChain, iptSvcChain, nftEpChain, nftSvcChain } from '../../bench/kubehash.ts';
import { nftDelta, nftFull } from '../../bench/nftables.ts';
import { pairedMedianRatio } from '../../bench/stats.ts';
import type { LineFile } from '../../bench/textfile.ts';
import { makeServices, makeServices6, vipOf, withChangedEndpoint } from '../../bench/workload.ts';
import { canonicalIpv6 } from '../../src/util/ipv6.ts';

function lines(gen: (o: LineFile) => void): string[] {
  const out: string[] = [];
  gen({ line: (s: string) => out.push(s) } as unknown as LineFile);
  return out;
}

t.test("chain names are kube-proxy's (values from its own unit tests)", async (t) => {
  t.equal(base32(Buffer.from('foobar')), 'MZXW6YTBOI');
  t.equal(iptSvcChain('ns1/svc1:p80', 'tcp'), 'KUBE-SVC-XPGD46QRK7WJZT7O');
  t.equal(iptSepChain('ns1/svc1:p80', 'tcp', '10.180.0.1:80'), 'KUBE-SEP-SXIVWICOYRO3J4NJ');
  t.equal(nftSvcChain('ns1', 'svc1', 'tcp', 'p80'), 'service-ULMVA6XW-ns1/svc1/tcp/p80');
  t.equal(nftEpChain('ns1', 'svc1', 'tcp', 'p80', '10.180.0.1', 80), 'endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80');
});

t.test('iptables: the probability cascade and the last service', async (t) => {
  t.same([4, 3, 2].map(probability), ['0.2500000000', '0.3333333333', '0.5000000000']);
  const svcs = makeServices(3, 4, ['10.244.0.11', '10.244.0.12', '10.244.0.13', '10.244.0.14']);
  t.equal(svcs[2]!.vip, vipOf(2));
  const rules = lines((o) => iptablesFull(o, svcs));
  t.equal(rules.filter((l) => l.startsWith('-A KUBE-SERVICES') && l.includes('--dport 80')).length, 3);
  const svc = rules.filter((l) => l.startsWith(`-A ${iptSvcChain('bench/svc-2:http', 'tcp')}`));
  t.equal(svc.length, 5, 'masquerade rule + 4 endpoint jumps');
  t.match(svc[1]!, /--probability 0\.2500000000 -j KUBE-SEP-/);
  t.notMatch(svc[4]!, /statistic/, 'the last endpoint takes the rest');
  t.ok(rules.some((l) => l.includes('-j DNAT --to-destination 10.244.0.14:8080')));
  t.equal(rules.at(-1), 'COMMIT');
  t.ok(
    rules.some((l) => l.includes('-m comment --comment "bench/svc-0:http -> ')),
    'comments below 1000 endpoints',
  );
  t.notOk(
    lines((o) => iptablesFull(o, makeServices(300, 4))).some((l) => l.includes(' -> ')),
    'large-cluster mode drops them',
  );

  const next = withChangedEndpoint(svcs[1]!, 7);
  const stale = staleSepChains(svcs[1]!, next);
  t.equal(stale.length, 1);
  const changed = [svcs[0]!, next, svcs[2]!];
  const partial = lines((o) => iptablesPartial(o, changed, new Set([1]), stale));
  t.ok(partial.includes(`-X ${stale[0]}`), 'the stale KUBE-SEP is deleted');
  t.equal(partial.filter((l) => l.startsWith('-A KUBE-SERVICES') && l.includes('--dport 80')).length, 3, 'KUBE-SERVICES in full');
  t.notOk(
    partial.some((l) => l.startsWith(`-A ${iptSvcChain('bench/svc-0:http', 'tcp')}`)),
    'unchanged service chains are not rewritten',
  );
});

t.test('nftables: verdict map, numgen, delta', async (t) => {
  const svcs = makeServices(2, 3);
  const full = lines((o) => nftFull(o, svcs));
  t.ok(full.includes('add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips'));
  t.ok(full.some((l) => /numgen random mod 3 vmap \{ 0 : goto endpoint-\S+ , 1 : goto endpoint-\S+ , 2 : goto endpoint-\S+ \}$/.test(l)));
  t.ok(full.some((l) => l.startsWith(`add element ip kube-proxy service-ips { ${vipOf(1)} . tcp . 80 : goto service-`)));
  const next = withChangedEndpoint(svcs[0]!, 1);
  const delta = lines((o) => nftDelta(o, svcs[0]!, next));
  t.match(delta[0]!, /^add chain ip kube-proxy endpoint-/);
  t.ok(delta.some((l) => l.startsWith('flush chain ip kube-proxy service-')));
  t.match(delta.at(-1)!, /^delete chain ip kube-proxy endpoint-.*__10\.128\.0\.0\/8080$/);
});

t.test('histogram quantiles as Prometheus interpolates them', async (t) => {
  const text = [
    'x_bucket{le="0.001"} 50',
    'x_bucket{le="0.01"} 99',
    'x_bucket{le="0.1"} 100',
    'x_bucket{le="+Inf"} 100',
    'x_sum 0.3',
    'x_count 100',
  ].join('\n');
  const h = parseHistogram(text, 'x');
  t.equal(h.count, 100);
  t.same(histogramQuantile(h, 0.5), { value: 0.001, bucketLe: 0.001 });
  t.equal(histogramQuantile(h, 0.99)!.bucketLe, 0.01);
  const d = diffHistogram(
    h,
    parseHistogram('x_bucket{le="0.001"} 50\nx_bucket{le="0.01"} 50\nx_bucket{le="0.1"} 50\nx_bucket{le="+Inf"} 50\nx_count 50', 'x'),
  );
  t.equal(d.count, 50);
  t.equal(histogramQuantile(d, 0.5)!.bucketLe, 0.01, 'only what happened in between');
  t.equal(histogramQuantile(parseHistogram('', 'x'), 0.5), undefined);
});

t.test('budget: skips what would take too long, at least quadratic growth', async (t) => {
  const b = new Budget(100_000, 200_000);
  t.same(b.attempt('op', 1000), { run: true });
  b.record('op', 1, 5);
  b.record('op', 1000, 100);
  t.equal(b.predict('op', 10_000), 10_000, 'quadratic from one point');
  t.equal(b.attempt('op', 10_000).run, true);
  b.record('op', 10_000, 50_000);
  const a = b.attempt('op', 100_000);
  t.equal(a.run, false);
  t.match(a.reason, /predicted .* over the/);
  b.kill('other', 10);
  t.match(b.attempt('other', 1).reason, /did not finish/);
});

t.test('ratios are paired by round, so a slow phase of the machine cancels out', async (t) => {
  // Two phases, 20k and 15.5k conn/s; the phase changed inside round 3. The
  // measured mode is 4% slower within each round, but the ratio of the two
  // medians would say 1.34x.
  const direct = [20_000, 20_000, 20_000, 15_500, 15_500];
  const svc = [20_000, 20_000, 15_500, 15_500, 15_500].map((x) => x / 1.04);
  t.equal(pairedMedianRatio(direct, svc).toFixed(3), '1.040');
  t.equal(pairedMedianRatio([2, 4, 9], [1, 2, 3]), 2);
  t.throws(() => pairedMedianRatio([1, 2], [1]), /2 vs 1 samples/);
});

t.test('makeServices6: IPv6-only services in canonical text, distinct VIPs and fillers, the last on the measured pods', async (t) => {
  const pods = ['fd00:10:244::11', 'fd00:10:244::12'];
  const svcs = makeServices6(70_000, 2, pods);
  t.equal(svcs[0]!.vip, 'fd00:10:96::1');
  t.equal(svcs[65_535]!.vip, 'fd00:10:96::1:0', 'past one group: the next group counts');
  t.same(svcs.at(-1)!.endpoints, pods);
  const all = svcs.flatMap((s) => [s.vip, ...s.endpoints.filter((e) => !pods.includes(e))]);
  t.equal(new Set(all).size, all.length, 'no address twice');
  t.ok(
    all.every((a) => canonicalIpv6(a) === a),
    'every address canonical',
  );
});

t.test('churn soak: the envelope growth compares the highest RSS of the first and last quarter', async (t) => {
  const at = (atS: number, mib: number) => ({ atS, rss: mib * 2 ** 20, heapUsed: 0, changes: 0 });
  // Warm-up samples before 120 s do not count; a collection's dip (180) and a peak (300) in the middle do not decide it.
  const sawtooth = [
    at(0, 100),
    at(60, 400),
    at(120, 300),
    at(150, 310),
    at(180, 180),
    at(210, 300),
    at(240, 305),
    at(270, 200),
    at(300, 309),
    at(330, 250),
  ];
  t.same(quarterPeaks(sawtooth, 120), { first: 310 * 2 ** 20, last: 309 * 2 ** 20 }, 'quarters of 2 of the 8 measured samples');
  t.ok(peakGrowthPct(sawtooth, 120) < 0, 'a sawtooth that does not rise: no growth');
  const rising = [at(120, 200), at(150, 202), at(180, 210), at(210, 220)];
  t.equal(peakGrowthPct(rising, 120), 10, 'a rise of the envelope: its growth in %');
  t.equal(peakGrowthPct([at(120, 200)], 120), 0, 'one sample: no growth');
});

t.test("issue 11's agent targets: met, missed, and not measured when a part did not run", async (t) => {
  const M = 2 ** 20;
  const agent = (n: number, rssMiB: number, o: { fullSyncMs?: number; startToSyncMs?: number; p99?: number } = {}) => ({
    n,
    endpointsPerService: 10,
    source: 'kubernetes (lab/apiserver)' as const,
    startToSyncMs: o.startToSyncMs ?? 1500,
    fullSyncMs: o.fullSyncMs ?? 150,
    rssAtSync: rssMiB * M,
    rssAfterSync: rssMiB * M,
    rssAfterChanges: rssMiB * M,
    change: { wallP50: 1, wallP99: o.p99 ?? 4, syncP50: 0.1, syncP99: 0.2, reps: 30 },
  });
  const cp = (agents: ReturnType<typeof agent>[]) => ({ endpointsPerService: 10, engine: [], agent: agents, netfilter: [] });
  const byWhat = (rows: ReturnType<typeof agentTargets>) =>
    Object.fromEntries(rows.map((r) => [r.what.split(' (')[0]!.split(',')[0]!, r.met]));

  const none = agentTargets({ controlPlane: undefined });
  t.equal(none.length, 11, 'every row of the issues, always');
  t.ok(
    none.every((r) => r.met === undefined && r.measured.startsWith('not measured')),
    'nothing run: nothing judged',
  );

  const kp = {
    kubernetesVersion: 'v1.34.4',
    endpointsPerService: 10,
    ipvs: undefined,
    safety: { rootRulesetUnchanged: true, sysctlsUnchanged: true, restored: [] },
    notes: [],
    points: [
      {
        n: 10_000,
        endpointsPerService: 10,
        load: { skipped: 'x' },
        proxies: [
          { proxy: 'nftables' as const, startToSyncedMs: 1, firstSyncMs: 1, rssAfterSync: 140 * M, rssAfterChanges: 140 * M },
          { proxy: 'iptables' as const, skipped: 'over budget' },
        ],
      },
    ],
  };
  const good = agentTargets({
    controlPlane: cp([agent(1, 70), agent(10_000, 130), agent(100_000, 700, { p99: 9 })]),
    realKubeProxy: kp as never,
  });
  t.same(byWhat(good), {
    'Agent RSS idle': true,
    'Agent RSS at 10k services x 10': true,
    'Agent RSS at 100k services x 10': true,
    'Full sync of 10k x 10': true,
    'Start -> synced at 10k x 10': true,
    'One change end to end': true,
    'One change at 1k / 10k / 100k costs what it costs at 1k': undefined,
    'File source: 10k services from a manifest directory': undefined,
    'One 10k-Service YAML file': undefined,
    'RSS after reading that file': undefined,
    'RSS growth under churn': undefined,
  });

  const file = (layout: 'json' | 'yaml-one-file' | undefined, manifestsToSyncMs: number, rssMiB: number) => ({
    n: 10_000,
    ...(layout ? { layout } : {}),
    endpointsPerService: 10,
    files: 1,
    startToSyncMs: 0,
    manifestsToSyncMs,
    fullSyncMs: 0,
    rssAfterSync: rssMiB * M,
    change: { wallP50: 0, wallP99: 0, syncP50: 0, syncP99: 0, partial: 0, reps: 0 },
  });
  const files = byWhat(
    agentTargets({ controlPlane: undefined, fileSource: [file(undefined, 900, 300), file('yaml-one-file', 1200, 190)] }),
  );
  t.equal(files['File source: 10k services from a manifest directory'], true, 'a run before the layouts: its row is JSON');
  t.equal(files['One 10k-Service YAML file'], false, 'the YAML file judged on its own row: 1.2 s missed');
  t.equal(files['RSS after reading that file'], true, '190 MiB met');
  t.equal(
    byWhat(agentTargets({ controlPlane: undefined, fileSource: [file('yaml-one-file', 800, 150)] }))[
      'File source: 10k services from a manifest directory'
    ],
    undefined,
    'the YAML file is not the JSON row',
  );
  t.match(good[1]!.measured, /kube-proxy nftables 140 MiB/, 'the real kube-proxy beside it; the skipped mode left out');

  const worse = agentTargets({
    controlPlane: cp([agent(1, 114), agent(10_000, 145, { fullSyncMs: 450, startToSyncMs: 3000, p99: 6 })]),
    realKubeProxy: {
      ...kp,
      points: [{ ...kp.points[0]!, proxies: [{ ...kp.points[0]!.proxies[0]!, rssAfterSync: 120 * M, rssAfterChanges: 120 * M }] }],
    } as never,
  });
  const w = byWhat(worse);
  t.equal(w['Agent RSS idle'], false);
  t.equal(w['Agent RSS at 10k services x 10'], false, 'under 150 MiB but above the real kube-proxy: missed');
  t.equal(w['Full sync of 10k x 10'], false);
  t.equal(w['Start -> synced at 10k x 10'], false);
  t.equal(w['One change end to end'], undefined, 'the p99 target needs both sizes');
  t.equal(w['Agent RSS at 100k services x 10'], undefined);

  const scaling = (p99At1k: number) =>
    byWhat(agentTargets({ controlPlane: cp([agent(1000, 100, { p99: p99At1k }), agent(100_000, 700, { p99: 9 })]) }))[
      'One change at 1k / 10k / 100k costs what it costs at 1k'
    ];
  t.equal(scaling(5), true, '9 ms at 100k against 5 ms at 1k: within 2x');
  t.equal(scaling(4), false, '9 ms at 100k against 4 ms at 1k: more than 2x');
});
