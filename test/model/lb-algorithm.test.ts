// svcmap.io/lb-algorithm and svcmap.io/lb-source-hash-port: only svcmap's
// annotations survive validation; a known value reaches every frontend of the
// Service and the map target; an unknown or not-yet-implemented value is a
// warning on the Service's annotation path (an UnknownAnnotationValue Event)
// and the node's default applies.
import t from 'tap';
import { eventForProblem } from '../../src/agent/events/agent-events.ts';
import { NODE_DEFAULTS, toTarget } from '../../src/agent/loops/targets.ts';
import {
  LB_ALGORITHMS,
  LB_ALG_DH,
  LB_ALG_LC,
  LB_ALG_MAGLEV,
  LB_ALG_NQ,
  LB_ALG_RANDOM,
  LB_ALG_RR,
  LB_ALG_SED,
  LB_ALG_SH,
  SVC_F_SH_PORT,
} from '../../src/maps/constants.ts';
import { buildDesiredState } from './desired.ts';
import { type Service } from '../../src/model/schemas.ts';
import { validateObject } from '../../src/model/validate.ts';

function svc(name: string, clusterIP: string, annotations: Record<string, unknown>, type = 'ClusterIP'): Service {
  const r = validateObject({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name,
      namespace: 'default',
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"big":1}', ...annotations },
    },
    spec: { type, clusterIP, ports: [{ port: 80, ...(type === 'NodePort' ? { nodePort: 30111 } : {}) }] },
  });
  if (!r.ok || r.obj.kind !== 'Service') throw new Error(JSON.stringify(r));
  return r.obj;
}

t.test("only svcmap's annotations are kept, as strings", async (t) => {
  const s = svc('a', '10.96.2.1', { 'svcmap.io/lb-algorithm': 'rr', 'svcmap.io/other': 'x', 'svcmap.io/lb-source-hash-port': 7 });
  t.same(s.metadata.annotations, { 'svcmap.io/lb-algorithm': 'rr' });
  t.notOk('annotations' in svc('b', '10.96.2.2', {}).metadata, 'none kept: no annotations field at all');
});

t.test('the annotation reaches every frontend and the map target; the default fills in', async (t) => {
  const { state, problems } = buildDesiredState({
    services: [
      svc('rr', '10.96.2.10', { 'svcmap.io/lb-algorithm': 'rr' }, 'NodePort'),
      svc('sh', '10.96.2.11', { 'svcmap.io/lb-algorithm': ' sh ', 'svcmap.io/lb-source-hash-port': 'true' }),
      svc('plain', '10.96.2.12', {}),
    ],
    slices: [],
  });
  t.same(problems, []);
  const fe = (k: string) => state.frontends.get(k)!;
  t.equal(fe('10.96.2.10:80/TCP').algorithm, 'rr');
  t.equal(fe('0.0.0.0:30111/TCP').algorithm, 'rr', 'NodePort frontends too');
  t.equal(toTarget(fe('10.96.2.10:80/TCP')).algorithm, LB_ALG_RR);
  t.equal(toTarget(fe('10.96.2.11:80/TCP')).algorithm, LB_ALG_SH);
  t.ok(toTarget(fe('10.96.2.11:80/TCP')).flags & SVC_F_SH_PORT, 'sh with the port annotation: SVC_F_SH_PORT');
  t.notOk(toTarget(fe('10.96.2.10:80/TCP')).flags & SVC_F_SH_PORT);
  t.equal(fe('10.96.2.12:80/TCP').algorithm, undefined, 'no annotation: the node decides');
  t.equal(toTarget(fe('10.96.2.12:80/TCP')).algorithm, LB_ALG_RANDOM, 'default random');
  t.equal(toTarget(fe('10.96.2.12:80/TCP'), { ...NODE_DEFAULTS, algorithm: 'sh' }).algorithm, LB_ALG_SH, '--lb-algorithm sh');
  t.equal(
    toTarget(fe('10.96.2.10:80/TCP'), { ...NODE_DEFAULTS, algorithm: 'sh' }).algorithm,
    LB_ALG_RR,
    'the annotation wins over the default',
  );
});

