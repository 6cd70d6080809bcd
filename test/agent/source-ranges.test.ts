// loadBalancerSourceRanges from a Service to the map targets, both families:
// validation (a bad CIDR is an error naming the Service and the field), each
// family's frontends restricted by the ranges of their own family only, as
// kube-proxy does (pkg/proxy/serviceport.go), host bits cleared and the
// ranges deduplicated for the LPM trie keys, and SVC_F_SRC_RANGES only where
// a range is written. The datapath's side is test/bpf/tc-policy.test.ts and
// tc6-nodeport.test.ts; the user's view is test/e2e/tc-source-ranges.test.ts.
import t from 'tap';
import { normalizeCidr, toTargets } from '../../src/agent/loops/targets.ts';
import { SVC_F_SRC_RANGES } from '../../src/maps/constants.ts';
import { buildDesiredState } from '../model/desired.ts';
import type { Service } from '../../src/model/schemas.ts';
import type { Problem } from '../../src/model/types.ts';
import { validateObject } from '../../src/model/validate.ts';
import type { FrontendTarget } from '../../src/sync/targets.ts';

const LB4 = '203.0.113.10';
const LB6 = '2001:db8:1b::10';

function service(ranges: unknown[], name = 'web'): ReturnType<typeof validateObject> {
  return validateObject({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: 'shop' },
    spec: {
      type: 'LoadBalancer',
      clusterIP: '10.96.0.20',
      clusterIPs: ['10.96.0.20', 'fd00:96::20'],
      ipFamilies: ['IPv4', 'IPv6'],
      ipFamilyPolicy: 'RequireDualStack',
      ports: [{ port: 80, nodePort: 30080 }],
      loadBalancerSourceRanges: ranges,
    },
    status: { loadBalancer: { ingress: [{ ip: LB4 }, { ip: LB6 }] } },
  });
}

/** The targets of the dual-stack LoadBalancer Service with these ranges, by frontend address, and the model's problems. */
function targets(ranges: string[]): { byAddr: Map<string, FrontendTarget>; problems: Problem[] } {
  const r = service(ranges);
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  const { state, problems } = buildDesiredState({ services: [r.obj as Service], slices: [] });
  const byAddr = new Map(toTargets(state).map((x) => [`${x.key.addr}:${x.key.port}`, x]));
  return { byAddr, problems };
}

const restricted = (x: FrontendTarget | undefined) => ((x?.flags ?? 0) & SVC_F_SRC_RANGES) !== 0;

t.test('normalizeCidr: the network of either family, in canonical form', async (t) => {
  const cases: Array<[string, string]> = [
    ['10.1.2.3/8', '10.0.0.0/8'],
    ['192.0.2.77/32', '192.0.2.77/32'],
    ['198.51.100.1/0', '0.0.0.0/0'],
    ['2001:db8::1/64', '2001:db8::/64'],
    ['fd00:192:168:100::1ab/120', 'fd00:192:168:100::100/120'],
    ['2001:db8:ffff:ffff::/33', '2001:db8:8000::/33'],
    ['2001:8db8:abcd:1234:5678::/17', '2001:8000::/17'],
    ['2001:db8:abcd::/17', '2001::/17'],
    ['fd00::1/128', 'fd00::1/128'],
    ['fd00::1/127', 'fd00::/127'],
    ['2001:db8::1/0', '::/0'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/65', 'ffff:ffff:ffff:ffff:8000::/65'],
  ];
  for (const [input, want] of cases) t.equal(normalizeCidr(input), want, input);
});

t.test('a dual-stack LoadBalancer: each family gets its own ranges, host bits cleared, once each', async (t) => {
  const { byAddr, problems } = targets([
    '192.0.2.7/24',
    '192.0.2.0/24',
    'FD00:192:168:100::1AB/120',
    'fd00:192:168:100::100/120',
    '2001:db8::/32',
  ]);
  t.same(problems, []);
  const v4 = byAddr.get(`${LB4}:80`);
  const v6 = byAddr.get(`${LB6}:80`);
  t.same(v4?.sourceRanges, ['192.0.2.0/24'], 'IPv4: its own range, written once');
  t.same(v6?.sourceRanges, ['2001:db8::/32', 'fd00:192:168:100::100/120'], 'IPv6: canonical networks, written once');
  t.ok(restricted(v4) && restricted(v6), 'both LoadBalancer frontends are restricted');
  for (const [addr, x] of byAddr) {
    if (addr === `${LB4}:80` || addr === `${LB6}:80`) continue;
    t.same([x.sourceRanges, restricted(x)], [[], false], `${addr} (${x.label}): ranges apply to LoadBalancer IPs only`);
  }
});

t.test("ranges of one family only: the other family's frontends are not restricted (kube-proxy), with a warning", async (t) => {
  const only6 = targets(['fd00:192:168:100::100/120']);
  t.same(only6.byAddr.get(`${LB6}:80`)?.sourceRanges, ['fd00:192:168:100::100/120']);
  t.ok(restricted(only6.byAddr.get(`${LB6}:80`)));
  t.same(only6.byAddr.get(`${LB4}:80`)?.sourceRanges, [], 'IPv4: no range of its family');
  t.notOk(restricted(only6.byAddr.get(`${LB4}:80`)), 'IPv4: accepts every client');
  t.same(
    only6.problems.map((p) => [p.severity, p.kind, p.namespace, p.name, p.path]),
    [['warning', 'Service', 'shop', 'web', 'spec.loadBalancerSourceRanges']],
  );
  t.match(only6.problems[0]?.message, /holds no IPv4 range: its IPv4 LoadBalancer frontends accept every client/);

  const only4 = targets(['192.0.2.0/24']);
  t.same(only4.byAddr.get(`${LB4}:80`)?.sourceRanges, ['192.0.2.0/24']);
  t.same(
    [only4.byAddr.get(`${LB6}:80`)?.sourceRanges, restricted(only4.byAddr.get(`${LB6}:80`))],
    [[], false],
    'IPv6: accepts every client',
  );
  t.match(only4.problems[0]?.message, /holds no IPv6 range/);
});

t.test('a /0 of the family means any client, as kube-proxy reads it (the other family keeps its ranges)', async (t) => {
  const { byAddr, problems } = targets(['192.0.2.0/24', '::/0', '2001:db8::/32']);
  t.same(problems, []);
  t.same(
    [byAddr.get(`${LB6}:80`)?.sourceRanges, restricted(byAddr.get(`${LB6}:80`))],
    [[], false],
    'IPv6: ::/0 among its ranges, unrestricted',
  );
  t.same(byAddr.get(`${LB4}:80`)?.sourceRanges, ['192.0.2.0/24']);
  const v4 = targets(['10.0.0.0/0']);
  t.notOk(restricted(v4.byAddr.get(`${LB4}:80`)), 'IPv4: 10.0.0.0/0 is a /0 too');
});

t.test('a bad IPv6 range: an error naming the Service and the field, and no frontend of it', async (t) => {
  for (const bad of ['fd00::1::/64', '2001:db8::/129', 'fd00::', '::ffff:192.0.2.0/120', 'fd00::/64x', 'fd00::/-1']) {
    const r = service(['192.0.2.0/24', bad]);
    t.notOk(r.ok, bad);
    if (r.ok) continue;
    t.same(
      r.problems.map((p) => [p.severity, p.kind, p.namespace, p.name, p.path]),
      [['error', 'Service', 'shop', 'web', 'spec.loadBalancerSourceRanges[1]']],
      `${bad}: the Service and the field`,
    );
    t.match(r.problems[0]?.message, `got ${JSON.stringify(bad)}`, `${bad}: the value`);
  }
});
