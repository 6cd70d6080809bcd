// The chart's Grafana dashboard (charts/svcmap/files/grafana-dashboard.json)
// against the metrics the agent exports: every metric name in every PromQL
// expression is a series of the agent's own registry (src/agent/metrics.ts
// with kube-proxy-metrics.ts and the process metrics: the registry /metrics
// serves, as test/e2e/metrics-health.test.ts scrapes it from a running
// agent), read from its exposition text here, not typed by hand; and every
// expression is PromQL that promtool parses (as recording rules, Grafana's
// variables given values).
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { AgentMetrics } from '../../src/agent/http/metrics.ts';
import { ROOT } from '../chart/helm.ts';
import { PROMTOOL, promtool } from './promtool.ts';

const DASHBOARD = join(ROOT, 'charts', 'svcmap', 'files', 'grafana-dashboard.json');

interface Panel {
  id: number;
  title: string;
  type: string;
  targets?: Array<{ expr: string }>;
  panels?: Panel[];
}
const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: Array<{ name: string; query?: unknown; definition?: string }> };
};
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);

const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
  'inf',
  'nan',
]);

/** The metric names a PromQL expression reads: identifiers that are not functions, keywords, label names, numbers, durations or Grafana variables. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // strings (label values, regexes)
    .replace(/\{[^}]*\}/g, '') // label matchers
    .replace(/\[[^\]]*\]/g, '') // ranges
    .replace(/\$\{?\w+\}?/g, '') // Grafana variables
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ''); // label lists
  const names = [...bare.matchAll(/(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)]
    .filter((m) => !m[2] && !KEYWORDS.has(m[1]!.toLowerCase()))
    .map((m) => m[1]!);
  return [...new Set(names)];
}

/** Every series name the agent's registry exposes: each family, and a histogram's or summary's _bucket/_sum/_count. */
async function exportedSeries(): Promise<Set<string>> {
  const metrics = new AgentMetrics({ families: ['IPv4', 'IPv6'] });
  const text = await metrics.registry.metrics();
  const out = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m;
    out.add(name!);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) out.add(`${name}${s}`);
    if (type === 'summary') for (const s of ['_sum', '_count']) out.add(`${name}${s}`);
  }
  return out;
}

t.test('the name extraction', async (t) => {
  t.same(metricNames('histogram_quantile(0.99, sum by (le, kind) (rate(a_bucket{job="svcmap", node=~"$node"}[$__rate_interval])))'), [
    'a_bucket',
  ]);
  t.same(metricNames('max by (map) (x{j="a{b}"} / y) and on (node) time() - z offset 5m > 1e3'), ['x', 'y', 'z']);
});

t.test('every metric the dashboard reads is exported by the agent', async (t) => {
  const exported = await exportedSeries();
  t.ok(
    exported.has('svcmap_sync_duration_seconds_bucket') && exported.has('process_resident_memory_bytes'),
    "the registry's own, kube-proxy's and the process metrics",
  );
  const read = new Set<string>();
  for (const p of panels) {
    if (p.type === 'row') continue;
    t.ok(p.targets?.length, `${p.title}: has queries`);
    for (const { expr } of p.targets ?? []) {
      const names = metricNames(expr);
      t.ok(names.length, `${p.title}: ${expr} reads a metric`);
      for (const n of names) {
        t.ok(exported.has(n), `${p.title}: ${n} is exported`);
        read.add(n);
      }
    }
  }
  for (const v of dashboard.templating.list) {
    for (const n of v.definition ? metricNames(v.definition.replace(/^label_values\((.*), *\w+\)$/, '$1')) : [])
      t.ok(exported.has(n), `variable ${v.name}: ${n} is exported`);
  }
  // What the dashboard is for (the list), each read by some panel.
  for (const n of [
    'svcmap_sync_duration_seconds_bucket',
    'svcmap_network_programming_duration_seconds_bucket',
    'svcmap_map_entries',
    'svcmap_map_capacity',
    'svcmap_datapath_packets_total',
    'svcmap_backend_connections',
    'process_resident_memory_bytes',
  ]) {
    t.ok(read.has(n), `a panel reads ${n}`);
  }
});

t.test('panel ids are unique; the dashboard has a fixed uid', async (t) => {
  t.equal(new Set(panels.map((p) => p.id)).size, panels.length);
  t.equal(dashboard.uid, 'svcmap-agent');
});

t.test('promtool parses every expression (Grafana variables given values)', async (t) => {
  t.ok(existsSync(PROMTOOL), `${PROMTOOL}: run \`make promtool\` first`);
  const exprs = panels.flatMap((p) =>
    (p.targets ?? []).map((x, i) => ({
      record: `dashboard:panel_${p.id}:${i}`,
      expr: x.expr.replace(/\$__rate_interval\b/g, '5m').replace(/\$\{?node\}?/g, '.*'),
    })),
  );
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-dashboard-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'rules.yaml');
  writeFileSync(file, JSON.stringify({ groups: [{ name: 'dashboard', rules: exprs }] }));
  const r = promtool('check', 'rules', file);
  t.equal(r.status, 0, r.out);
  t.match(r.out, new RegExp(`SUCCESS: ${exprs.length} rules found`));
});
