// hostPort mappings from Pod objects to frontends (src/model/host-ports.ts,
// through the incremental model): which Pods count, the addresses each
// mapping serves per family, the NodePort range, conflicts between Pods and
// with Services, and Pod validation errors that name the field.
import t from 'tap';
import { IncrementalModel } from '../../src/model/incremental.ts';
import { parsePortRange, podOwner } from '../../src/model/host-ports.ts';
import type { Pod, Service } from '../../src/model/schemas.ts';
import type { Frontend, NodeInfo, Problem } from '../../src/model/types.ts';
import { validateObject } from '../../src/model/validate.ts';

const NODE: NodeInfo = { name: 'n1', addresses: ['192.168.1.10'], addresses6: ['fd00:1::10'] };

function pod(
  name: string,
  ports: object[],
  extra: { created?: string; ips?: string[]; phase?: string; node?: string; hostNetwork?: boolean } = {},
) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default', creationTimestamp: extra.created ?? '2026-01-01T00:00:00Z' },
    spec: { nodeName: extra.node ?? 'n1', hostNetwork: extra.hostNetwork ?? false, containers: [{ name: 'c', image: 'x', ports }] },
    status: { phase: extra.phase ?? 'Running', podIPs: (extra.ips ?? ['10.244.0.5', 'fd00:10:244::5']).map((ip) => ({ ip })) },
  };
}

function valid(raw: unknown): Pod {
  const r = validateObject(raw, 'test');
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.obj as Pod;
}

function model(...pods: unknown[]): IncrementalModel {
  const m = new IncrementalModel();
  m.setNode(NODE);
  for (const p of pods) m.upsertPod(valid(p));
  return m;
}

const keys = (list: readonly Frontend[] | undefined) =>
  (list ?? []).map((f) => `${f.key} -> ${f.backends.map((b) => `${b.ip}:${b.port}`).join(',')}`);
const podProblems = (problems: Map<string, Problem[]>, name: string) => (problems.get(`Pod default/${name}`) ?? []).map((p) => p.message);

t.test('hostIP "": every node address and the wildcard, both families, each to the Pod IP of its family', async (t) => {
  const m = model(
    pod('web', [
      { containerPort: 8080, hostPort: 8081 },
      { containerPort: 53, hostPort: 5353, protocol: 'UDP' },
    ]),
  );
  const { services } = m.takeChanges();
  const list = services.get(podOwner('default', 'web'))!;
  t.same(keys(list), [
    '192.168.1.10:8081/TCP -> 10.244.0.5:8080',
    '0.0.0.0:8081/TCP -> 10.244.0.5:8080',
    '[fd00:1::10]:8081/TCP -> fd00:10:244::5:8080',
    '[::]:8081/TCP -> fd00:10:244::5:8080',
    '192.168.1.10:5353/UDP -> 10.244.0.5:53',
    '0.0.0.0:5353/UDP -> 10.244.0.5:53',
    '[fd00:1::10]:5353/UDP -> fd00:10:244::5:53',
    '[::]:5353/UDP -> fd00:10:244::5:53',
  ]);
  t.ok(list.every((f) => f.type === 'HostPort' && f.externalLocal && f.backends[0]!.local && f.service.kind === 'Pod'));
  t.same(
    list.filter((f) => f.wildcard).map((f) => f.ip),
    ['0.0.0.0', '::', '0.0.0.0', '::'],
  );
  m.setNodePortAddresses({ kind: 'all' }, ['172.16.5.1']);
  t.ok(
    keys(m.takeChanges().services.get(podOwner('default', 'web'))).includes('172.16.5.1:8081/TCP -> 10.244.0.5:8080'),
    "the interfaces' addresses too",
  );
});

