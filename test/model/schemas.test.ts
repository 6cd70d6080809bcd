import t from 'tap';
import { supportedKind, type EndpointSlice, type Service } from '../../src/model/schemas.ts';
import { validateObject } from '../../src/model/validate.ts';
import { renderPath } from '../../src/model/issues.ts';
import type { Problem } from '../../src/model/types.ts';

const service = (spec: Record<string, unknown>, metadata: Record<string, unknown> = { name: 'web', namespace: 'shop' }) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata,
  spec,
});

const slice = (body: Record<string, unknown>, metadata: Record<string, unknown> = { name: 'web-1', namespace: 'shop' }) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata,
  ...body,
});

function problems(raw: unknown, source?: string): Problem[] {
  const r = validateObject(raw, source);
  if (r.ok) throw new Error('expected validation to fail');
  return r.problems;
}

function valid<T>(raw: unknown): T {
  const r = validateObject(raw);
  if (!r.ok) throw new Error(r.problems.map((p) => p.message).join('; '));
  return r.obj as T;
}

t.test('an invalid IPv4 endpoint address is reported with its exact path', async (t) => {
  const ps = problems(
    slice({
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.0.0.1'] }, { addresses: ['10.0.0.300'] }],
      ports: [{ name: 'http', port: 8080 }],
    }),
    'x.yaml',
  );
  t.equal(ps.length, 1);
  t.match(ps[0], {
    kind: 'EndpointSlice',
    namespace: 'shop',
    name: 'web-1',
    path: 'endpoints[1].addresses[0]',
    severity: 'error',
    source: 'x.yaml',
  });
  t.equal(ps[0]?.message, 'endpoints[1].addresses[0]: must be an IPv4 address (addressType is IPv4), got "10.0.0.300"');
});

t.test('addresses are checked against the slice addressType', async (t) => {
  const ps = problems(slice({ addressType: 'IPv6', endpoints: [{ addresses: ['10.0.0.1'] }] }));
  t.equal(ps[0]?.path, 'endpoints[0].addresses[0]');
  t.match(ps[0]?.message, /IPv6/);
  const bad = problems(slice({ addressType: 'IPv5', endpoints: [] }));
  t.equal(bad[0]?.path, 'addressType');
  t.equal(bad[0]?.message, 'addressType: must be one of IPv4, IPv6, FQDN, got "IPv5"');
});

t.test('IPv6 addresses are made canonical, as the API server writes them; bad ones named by path', async (t) => {
  const sl = valid<EndpointSlice>(
    slice({
      addressType: 'IPv6',
      endpoints: [{ addresses: ['FD00:0:0:0:0:0:0:1'] }, { addresses: ['2001:db8:0:0:1:0:0:1'] }, { addresses: ['fd00::0:10.1.2.3'] }],
    }),
  );
  t.same(
    sl.endpoints.map((e) => e.addresses[0]),
    ['fd00::1', '2001:db8::1:0:0:1', 'fd00::a01:203'],
  );
  const s = valid<Service>(
    service({
      clusterIP: 'FD00:10:96::0001',
      clusterIPs: ['fd00:10:96::1', '10.96.0.1'],
      ipFamilies: ['IPv6', 'IPv4'],
      ipFamilyPolicy: 'PreferDualStack',
      externalIPs: ['2001:DB8::7'],
      loadBalancerSourceRanges: ['2001:db8:0::/32'],
    }),
  );
  t.equal(s.spec.clusterIP, 'fd00:10:96::1');
  t.same(s.spec.externalIPs, ['2001:db8::7']);
  t.same(s.spec.loadBalancerSourceRanges, ['2001:db8::/32']);
  const bad = problems(
    slice({
      addressType: 'IPv6',
      endpoints: [
        { addresses: ['::ffff:10.0.0.1'] },
        { addresses: ['fd00::1%eth0'] },
        { addresses: ['fd00:::1'] },
        { addresses: ['1:2:3:4:5:6:7:8:9'] },
      ],
    }),
  );
  t.same(
    bad.map((p) => p.path),
    ['endpoints[0].addresses[0]', 'endpoints[1].addresses[0]', 'endpoints[2].addresses[0]', 'endpoints[3].addresses[0]'],
  );
  t.equal(bad[0]?.message, 'endpoints[0].addresses[0]: must be an IPv6 address (addressType is IPv6), got "::ffff:10.0.0.1"');
});

