// svcmap.io/lb-mode and --lb-mode: which frontends' entries carry SVC_F_DSR.
// dsr: every NodePort, LoadBalancer and externalIP frontend, TCP and UDP;
// hybrid: their TCP ones; snat: none; ClusterIP never. The annotation wins
// over the node's default; a bad value is a warning on the Service's
// annotation (an UnknownAnnotationValue Event), the Service keeps the node's
// default and other Services are not touched.
import t from 'tap';
import { eventForProblem } from '../../src/agent/events/agent-events.ts';
import { NODE_DEFAULTS, type NodeDefaults, frontendDsr, toTarget } from '../../src/agent/loops/targets.ts';
import { type LbMode, SVC_F_DSR, SVC_F_ETP_LOCAL } from '../../src/maps/constants.ts';
import type { Service } from '../../src/model/schemas.ts';
import type { Frontend, NodeInfo } from '../../src/model/types.ts';
import { validateObject } from '../../src/model/validate.ts';
import { buildDesiredState } from './desired.ts';

const NODE: NodeInfo = { name: 'node-a', addresses: ['192.0.2.10'], addresses6: ['fd00:2::10'] };

function svc(name: string, n: number, annotations: Record<string, string>, spec: Record<string, unknown> = {}): Service {
  const r = validateObject({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: 'default', annotations },
    spec: {
      type: 'LoadBalancer',
      clusterIP: `10.96.3.${n}`,
      externalIPs: [`198.51.100.${n}`],
      ports: [
        { name: 'web', port: 80, protocol: 'TCP', nodePort: 30000 + n },
        { name: 'dns', port: 53, protocol: 'UDP', nodePort: 30000 + n },
      ],
      ...spec,
    },
    status: { loadBalancer: { ingress: [{ ip: `203.0.113.${n}` }] } },
  });
  if (!r.ok || r.obj.kind !== 'Service') throw new Error(JSON.stringify(r));
  return r.obj;
}

/** Each frontend of the Service as "TYPE PROTO scope" -> whether its entry carries SVC_F_DSR. */
function dsrByFrontend(frontends: Iterable<Frontend>, name: string, defaults: NodeDefaults = NODE_DEFAULTS): Map<string, boolean> {
  const out = new Map<string, boolean>();
  for (const f of frontends) {
    if (f.service.name !== name) continue;
    const flags = toTarget(f, defaults).flags;
    t.equal(frontendDsr(f, defaults), (flags & SVC_F_DSR) !== 0, `${f.key}: frontendDsr says what the flags hold`);
    const id = `${f.type} ${f.protocol} ${f.scope}`;
    const dsr = (flags & SVC_F_DSR) !== 0;
    // Every address of one kind agrees (node addresses, wildcard, both families).
    if (out.has(id) && out.get(id) !== dsr) throw new Error(`${id}: entries disagree`);
    out.set(id, dsr);
  }
  return out;
}

const KINDS = ['ClusterIP', 'NodePort', 'ExternalIP', 'LoadBalancer'] as const;
function expected(mode: LbMode): Map<string, boolean> {
  const out = new Map<string, boolean>();
  for (const type of KINDS)
    for (const proto of ['TCP', 'UDP'] as const) {
      const outside = type !== 'ClusterIP';
      out.set(`${type} ${proto} external`, outside && (mode === 'dsr' || (mode === 'hybrid' && proto === 'TCP')));
    }
  return out;
}

t.test('the annotation: dsr on every frontend from outside, hybrid on TCP ones, snat on none, ClusterIP never', async (t) => {
  const { state, problems } = buildDesiredState({
    services: [
      svc('dsr', 1, { 'svcmap.io/lb-mode': 'dsr' }),
      svc('hybrid', 2, { 'svcmap.io/lb-mode': ' hybrid ' }),
      svc('snat', 3, { 'svcmap.io/lb-mode': 'snat' }),
      svc('plain', 4, {}),
    ],
    slices: [],
    node: NODE,
  });
  t.same(problems, []);
  for (const mode of ['dsr', 'hybrid', 'snat'] as const) {
    t.same(dsrByFrontend(state.frontends.values(), mode), expected(mode), `svcmap.io/lb-mode: ${mode}`);
    // The annotation wins over any node default.
    for (const lbMode of ['snat', 'dsr', 'hybrid'] as const) {
      t.same(
        dsrByFrontend(state.frontends.values(), mode, { ...NODE_DEFAULTS, lbMode }),
        expected(mode),
        `${mode} under --lb-mode ${lbMode}`,
      );
    }
  }
  t.equal(
    [...state.frontends.values()].filter((f) => f.service.name === 'dsr' && f.type === 'NodePort').length,
    4,
    'NodePort: the node address and the wildcard entry, TCP and UDP',
  );
});

