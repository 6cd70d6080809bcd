// The chart's alerting rules (charts/svcmap/files/prometheus-rules.yaml)
// through Prometheus' own promtool, built from its Go module (make
// promtool): `check rules` accepts the file, `test rules` fires each alert
// from a synthetic series and not from its look-alikes
// (test/prometheus/rules.test.yaml). And what the two files must agree on
// with the code: every alert has a unit test, and the drops the
// SvcmapDatapathDropsRising alert watches are the datapath's drop reasons
// (src/maps/constants.ts) but for those a Service's own policy causes.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { DP_REASONS } from '../../src/maps/constants.ts';
import { ROOT } from '../chart/helm.ts';
import { PROMTOOL, promtool } from './promtool.ts';

const RULES = join(ROOT, 'charts', 'svcmap', 'files', 'prometheus-rules.yaml');
const TESTS = join(ROOT, 'test', 'prometheus', 'rules.test.yaml');
/** Refusals a Service or the node's settings ask for (no endpoints, externalTrafficPolicy Local, loadBalancerSourceRanges, bind protection): no alert. */
const POLICY_DROPS = ['no_backend', 'no_local_endpoint', 'source_denied', 'nodeport_bind_denied'];
/** Drops by design that the client's retransmission recovers from: no alert. */
const TRANSIENT_DROPS = ['migration_hold'];

interface Rule {
  alert?: string;
  expr: string;
}
const rules = (parse(readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Rule[] }> }).groups.flatMap((g) => g.rules);

t.test('promtool is built (make promtool)', async (t) => {
  t.ok(existsSync(PROMTOOL), `${PROMTOOL}: run \`make promtool\` first`);
});

t.test("promtool check rules accepts the chart's rule file", async (t) => {
  const r = promtool('check', 'rules', RULES);
  t.equal(r.status, 0, r.out);
  t.match(r.out, new RegExp(`SUCCESS: ${rules.length} rules found`));
});

t.test('promtool test rules: each alert fires from its synthetic series, its look-alikes do not', async (t) => {
  const r = promtool('test', 'rules', TESTS);
  t.equal(r.status, 0, r.out);
  t.match(r.out, /SUCCESS/);
});

t.test('every alert has a unit test', async (t) => {
  const tested = new Set(
    (
      parse(readFileSync(TESTS, 'utf8')) as { tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts: unknown[] }> }> }
    ).tests
      .flatMap((x) => x.alert_rule_test ?? [])
      .filter((a) => a.exp_alerts.length > 0)
      .map((a) => a.alertname),
  );
  for (const r of rules) if (r.alert) t.ok(tested.has(r.alert), `${r.alert} fires in a test`);
});

t.test("the drops alert watches every drop reason but the Services' own refusals", async (t) => {
  const expr = rules.find((r) => r.alert === 'SvcmapDatapathDropsRising')!.expr;
  const watched = /reason=~"([^"]+)"/.exec(expr)![1]!.split('|').sort();
  const drops = DP_REASONS.filter((r) => r.drop && !POLICY_DROPS.includes(r.name) && !TRANSIENT_DROPS.includes(r.name))
    .map((r) => r.name)
    .sort();
  t.same(watched, drops);
  for (const p of POLICY_DROPS)
    t.ok(
      DP_REASONS.some((r) => r.name === p && r.drop),
      `${p} is a drop reason of the datapath`,
    );
});
