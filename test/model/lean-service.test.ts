// The lean Service path (src/model/lean-service.ts) against the zod schema it
// stands in for: over random Services built from valid, odd and invalid
// values of every field (and combinations that break the spec's rules: port
// names, port/protocol pairs, cluster IPs against ipFamilies), whenever the
// lean path answers, zod accepts the Service too and gives the same output
// (the same JSON, keys in the same order); plain API-server Services and
// plain manifests take the lean path; and whatever it turns down is still
// validated by zod, with zod's problems.
import t from 'tap';
import * as z from 'zod';
import { serviceObject } from '../../bench/manifests.ts';
import { makeServices } from '../../bench/workload.ts';
import { leanService } from '../../src/model/lean-service.ts';
import { ServiceSchema } from '../../src/model/schemas.ts';
import { validateObject } from '../../src/model/validate.ts';
import fc from 'fast-check';
import { ABSENT, leanAgainstZod, obj, pick } from './random-objects.ts';

const ALG = 'svcmap.io/lb-algorithm';

const randomPort = (): fc.Arbitrary<unknown> =>
  pick(
    [
      obj([
        ['name', pick(['http', '', ABSENT, null, 'Bad', 'dns-tcp', 'a'.repeat(64), 5])],
        ['protocol', pick(['TCP', 'UDP', 'SCTP', ABSENT, null, 'tcp', 7])],
        ['port', pick([80, 443, 53, 0, 65536, 8.5, '80', ABSENT, null])],
        ['targetPort', pick([8080, ABSENT, 'http', '', 0, null, 70000, 8.5, {}])],
        ['nodePort', pick([ABSENT, 30080, 0, null, '30080'])],
        ['appProtocol', pick([ABSENT, 'http'])],
      ]),
      null,
      'p',
      [],
    ],
    0.9,
  );

function randomSpec(): fc.Arbitrary<unknown> {
  return fc
    .tuple(pick(['10.96.0.10', '010.96.0.10', '10.96.0.11']), pick(['fd00::10', 'FD00:0::10', 'fd00::11']))
    .chain(([v4, v6]) =>
      pick([
        [v4],
        [],
        [v4, v6],
        [v6, v4],
        [v6],
        [v4, v4],
        ['None'],
        [''],
        [v4, v6, '10.96.0.12'],
        ['10.0.0.256'],
        null,
        ABSENT,
        'x',
        [null],
      ]).chain((ips) => specWith(v4, v6, ips)),
    );
}

function specWith(v4: unknown, v6: unknown, ips: unknown): fc.Arbitrary<unknown> {
  return obj([
    ['type', pick(['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName', ABSENT, null, 'clusterip'])],
    [
      'clusterIP',
      pick([
        Array.isArray(ips) && typeof ips[0] === 'string' ? ips[0] : v4,
        ABSENT,
        null,
        '',
        'None',
        v4,
        v6,
        '1.2.3',
        '::ffff:10.0.0.1',
        5,
      ]),
    ],
    ['clusterIPs', ips],
    [
      'ipFamilies',
      pick([
        ABSENT,
        ['IPv4'],
        ['IPv6'],
        ['IPv4', 'IPv6'],
        ['IPv6', 'IPv4'],
        ['IPv4', 'IPv4'],
        [],
        null,
        ['ipv4'],
        ['IPv4', 'IPv6', 'IPv4'],
        [null],
      ]),
    ],
    ['ipFamilyPolicy', pick([ABSENT, 'SingleStack', 'PreferDualStack', 'RequireDualStack', null, 'Dual'])],
    ['selector', pick([{ app: 'web' }, ABSENT, null])],
    [
      'ports',
      pick([
        fc.array(randomPort(), { maxLength: 3 }),
        ABSENT,
        null,
        [],
        'ports',
        [
          { name: 'a', port: 80 },
          { name: 'a', port: 81 },
        ],
        [
          { name: 'a', port: 80 },
          { name: 'b', port: 80 },
        ],
        [
          { name: 'a', port: 80 },
          { name: 'b', port: 80, protocol: 'UDP' },
        ],
        [{ port: 80 }, { name: 'b', port: 81 }],
      ]),
    ],
    ['externalIPs', pick([ABSENT, [], ['192.0.2.1'], ['192.0.2.01', 'fd00::5'], ['None'], [''], null, 'ip', [5]])],
    ['externalTrafficPolicy', pick([ABSENT, 'Cluster', 'Local', 'Global', null, 'local'])],
    ['internalTrafficPolicy', pick(['Cluster', ABSENT, 'Local', null, 'Global'])],
    ['sessionAffinity', pick(['None', ABSENT, 'ClientIP', null, 'clientip'])],
    [
      'sessionAffinityConfig',
      pick([
        ABSENT,
        { clientIP: { timeoutSeconds: 60 } },
        { clientIP: {} },
        { clientIP: { timeoutSeconds: null } },
        { clientIP: null },
        {},
        null,
        { clientIP: { timeoutSeconds: 0 } },
        { clientIP: { timeoutSeconds: 86401 } },
        { clientIP: { timeoutSeconds: 1.5 } },
        [],
      ]),
    ],
    ['loadBalancerSourceRanges', pick([ABSENT, [], null, ['10.0.0.0/8'], [' 10.0.0.0/8 '], ['x']])],
    ['healthCheckNodePort', pick([ABSENT, 30999, null, 0, '30999'])],
    ['externalName', pick([ABSENT, 'db.example.com', null, 5])],
  ]);
}