t.test('--lb-mode: the default of a Service without the annotation (snat unless told)', async (t) => {
  const { state } = buildDesiredState({ services: [svc('plain', 4, {})], slices: [], node: NODE });
  t.same(dsrByFrontend(state.frontends.values(), 'plain'), expected('snat'), 'no --lb-mode: snat');
  for (const lbMode of ['snat', 'dsr', 'hybrid'] as const) {
    t.same(dsrByFrontend(state.frontends.values(), 'plain', { ...NODE_DEFAULTS, lbMode }), expected(lbMode), `--lb-mode ${lbMode}`);
  }
});

t.test('both families: the IPv6 frontends get the same flag', async (t) => {
  const dual = svc(
    'dual',
    5,
    { 'svcmap.io/lb-mode': 'hybrid' },
    {
      ipFamilies: ['IPv4', 'IPv6'],
      ipFamilyPolicy: 'RequireDualStack',
      clusterIPs: ['10.96.3.5', 'fd00:96::5'],
      externalIPs: ['fd00:198::5'],
    },
  );
  const { state, problems } = buildDesiredState({ services: [dual], slices: [], node: NODE });
  t.same(problems, []);
  const v6 = [...state.frontends.values()].filter((f) => f.ip.includes(':') && f.type !== 'ClusterIP');
  t.ok(v6.some((f) => f.type === 'NodePort') && v6.some((f) => f.type === 'ExternalIP'), 'IPv6 NodePort and externalIP frontends');
  for (const f of v6) t.equal(frontendDsr(f), f.protocol === 'TCP', `${f.key}: hybrid`);
});

t.test('externalTrafficPolicy Local: the flag is set as asked, on both scopes (harmless: no remote backend)', async (t) => {
  const local = svc('local', 6, { 'svcmap.io/lb-mode': 'dsr' }, { externalTrafficPolicy: 'Local' });
  const { state } = buildDesiredState({ services: [local], slices: [], node: NODE });
  const outside = [...state.frontends.values()].filter((f) => f.type !== 'ClusterIP');
  t.ok(outside.length > 0);
  for (const f of outside) {
    const flags = toTarget(f).flags;
    t.ok(flags & SVC_F_DSR, `${f.key}: dsr`);
    if (f.scope === 'external') t.ok(flags & SVC_F_ETP_LOCAL, `${f.key}: and ETP=Local`);
  }
});

t.test('a bad value: a warning naming the Service and the annotation; the node default applies; others unaffected', async (t) => {
  const { state, problems } = buildDesiredState({
    services: [svc('bad', 7, { 'svcmap.io/lb-mode': 'direct' }), svc('good', 8, { 'svcmap.io/lb-mode': 'dsr' })],
    slices: [],
    node: NODE,
  });
  t.equal(problems.length, 1);
  t.match(problems[0], {
    kind: 'Service',
    namespace: 'default',
    name: 'bad',
    severity: 'warning',
    path: 'metadata.annotations["svcmap.io/lb-mode"]',
  });
  t.match(problems[0]!.message, /unknown value "direct"; accepted values: snat, dsr, hybrid; using the node's default/);
  t.match(eventForProblem(problems[0]!), { reason: 'UnknownAnnotationValue', regarding: { kind: 'Service', name: 'bad' } });
  t.same(dsrByFrontend(state.frontends.values(), 'bad'), expected('snat'), 'programmed, with the default (snat)');
  t.same(
    dsrByFrontend(state.frontends.values(), 'bad', { ...NODE_DEFAULTS, lbMode: 'hybrid' }),
    expected('hybrid'),
    'with --lb-mode hybrid: hybrid',
  );
  t.same(dsrByFrontend(state.frontends.values(), 'good'), expected('dsr'), 'the other Service keeps its dsr');
});