t.test('a hostIP: that address only, of its family; 127.0.0.1 is a frontend of its own', async (t) => {
  const m = model(
    pod('a', [{ containerPort: 80, hostPort: 54323, hostIP: '127.0.0.1' }]),
    pod('b', [{ containerPort: 80, hostPort: 54323, hostIP: '192.168.1.10' }], { created: '2026-01-02T00:00:00Z' }),
    pod('c', [{ containerPort: 80, hostPort: 54323, hostIP: '192.168.1.10', protocol: 'UDP' }], { created: '2026-01-03T00:00:00Z' }),
    pod('d', [{ containerPort: 80, hostPort: 9000, hostIP: 'fd00:1::10' }]),
  );
  const { services, problems } = m.takeChanges();
  t.same(keys(services.get(podOwner('default', 'a'))), ['127.0.0.1:54323/TCP -> 10.244.0.5:80']);
  t.same(keys(services.get(podOwner('default', 'b'))), ['192.168.1.10:54323/TCP -> 10.244.0.5:80']);
  t.same(keys(services.get(podOwner('default', 'c'))), ['192.168.1.10:54323/UDP -> 10.244.0.5:80']);
  t.same(keys(services.get(podOwner('default', 'd'))), ['[fd00:1::10]:9000/TCP -> fd00:10:244::5:80']);
  for (const n of ['a', 'b', 'c', 'd']) t.same(podProblems(problems, n), [], `${n}: no conflict (hostIP and protocol differ)`);
});

t.test('only Running Pods of this node with an IP and not on the host network', async (t) => {
  const m = model(
    pod('pending', [{ containerPort: 80, hostPort: 81 }], { phase: 'Pending' }),
    pod('no-ip', [{ containerPort: 80, hostPort: 82 }], { ips: [] }),
    pod('other-node', [{ containerPort: 80, hostPort: 83 }], { node: 'n2' }),
    pod('host', [{ containerPort: 80, hostPort: 84 }], { hostNetwork: true }),
    pod('v4only', [{ containerPort: 80, hostPort: 85 }], { ips: ['10.244.0.9'] }),
  );
  const { services } = m.takeChanges();
  t.same(
    [...services.entries()].filter(([, l]) => l.length).map(([k]) => k),
    [podOwner('default', 'v4only')],
  );
  t.same(keys(services.get(podOwner('default', 'v4only'))), ['192.168.1.10:85/TCP -> 10.244.0.9:80', '0.0.0.0:85/TCP -> 10.244.0.9:80']);
});

t.test('inside the NodePort range: ignored with a warning naming the field (HostPortIgnored); the range is settable', async (t) => {
  const m = model(
    pod('np', [
      { containerPort: 80, hostPort: 8080 },
      { containerPort: 81, hostPort: 30080 },
    ]),
  );
  const { services, problems } = m.takeChanges();
  t.same(keys(services.get(podOwner('default', 'np'))).length, 4, 'the port outside the range is served');
  t.same(
    problems.get('Pod default/np')!.map((p) => [p.path, p.severity, p.message]),
    [
      [
        'spec.containers[0].ports[1].hostPort',
        'warning',
        'spec.containers[0].ports[1].hostPort: 30080 is inside the NodePort range 30000-32767: the hostPort is ignored',
      ],
    ],
  );
  m.setHostPorts(true, parsePortRange('8000-8100'));
  const next = m.takeChanges();
  t.same(
    keys(next.services.get(podOwner('default', 'np'))).map((k) => k.split(' ')[0]),
    ['192.168.1.10:30080/TCP', '0.0.0.0:30080/TCP', '[fd00:1::10]:30080/TCP', '[::]:30080/TCP'],
  );
  t.match(podProblems(next.problems, 'np'), [/8080 is inside the NodePort range 8000-8100/]);
  m.setHostPorts(false, parsePortRange('8000-8100'));
  t.same(m.takeChanges().services.get(podOwner('default', 'np')), [], '--host-ports=false: nothing served');
  t.throws(() => parsePortRange('30000'), { message: /"30000" is not a port range/ });
  t.throws(() => parsePortRange('32767-30000'), { message: /first <= last/ });
});