t.test('dual-stack fields follow the API server rules', async (t) => {
  const paths = (spec: Record<string, unknown>) => problems(service(spec)).map((p) => [p.path, p.message]);
  t.same(paths({ clusterIP: '10.96.0.1', clusterIPs: ['10.96.0.1', '10.96.0.2'] }), [
    ['spec.clusterIPs', 'spec.clusterIPs: may hold at most one address of each family, got a list'],
  ]);
  t.same(paths({ clusterIP: '10.96.0.1', clusterIPs: ['10.96.0.1', 'fd00::1'], ipFamilies: ['IPv6', 'IPv4'] }), [
    ['spec.clusterIPs[0]', 'spec.clusterIPs[0]: is IPv4 but ipFamilies[0] is IPv6, got "10.96.0.1"'],
    ['spec.clusterIPs[1]', 'spec.clusterIPs[1]: is IPv6 but ipFamilies[1] is IPv4, got "fd00::1"'],
  ]);
  t.same(paths({ clusterIP: '10.96.0.1', clusterIPs: ['10.96.0.1', 'fd00::1'], ipFamilyPolicy: 'SingleStack' }), [
    ['spec.ipFamilyPolicy', 'spec.ipFamilyPolicy: is SingleStack but the Service has two families, got "SingleStack"'],
  ]);
  t.same(
    paths({ clusterIP: '10.96.0.1', ipFamilies: ['IPv4', 'IPv4'] }).map((p) => p[0]),
    ['spec.ipFamilies'],
  );
  t.same(
    paths({ clusterIP: '10.96.0.1', ipFamilyPolicy: 'DualStack' }).map((p) => p[0]),
    ['spec.ipFamilyPolicy'],
  );
});

t.test('port 0 and port 70000 are errors, on Services and on EndpointSlices', async (t) => {
  const svc = problems(
    service({
      clusterIP: '10.96.0.1',
      ports: [
        { name: 'a', port: 0 },
        { name: 'b', port: 70000 },
      ],
    }),
  );
  t.same(
    svc.map((p) => [p.path, p.message]),
    [
      ['spec.ports[0].port', 'spec.ports[0].port: must be between 1 and 65535, got 0'],
      ['spec.ports[1].port', 'spec.ports[1].port: must be between 1 and 65535, got 70000'],
    ],
  );
  const es = problems(slice({ addressType: 'IPv4', endpoints: [], ports: [{ port: 0 }, { name: 'x', port: 70000 }] }));
  t.same(
    es.map((p) => p.path),
    ['ports[0].port', 'ports[1].port'],
  );
  const nodePort = problems(service({ type: 'NodePort', clusterIP: '10.96.0.1', ports: [{ port: 80, nodePort: 70000 }] }));
  t.equal(nodePort[0]?.path, 'spec.ports[0].nodePort');
});

t.test('a missing name is reported and the object is still named as well as possible', async (t) => {
  const ps = problems(service({ clusterIP: '10.96.0.1', ports: [{ port: 80 }] }, { namespace: 'shop' }));
  t.equal(ps.length, 1);
  t.match(ps[0], { kind: 'Service', namespace: 'shop', name: '', path: 'metadata.name', message: 'metadata.name: is required' });

  const noMeta = problems({ apiVersion: 'v1', kind: 'Node', status: {} });
  t.match(noMeta[0], { kind: 'Node', path: 'metadata', message: 'metadata: is required' });
});

t.test('wrong types are reported with what was found', async (t) => {
  const ps = problems(service({ clusterIP: '10.96.0.1', ports: [{ port: '80' }] }));
  t.equal(ps[0]?.message, 'spec.ports[0].port: must be an integer, got "80"');
  const notList = problems(service({ clusterIP: '10.96.0.1', ports: { port: 80 } }));
  t.equal(notList[0]?.message, 'spec.ports: must be a list, got a mapping');
  const target = problems(service({ clusterIP: '10.96.0.1', ports: [{ port: 80, targetPort: true }] }));
  t.equal(target[0]?.message, 'spec.ports[0].targetPort: must be a port number or a port name, got true');
  const cond = problems(slice({ addressType: 'IPv4', endpoints: [{ addresses: ['10.0.0.1'], conditions: { ready: 'yes' } }] }));
  t.equal(cond[0]?.path, 'endpoints[0].conditions.ready');
  const label = problems(service({ clusterIP: '10.96.0.1' }, { name: 'web', labels: { 'kubernetes.io/service-name': 1 } }));
  t.equal(label[0]?.path, 'metadata.labels["kubernetes.io/service-name"]');
});