function randomService(): fc.Arbitrary<unknown> {
  return obj([
    ['apiVersion', pick(['v1', 'v2', ABSENT])],
    ['kind', pick(['Service', 'EndpointSlice', ABSENT])],
    [
      'metadata',
      pick(
        [
          obj([
            ['name', pick(['web', 'a', 'a.b-c', 'A', '', '-a', 'a'.repeat(253), 'a'.repeat(254), 5, ABSENT, null])],
            ['namespace', pick(['shop', ABSENT, 'default', null, 'Bad', '', 'a'.repeat(64), 5])],
            ['uid', pick(['uid-1', ABSENT])],
            ['labels', pick([ABSENT, { app: 'web' }, {}, null, { a: 1 }, [], { 'service.kubernetes.io/service-proxy-name': 'other' }])],
            [
              'annotations',
              pick([
                ABSENT,
                { [ALG]: 'maglev' },
                { [ALG]: 'bogus', 'svcmap.io/maglev-table-size': '251' },
                { [ALG]: 5 },
                { other: 'x' },
                {},
                null,
                [],
                'a',
              ]),
            ],
            ['managedFields', pick([ABSENT, [{ manager: 'm' }]])],
          ]),
          ABSENT,
          null,
          'meta',
          [],
        ],
        0.9,
      ),
    ],
    ['spec', pick([randomSpec(), ABSENT, null, [], 's'], 0.95)],
    [
      'status',
      pick([
        ABSENT,
        { loadBalancer: {} },
        {},
        null,
        { loadBalancer: null },
        { loadBalancer: { ingress: [] } },
        { loadBalancer: { ingress: null } },
        { loadBalancer: { ingress: [{ ip: '192.0.2.7' }] } },
        { loadBalancer: [] },
        's',
      ]),
    ],
  ]);
}

t.test('whenever the lean path answers, zod agrees, with the same output', async (t) => {
  leanAgainstZod(t, 30_000, randomService(), leanService, ServiceSchema);
});

t.test('API-server Services and plain manifests take the lean path; what it turns down is validated by zod', async (t) => {
  const [s] = makeServices(1, 10);
  const plain = JSON.parse(JSON.stringify(serviceObject(s!)));
  // The API server also sends what it defaults.
  Object.assign(plain.spec, {
    sessionAffinity: 'None',
    ipFamilies: ['IPv4'],
    ipFamilyPolicy: 'SingleStack',
    internalTrafficPolicy: 'Cluster',
  });
  plain.status = { loadBalancer: {} };
  const l = leanService(plain);
  t.ok(l, "the bench's Service (the API server's shape) is lean");
  t.same(l, z.parse(ServiceSchema, plain), "with zod's output");

  const manifest = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'web' },
    spec: { clusterIP: '10.96.0.9', ports: [{ port: 80, targetPort: 8080 }] },
  };
  const m = leanService(manifest);
  t.ok(m, 'a manifest without namespace or labels is lean');
  t.same(m, z.parse(ServiceSchema, manifest), "with zod's output (namespace default, every default filled in)");
  t.equal(m?.metadata.namespace, 'default');

  const bad = structuredClone(plain);
  bad.spec.ports = [
    { name: 'http', port: 80 },
    { name: 'http', port: 81 },
  ];
  t.equal(leanService(bad), undefined, 'a duplicate port name: not lean');
  const r = validateObject(bad, 'api');
  t.notOk(r.ok, 'refused');
  t.match(
    !r.ok && r.problems,
    [{ kind: 'Service', name: plain.metadata.name, path: 'spec.ports[1].name', message: /duplicates/ }],
    "zod's problem, naming the field",
  );

  const badIp = structuredClone(plain);
  badIp.spec.clusterIPs = ['10.96.0.300'];
  t.equal(leanService(badIp), undefined, 'a bad cluster IP: not lean');
  const r2 = validateObject(badIp, 'api');
  t.match(!r2.ok && r2.problems, [{ kind: 'Service', path: 'spec.clusterIPs[0]' }], 'zod names the field');

  const v = validateObject(plain, 'api');
  t.ok(v.ok && v.obj.kind === 'Service', 'validateObject accepts the plain Service');
});