t.test('two Pods on one hostIP:hostPort/proto: the older wins, the other gets a conflict; it takes over when the older goes', async (t) => {
  const m = model(
    pod('young', [{ containerPort: 80, hostPort: 8000 }], { created: '2026-02-01T00:00:00Z', ips: ['10.244.0.7'] }),
    pod('old', [{ containerPort: 80, hostPort: 8000 }], { created: '2026-01-01T00:00:00Z', ips: ['10.244.0.6'] }),
  );
  const { services, problems } = m.takeChanges();
  t.same(keys(services.get(podOwner('default', 'old'))), ['192.168.1.10:8000/TCP -> 10.244.0.6:80', '0.0.0.0:8000/TCP -> 10.244.0.6:80']);
  t.same(services.get(podOwner('default', 'young')) ?? [], [], 'the younger: nothing');
  const conflict = problems.get('Pod default/young')!;
  t.equal(conflict.length, 1);
  t.equal(conflict[0]!.conflict, true);
  t.match(
    conflict[0]!.message,
    /spec\.containers\[0\]\.ports\[0\]\.hostPort: 192\.168\.1\.10:8000\/TCP is already used by Pod default\/old/,
  );
  m.deletePod('default', 'old');
  const next = m.takeChanges();
  t.same(next.services.get(podOwner('default', 'old')), []);
  t.same(keys(next.services.get(podOwner('default', 'young'))), [
    '192.168.1.10:8000/TCP -> 10.244.0.7:80',
    '0.0.0.0:8000/TCP -> 10.244.0.7:80',
  ]);
  t.same(next.problems.get('Pod default/young'), [], 'the conflict is over');
  m.deletePod('default', 'young');
  const last = m.takeChanges();
  t.same(last.services.get(podOwner('default', 'young')), [], 'deleted: its frontends removed');
});

t.test('a Service holding the key keeps it; the Pod takes it when the Service goes', async (t) => {
  const svc: Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'ext', namespace: 'default', labels: {} },
    spec: { clusterIP: '10.96.0.9', externalIPs: ['192.168.1.10'], ports: [{ port: 8000, protocol: 'TCP' }] },
  } as unknown as Service;
  const m = model();
  const r = validateObject(svc);
  t.ok(r.ok);
  if (r.ok) m.upsertService(r.obj as Service);
  m.takeChanges();
  m.upsertPod(valid(pod('np', [{ containerPort: 81, hostPort: 30080 }])));
  t.equal(podProblems(m.takeChanges().problems, 'np').length, 1);
  m.deletePod('default', 'np');
  t.same(m.takeChanges().problems.get('Pod default/np'), [], "a deleted Pod's problems are cleared");
  m.upsertPod(valid(pod('p', [{ containerPort: 80, hostPort: 8000 }], { ips: ['10.244.0.6'] })));
  const { services, problems } = m.takeChanges();
  t.same(services.get(podOwner('default', 'p')) ?? [], []);
  t.match(podProblems(problems, 'p'), [/192\.168\.1\.10:8000\/TCP is already used by Service default\/ext/]);
  m.deleteService('default', 'ext');
  const next = m.takeChanges();
  t.same(keys(next.services.get(podOwner('default', 'p'))).length, 2, 'the Service gone: the Pod is served');
});

t.test('Pod validation: errors name the object and the field', async (t) => {
  const bad = pod('bad', [
    { containerPort: 80, hostPort: 70000 },
    { containerPort: 80, hostPort: 81, hostIP: 'not-an-ip' },
  ]);
  const r = validateObject(bad, 'f.yaml');
  t.equal(r.ok, false);
  if (!r.ok)
    t.same(
      r.problems.map((p) => `${p.kind} ${p.namespace}/${p.name} ${p.path}`),
      ['Pod default/bad spec.containers[0].ports[0].hostPort', 'Pod default/bad spec.containers[0].ports[1].hostIP'],
    );
  const ok = valid(pod('fine', [{ containerPort: 80 }]));
  t.same(ok.hostPorts, [], 'a port without hostPort is not kept');
});