t.test('unknown values: a warning naming the annotation and the accepted values; the default applies', async (t) => {
  const { state, problems } = buildDesiredState({
    services: [
      svc('x', '10.96.2.20', { 'svcmap.io/lb-algorithm': 'fastest' }),
      svc('y', '10.96.2.21', { 'svcmap.io/lb-algorithm': 'maglev', 'svcmap.io/maglev-table-size': '1000' }),
      svc('z', '10.96.2.22', { 'svcmap.io/lb-source-hash-port': 'yes' }),
    ],
    slices: [],
  });
  t.equal(problems.length, 3);
  const [x, y, z] = [...problems].sort((a, b) => a.name.localeCompare(b.name));
  t.match(x, { kind: 'Service', name: 'x', severity: 'warning', path: 'metadata.annotations["svcmap.io/lb-algorithm"]' });
  t.match(x!.message, /unknown value "fastest"; accepted values: random, rr, sh, lc, sed, nq, dh, maglev; using the node's default/);
  t.match(y, { path: 'metadata.annotations["svcmap.io/maglev-table-size"]', severity: 'warning' });
  t.match(y!.message, /unknown value "1000"; accepted values \(primes\): 251, 509, .*65521; using 16381/);
  t.match(z, { path: 'metadata.annotations["svcmap.io/lb-source-hash-port"]' });
  t.match(eventForProblem(x!), { reason: 'UnknownAnnotationValue', regarding: { kind: 'Service', name: 'x' } });
  t.equal(state.frontends.get('10.96.2.20:80/TCP')!.algorithm, undefined, 'the Service is still programmed, with the default');
  t.equal(toTarget(state.frontends.get('10.96.2.21:80/TCP')!).maglevSize, 16381, 'a bad table size: maglev with the default size');
});

t.test('maglev: the annotation, the table size (a listed prime) and the node default', async (t) => {
  const { state, problems } = buildDesiredState({
    services: [
      svc('a', '10.96.2.60', { 'svcmap.io/lb-algorithm': 'maglev' }),
      svc('b', '10.96.2.61', { 'svcmap.io/lb-algorithm': 'maglev', 'svcmap.io/maglev-table-size': ' 251 ' }),
      svc('c', '10.96.2.62', { 'svcmap.io/maglev-table-size': '65521' }),
    ],
    slices: [],
  });
  t.same(problems, []);
  const fe = (ip: string) => state.frontends.get(`${ip}:80/TCP`)!;
  t.match(toTarget(fe('10.96.2.60')), { algorithm: LB_ALG_MAGLEV, maglevSize: 16381 }, 'default M');
  t.match(toTarget(fe('10.96.2.61')), { algorithm: LB_ALG_MAGLEV, maglevSize: 251 });
  t.equal(toTarget(fe('10.96.2.62')).maglevSize, undefined, 'a size alone does not make a frontend maglev');
  t.match(
    toTarget(fe('10.96.2.62'), { ...NODE_DEFAULTS, algorithm: 'maglev' }),
    { algorithm: LB_ALG_MAGLEV, maglevSize: 65521 },
    "--lb-algorithm maglev uses the Service's size",
  );
  t.equal(toTarget(fe('10.96.2.61'), { ...NODE_DEFAULTS, algorithm: 'maglev' }).maglevSize, 251);
});

t.test('lc, sed, nq and dh: accepted from the annotation and as the node default, each its own id', async (t) => {
  const names = ['lc', 'sed', 'nq', 'dh'] as const;
  const { state, problems } = buildDesiredState({
    services: names.map((n, i) => svc(n, `10.96.2.${40 + i}`, { 'svcmap.io/lb-algorithm': n })),
    slices: [],
  });
  t.same(problems, [], 'no warning for any of them');
  const ids = names.map((_, i) => toTarget(state.frontends.get(`10.96.2.${40 + i}:80/TCP`)!).algorithm);
  t.same(ids, [LB_ALG_LC, LB_ALG_SED, LB_ALG_NQ, LB_ALG_DH], "the map target carries each one's id");
  t.equal(new Set(Object.values(LB_ALGORITHMS)).size, Object.keys(LB_ALGORITHMS).length, 'no two names share an id');
  const plain = buildDesiredState({ services: [svc('p', '10.96.2.50', {})], slices: [] }).state.frontends.get('10.96.2.50:80/TCP')!;
  for (const n of names) t.equal(toTarget(plain, { ...NODE_DEFAULTS, algorithm: n }).algorithm, LB_ALGORITHMS[n], `--lb-algorithm ${n}`);
});
