// bench/prom.ts: Prometheus text as kube-proxy serves it (labelled series,
// summed by le over the series a filter selects), and the quantiles of
// bench/agent.ts on top of it.
import t from 'tap';
import { diffHistogram, histogramQuantile } from '../../bench/agent.ts';
import { histogramOf, parseSamples, sampleValue } from '../../bench/prom.ts';

const TEXT = `# HELP kubeproxy_sync_proxy_rules_duration_seconds [ALPHA] SyncProxyRules latency in seconds
# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.001"} 0
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.128"} 3
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.256"} 4
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 4
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 0.5
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 4
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv6",le="0.001"} 4
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv6",le="0.128"} 4
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv6",le="0.256"} 4
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv6",le="+Inf"} 4
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv6"} 0.002
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv6"} 4
# TYPE kubeproxy_network_programming_duration_seconds histogram
kubeproxy_network_programming_duration_seconds_bucket{le="0.25"} 1
kubeproxy_network_programming_duration_seconds_bucket{le="0.5"} 1
kubeproxy_network_programming_duration_seconds_bucket{le="1"} 2
kubeproxy_network_programming_duration_seconds_bucket{le="2"} 10
kubeproxy_network_programming_duration_seconds_bucket{le="+Inf"} 10
kubeproxy_network_programming_duration_seconds_sum 12.5
kubeproxy_network_programming_duration_seconds_count 10
kubeproxy_sync_proxy_rules_last_timestamp_seconds 1.7646e+09
rest_client_requests_total{code="200",host="172.31.255.1:6443",method="GET"} 7
rest_client_requests_total{code="201",host="172.31.255.1:6443",method="POST"} 2
weird{msg="a \\"quoted\\" }, value"} 3 1700000000000
`;

t.test('samples: names, labels (escapes, braces inside values), values, timestamps ignored', async (t) => {
  const s = parseSamples(TEXT);
  t.equal(s.filter((x) => x.name.startsWith('kubeproxy_sync_proxy_rules_duration_seconds')).length, 12);
  t.same(
    s.find((x) => x.name === 'weird'),
    { name: 'weird', labels: { msg: 'a "quoted" }, value' }, value: 3 },
  );
  t.equal(sampleValue(s, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds'), 1.7646e9);
  t.equal(sampleValue(s, 'rest_client_requests_total'), 9, 'summed over series');
  t.equal(sampleValue(s, 'rest_client_requests_total', { method: 'POST' }), 2);
  t.equal(sampleValue(s, 'absent'), undefined);
  t.same(parseSamples('x_bucket{le="+Inf"} +Inf\n'), [{ name: 'x_bucket', labels: { le: '+Inf' }, value: Infinity }]);
});

t.test('histograms: one family selected, or all summed by le', async (t) => {
  const s = parseSamples(TEXT);
  const v4 = histogramOf(s, 'kubeproxy_sync_proxy_rules_duration_seconds', { ip_family: 'IPv4' });
  t.same(v4, {
    buckets: [
      [0.001, 0],
      [0.128, 3],
      [0.256, 4],
      [Infinity, 4],
    ],
    sum: 0.5,
    count: 4,
  });
  t.same(
    histogramQuantile(v4, 0.5),
    { value: 0.001 + (0.128 - 0.001) * (2 / 3), bucketLe: 0.128 },
    'interpolated inside its bucket (from the previous bound)',
  );
  t.equal(histogramQuantile(v4, 0.99)!.bucketLe, 0.256);
  const both = histogramOf(s, 'kubeproxy_sync_proxy_rules_duration_seconds');
  t.equal(both.count, 8);
  t.same(both.buckets[0], [0.001, 4]);
  const prog = histogramOf(s, 'kubeproxy_network_programming_duration_seconds');
  t.equal(prog.count, 10);
  t.same(histogramQuantile(prog, 0.5), { value: 1 + (5 - 2) / 8, bucketLe: 2 });
  t.same(histogramOf(s, 'absent'), { buckets: [], sum: 0, count: 0 });
  t.equal(histogramQuantile(histogramOf(s, 'absent'), 0.5), undefined);
  const d = diffHistogram(
    prog,
    histogramOf(
      parseSamples(
        'kubeproxy_network_programming_duration_seconds_bucket{le="1"} 2\nkubeproxy_network_programming_duration_seconds_count 2',
      ),
      'kubeproxy_network_programming_duration_seconds',
    ),
  );
  t.equal(d.count, 8);
  t.equal(histogramQuantile(d, 0.5)!.bucketLe, 2);
});