t.test('enums, IPs and CIDRs are strict', async (t) => {
  const ps = problems(
    service({
      type: 'Ingress',
      clusterIP: '10.96.0.999',
      ports: [{ port: 80, protocol: 'tcp' }],
      externalIPs: ['not-an-ip'],
      loadBalancerSourceRanges: ['10.0.0.0/33'],
      sessionAffinity: 'Sticky',
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 86401 } },
      externalTrafficPolicy: 'Nearby',
    }),
  );
  t.same(ps.map((p) => p.path).sort(), [
    'spec.clusterIP',
    'spec.externalIPs[0]',
    'spec.externalTrafficPolicy',
    'spec.loadBalancerSourceRanges[0]',
    'spec.ports[0].protocol',
    'spec.sessionAffinity',
    'spec.sessionAffinityConfig.clientIP.timeoutSeconds',
    'spec.type',
  ]);
  t.ok(ps.every((p) => p.severity === 'error' && p.kind === 'Service' && p.name === 'web'));
});

t.test('Kubernetes defaults are filled in and unknown fields pass', async (t) => {
  const svc = valid<Service>({
    ...service({
      clusterIP: '10.96.0.1',
      ports: [{ port: 80, targetPort: 'http', appProtocol: 'http' }],
      externalTrafficPolicy: 'Global',
      sessionAffinity: 'ClientIP',
      loadBalancerSourceRanges: [' 10.0.0.0/8 '],
      ipFamilyPolicy: 'SingleStack',
    }),
    status: { loadBalancer: {}, conditions: [] },
    whatever: { nested: true },
  });
  t.equal(svc.spec.type, 'ClusterIP');
  t.same(svc.spec.ports[0], { name: '', protocol: 'TCP', port: 80, targetPort: 'http' });
  t.equal(svc.spec.externalTrafficPolicy, 'Cluster', 'legacy Global means Cluster');
  t.equal(svc.spec.internalTrafficPolicy, 'Cluster');
  t.same(svc.spec.loadBalancerSourceRanges, ['10.0.0.0/8'], 'blanks trimmed');
  t.same(svc.spec.clusterIPs, []);

  const withTimeout = valid<Service>(
    service({ clusterIP: '10.96.0.1', sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: {} } }),
  );
  t.equal(withTimeout.spec.sessionAffinityConfig?.clientIP?.timeoutSeconds, 10800);

  const noNamespace = valid<Service>(service({ clusterIP: 'None' }, { name: 'web' }));
  t.equal(noNamespace.metadata.namespace, 'default', 'kubectl puts namespace-less manifests in default');
});

t.test('EndpointSlice conditions follow the API nil semantics', async (t) => {
  const es = valid<EndpointSlice>(
    slice({
      addressType: 'IPv4',
      endpoints: [
        { addresses: ['10.0.0.1'] },
        { addresses: ['10.0.0.2'], conditions: { ready: false } },
        { addresses: ['10.0.0.3'], conditions: { ready: null, serving: false, terminating: null } },
        { addresses: ['10.0.0.4'], conditions: { ready: false, serving: true, terminating: true }, nodeName: 'n1', zone: 'z' },
      ],
      ports: null,
    }),
  );
  t.same(
    es.endpoints.map((e) => e.conditions),
    [
      { ready: true, serving: true, terminating: false },
      { ready: false, serving: false, terminating: false },
      { ready: true, serving: false, terminating: false },
      { ready: false, serving: true, terminating: true },
    ],
  );
  t.equal(es.endpoints[3]?.nodeName, 'n1');
  t.same(es.ports, [], 'null ports (Go nil) become an empty list');
});

t.test('apiVersion and kind decide what is ours', async (t) => {
  t.equal(supportedKind({ apiVersion: 'v1', kind: 'Service' }), 'Service');
  t.equal(supportedKind({ apiVersion: 'serving.knative.dev/v1', kind: 'Service' }), undefined);
  t.equal(supportedKind({ apiVersion: 'v1', kind: 'ConfigMap' }), undefined);
  t.equal(supportedKind({ apiVersion: 'discovery.k8s.io/v1beta1', kind: 'EndpointSlice' }), 'EndpointSlice');
  const beta = problems({ apiVersion: 'discovery.k8s.io/v1beta1', kind: 'EndpointSlice', metadata: { name: 'a' }, addressType: 'IPv4' });
  t.equal(beta[0]?.message, 'apiVersion: must be discovery.k8s.io/v1, got "discovery.k8s.io/v1beta1"');
  t.match(problems('just text')[0], { path: '', message: /mapping/ });
  t.match(problems({ metadata: { name: 'x' } })[0], { path: 'kind', name: 'x' });
});

