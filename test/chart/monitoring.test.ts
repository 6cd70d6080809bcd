// The chart's Prometheus operator objects, each opt-in: off by default; the
// ServiceMonitor (job "svcmap", as the alerts read it) with the headless
// Service it selects, refused while the metrics listen on loopback only; the
// PrometheusRule carrying files/prometheus-rules.yaml unchanged (the file
// promtool checks, test/prometheus).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { CHART, helm, render, templateArgs } from './helm.ts';

const HOST = '192.0.2.10';
const base = [`k8sServiceHost=${HOST}`];

t.test('off by default', async (t) => {
  const ms = render({ set: base });
  const kinds = ms.map((m) => m.kind);
  t.notOk(kinds.includes('ServiceMonitor'));
  t.notOk(kinds.includes('PrometheusRule'));
  t.notOk(
    ms.some((m) => m.metadata.labels?.grafana_dashboard),
    'no dashboard ConfigMap',
  );
});

t.test('serviceMonitor.enabled: a ServiceMonitor scraping job "svcmap" through a headless Service of the agents', async (t) => {
  const ms = render({
    set: [
      ...base,
      'serviceMonitor.enabled=true',
      'metricsBindAddress=0.0.0.0',
      'serviceMonitor.labels.release=prom',
      'serviceMonitor.interval=15s',
    ],
  });
  const sm = ms.find((m) => m.kind === 'ServiceMonitor')!;
  const svc = ms.find((m) => m.kind === 'Service' && m.metadata.name === 'svcmap-metrics')!;
  const ds = ms.find((m) => m.kind === 'DaemonSet' && m.metadata.name === 'svcmap')!;
  t.equal(sm.apiVersion, 'monitoring.coreos.com/v1');
  t.equal(sm.metadata.labels?.release, 'prom', 'the labels a Prometheus selects on');
  const spec = sm.spec as {
    selector: { matchLabels: Record<string, string> };
    endpoints: Array<Record<string, unknown>>;
    namespaceSelector: unknown;
  };
  t.same(spec.namespaceSelector, { matchNames: ['kube-system'] });
  for (const [k, v] of Object.entries(spec.selector.matchLabels)) t.equal(svc.metadata.labels?.[k], v, `the Service carries ${k}`);
  t.match(spec.endpoints, [
    { port: 'metrics', path: '/metrics', interval: '15s', relabelings: [{ action: 'replace', targetLabel: 'job', replacement: 'svcmap' }] },
  ]);
  const svcSpec = svc.spec as {
    clusterIP: string;
    selector: Record<string, string>;
    ports: Array<{ name: string; port: number; targetPort: string }>;
  };
  t.equal(svcSpec.clusterIP, 'None');
  t.same(svcSpec.ports, [{ name: 'metrics', port: 10249, targetPort: 'metrics', protocol: 'TCP' }]);
  const podLabels = (ds.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;
  for (const [k, v] of Object.entries(svcSpec.selector)) t.equal(podLabels[k], v, `the agent pods carry ${k}`);
});

t.test('serviceMonitor.enabled while metrics listen on loopback: refused, saying what to set', async (t) => {
  const r = helm(templateArgs({ set: [...base, 'serviceMonitor.enabled=true'] }));
  t.not(r.status, 0);
  t.match(
    r.stderr,
    /serviceMonitor.enabled needs metrics a Prometheus can reach: metricsBindAddress is 127.0.0.1 \(loopback\); set it to 0.0.0.0/,
  );
});

t.test('prometheusRule.enabled: the rule file, unchanged', async (t) => {
  const ms = render({ set: [...base, 'prometheusRule.enabled=true', 'prometheusRule.labels.role=alert-rules'] });
  const pr = ms.find((m) => m.kind === 'PrometheusRule')!;
  t.equal(pr.apiVersion, 'monitoring.coreos.com/v1');
  t.equal(pr.metadata.labels?.role, 'alert-rules');
  const file = parse(readFileSync(join(CHART, 'files', 'prometheus-rules.yaml'), 'utf8')) as { groups: unknown };
  t.same((pr.spec as { groups: unknown }).groups, file.groups, 'the groups promtool checks');
});

t.test('grafanaDashboard.enabled: a ConfigMap the Grafana sidecar picks up, holding the dashboard file unchanged', async (t) => {
  const ms = render({
    set: [
      ...base,
      'grafanaDashboard.enabled=true',
      'grafanaDashboard.labels.team=net',
      'grafanaDashboard.annotations.grafana_folder=Networking',
    ],
  });
  const cm = ms.find((m) => m.kind === 'ConfigMap' && m.metadata.name === 'svcmap-dashboard')!;
  t.ok(cm, 'ConfigMap svcmap-dashboard');
  t.equal(cm.metadata.labels?.grafana_dashboard, '1', "the sidecar's label, as a string");
  t.equal(cm.metadata.labels?.team, 'net', 'extra labels');
  t.same(cm.metadata.annotations, { grafana_folder: 'Networking' });
  t.equal(cm.metadata.namespace, 'kube-system', 'the release namespace by default');
  const data = cm.data as Record<string, string>;
  t.same(Object.keys(data), ['svcmap.json']);
  const file = readFileSync(join(CHART, 'files', 'grafana-dashboard.json'), 'utf8');
  t.same(JSON.parse(data['svcmap.json']!), JSON.parse(file), 'the file, as JSON');
  const elsewhere = render({ set: [...base, 'grafanaDashboard.enabled=true', 'grafanaDashboard.namespace=monitoring'] });
  t.equal(elsewhere.find((m) => m.metadata.name === 'svcmap-dashboard')!.metadata.namespace, 'monitoring', 'grafanaDashboard.namespace');
});
