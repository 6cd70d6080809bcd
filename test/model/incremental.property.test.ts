// The incremental model gives the same frontends as the full builder: random
// Services and EndpointSlices (with clashing frontends, several slices per
// Service, traffic policies, node changes) are added, changed and deleted one
// at a time; after each step the union of what the incremental model emitted
// equals buildDesiredState over the same objects.
import t from 'tap';
import { buildDesiredState } from './desired.ts';
import { IncrementalModel } from '../../src/model/incremental.ts';
import { type EndpointSlice, type Service } from '../../src/model/schemas.ts';
import { validateObject } from '../../src/model/validate.ts';
import type { Frontend, NodeInfo } from '../../src/model/types.ts';

function rng(seed: number) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

function valid<T>(raw: unknown): T {
  const r = validateObject(raw);
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.obj as T;
}

function randomService(r: () => number, name: string): Service {
  const type = (['ClusterIP', 'NodePort', 'LoadBalancer'] as const)[Math.floor(r() * 3)]!;
  const ports = [
    { name: 'a', protocol: 'TCP', port: 80, targetPort: 8080, ...(type !== 'ClusterIP' ? { nodePort: 30000 + Math.floor(r() * 3) } : {}) },
  ];
  if (r() < 0.5)
    ports.push({
      name: 'b',
      protocol: 'UDP',
      port: 53,
      targetPort: 5353,
      ...(type !== 'ClusterIP' ? { nodePort: 30010 + Math.floor(r() * 3) } : {}),
    });
  const ip = `10.96.0.${1 + Math.floor(r() * 4)}`; // few IPs: clusterIP clashes happen
  return valid<Service>({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: 'default' },
    spec: {
      type,
      clusterIP: ip,
      clusterIPs: [ip],
      ports,
      ...(r() < 0.3 ? { externalIPs: [`192.168.0.${1 + Math.floor(r() * 2)}`] } : {}),
      ...(type !== 'ClusterIP' && r() < 0.4 ? { externalTrafficPolicy: 'Local' } : {}),
      ...(r() < 0.2 ? { internalTrafficPolicy: 'Local' } : {}),
      ...(r() < 0.2 ? { sessionAffinity: 'ClientIP' } : {}),
    },
    ...(type === 'LoadBalancer' ? { status: { loadBalancer: { ingress: [{ ip: `172.16.0.${1 + Math.floor(r() * 2)}` }] } } } : {}),
  });
}

function randomSlice(r: () => number, svc: string, name: string): EndpointSlice {
  const n = Math.floor(r() * 4);
  return valid<EndpointSlice>({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': svc } },
    addressType: 'IPv4',
    ports: [
      { name: 'a', protocol: 'TCP', port: 8080 },
      { name: 'b', protocol: 'UDP', port: 5353 },
    ],
    endpoints: Array.from({ length: n }, () => ({
      addresses: [`10.244.0.${1 + Math.floor(r() * 6)}`],
      conditions: { ready: r() < 0.7, serving: r() < 0.8, terminating: r() < 0.3 },
      nodeName: r() < 0.5 ? 'node-1' : 'node-2',
    })),
  });
}

const norm = (fs: Iterable<Frontend>) => [...fs].map((f) => JSON.stringify(f)).sort();

t.test('incremental equals full, step by step', async (t) => {
  for (let seed = 1; seed <= 40; seed++) {
    const r = rng(seed);
    const model = new IncrementalModel();
    const services = new Map<string, Service>();
    const slices = new Map<string, EndpointSlice>();
    let node: NodeInfo | undefined = { name: 'node-1', addresses: ['10.0.0.1'] };
    model.setNode(node);
    const emitted = new Map<string, Frontend[]>();
    for (let step = 0; step < 30; step++) {
      const roll = r();
      const svcName = `s${Math.floor(r() * 5)}`;
      if (roll < 0.35) {
        const svc = randomService(r, svcName);
        services.set(svcName, svc);
        model.upsertService(svc);
      } else if (roll < 0.45) {
        services.delete(svcName);
        model.deleteService('default', svcName);
      } else if (roll < 0.85) {
        const sliceName = `${svcName}-${Math.floor(r() * 2)}`;
        const sl = randomSlice(r, svcName, sliceName);
        slices.set(sliceName, sl);
        model.upsertSlice(sl);
      } else if (roll < 0.95) {
        const sliceName = `${svcName}-${Math.floor(r() * 2)}`;
        slices.delete(sliceName);
        model.deleteSlice('default', sliceName);
      } else {
        node = r() < 0.5 ? { name: 'node-2', addresses: ['10.0.0.2', '10.0.0.3'] } : { name: 'node-1', addresses: ['10.0.0.1'] };
        model.setNode(node);
      }
      const changes = model.takeChanges();
      for (const [id, fs] of changes.services) {
        if (fs.length) emitted.set(id, fs);
        else emitted.delete(id);
      }
      const full = buildDesiredState({ services: [...services.values()], slices: [...slices.values()], ...(node ? { node } : {}) });
      const got = norm([...emitted.values()].flat());
      const want = norm(full.state.frontends.values());
      if (JSON.stringify(got) !== JSON.stringify(want)) {
        t.same(got, want, `seed ${seed} step ${step}`);
        return;
      }
    }
  }
  t.pass('40 seeds x 30 steps agree');
});

t.test('an endpoint change recomputes one Service only', async (t) => {
  const model = new IncrementalModel();
  for (let i = 0; i < 50; i++) {
    model.upsertService(
      valid<Service>({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: `s${i}`, namespace: 'default' },
        spec: { clusterIP: `10.96.1.${i}`, ports: [{ port: 80, targetPort: 8080 }] },
      }),
    );
  }
  model.takeChanges();
  model.upsertSlice(
    valid<EndpointSlice>({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      addressType: 'IPv4',
      metadata: { name: 's7-x', namespace: 'default', labels: { 'kubernetes.io/service-name': 's7' } },
      ports: [{ name: '', protocol: 'TCP', port: 8080 }],
      endpoints: [{ addresses: ['10.244.0.9'] }],
    }),
  );
  const c = model.takeChanges();
  t.same([...c.services.keys()], ['default/s7']);
  t.equal(c.services.get('default/s7')![0]!.backends.length, 1);
});

t.test('the loser of a frontend clash takes over when the winner goes', async (t) => {
  const model = new IncrementalModel();
  const svc = (name: string) =>
    valid<Service>({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: 'default' },
      spec: { clusterIP: '10.96.0.1', ports: [{ port: 80, targetPort: 8080 }] },
    });
  model.upsertService(svc('b'));
  model.upsertService(svc('a'));
  const first = model.takeChanges();
  t.same([...first.services.keys()], ['default/a'], 'a sorts first and wins');
  t.match(JSON.stringify(first.problems.get('Service default/b')), /already used by Service default\/a/);
  model.deleteService('default', 'a');
  const second = model.takeChanges();
  t.same([...second.services.keys()].sort(), ['default/a', 'default/b']);
  t.equal(second.services.get('default/b')!.length, 1, 'b now has the frontend');
});