t.test('IPv4 with leading zeros is read as kube-proxy reads it (decimal) and made canonical', async (t) => {
  const svc = valid<Service>({
    ...service({
      type: 'LoadBalancer',
      clusterIP: '010.096.000.010',
      clusterIPs: ['010.096.000.010'],
      ports: [{ port: 80 }],
      externalIPs: ['010.96.110.3'],
      loadBalancerSourceRanges: [' 010.000.0.0/08 '],
    }),
    status: { loadBalancer: { ingress: [{ ip: '0203.0.113.07' }] } },
  });
  t.equal(svc.spec.clusterIP, '10.96.0.10', 'not octal: 010 is ten');
  t.same(svc.spec.clusterIPs, ['10.96.0.10'], 'and still equal to clusterIP');
  t.same(svc.spec.externalIPs, ['10.96.110.3']);
  t.same(svc.spec.loadBalancerSourceRanges, ['10.0.0.0/8']);
  t.equal(svc.status?.loadBalancer?.ingress[0]?.ip, '203.0.113.7');
  const es = valid<EndpointSlice>(
    slice({ addressType: 'IPv4', endpoints: [{ addresses: ['010.244.001.002'] }], ports: [{ name: 'http', port: 8080 }] }),
  );
  t.same(es.endpoints[0]?.addresses, ['10.244.1.2']);
  const node = valid<{ status: { addresses: Array<{ type: string; address: string }> } }>({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'node-a' },
    status: {
      addresses: [
        { type: 'InternalIP', address: '0192.168.001.010' },
        { type: 'Hostname', address: 'node-a' },
      ],
    },
  });
  t.same(node.status.addresses, [
    { type: 'InternalIP', address: '192.168.1.10' },
    { type: 'Hostname', address: 'node-a' },
  ]);

  // Still refused, as ParseIPSloppy refuses them.
  const ps = problems(
    service({
      clusterIP: '010.96.0.256',
      ports: [{ port: 80 }],
      externalIPs: ['10.96.0', '10.96.0.1.1', '0x0a.96.0.1'],
      loadBalancerSourceRanges: ['010.0.0.0/033'],
    }),
  );
  t.same(ps.map((p) => p.path).sort(), [
    'spec.clusterIP',
    'spec.externalIPs[0]',
    'spec.externalIPs[1]',
    'spec.externalIPs[2]',
    'spec.loadBalancerSourceRanges[0]',
  ]);
  t.equal(
    problems(slice({ addressType: 'IPv4', endpoints: [{ addresses: ['010.244.1.0300'] }] }))[0]?.message,
    'endpoints[0].addresses[0]: must be an IPv4 address (addressType is IPv4), got "010.244.1.0300"',
  );
});

t.test('Node addresses of IP types must be IPs', async (t) => {
  const ps = problems({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'node-a' },
    status: {
      addresses: [
        { type: 'Hostname', address: 'node-a' },
        { type: 'InternalIP', address: 'node-a' },
      ],
    },
  });
  t.same(
    ps.map((p) => [p.kind, p.namespace, p.name, p.path]),
    [['Node', '', 'node-a', 'status.addresses[1].address']],
  );
});

t.test('Service port names must tell ports apart', async (t) => {
  const ps = problems(service({ clusterIP: '10.96.0.1', ports: [{ port: 80 }, { name: 'b', port: 80 }] }));
  t.same(
    ps.map((p) => p.path),
    ['spec.ports[0].name', 'spec.ports[1].port'],
  );
});

t.test('paths render like kubectl explain', async (t) => {
  t.equal(renderPath(['spec', 'ports', 0, 'port']), 'spec.ports[0].port');
  t.equal(renderPath(['endpoints', 1, 'addresses', 0]), 'endpoints[1].addresses[0]');
  t.equal(renderPath(['metadata', 'labels', 'app.kubernetes.io/name']), 'metadata.labels["app.kubernetes.io/name"]');
  t.equal(renderPath([]), '');
});
