// sameFrontend compares every field of a Frontend and of its Backends: the
// lists below must name every field (the compiler refuses a missing one), and
// a change to any one of them makes the frontends differ.
import t from 'tap';
import { sameFrontend, sameFrontends } from '../../src/model/same.ts';
import type { Backend, Frontend } from '../../src/model/types.ts';

const backend: Required<Backend> = {
  ip: '10.1.0.1',
  port: 8080,
  protocol: 'TCP',
  state: 'active',
  nodeName: 'n1',
  zone: 'z1',
  local: false,
};
const base: Required<Frontend> = {
  key: '10.96.0.1:80/TCP',
  ip: '10.96.0.1',
  port: 80,
  protocol: 'TCP',
  scope: 'external',
  type: 'ClusterIP',
  service: { namespace: 'default', name: 'web', portName: 'http' },
  externalLocal: false,
  internalLocal: false,
  wildcard: false,
  twoScopes: false,
  algorithm: 'random',
  sourceHashPort: false,
  maglevTableSize: 16381,
  lbMode: 'snat',
  affinityTimeoutSeconds: 0,
  sourceRanges: ['10.0.0.0/8'],
  healthCheckNodePort: 30000,
  backends: [backend],
};
/** Every field with another value. */
const changed: { [K in keyof Frontend]-?: Frontend[K] } = {
  key: '10.96.0.2:80/TCP',
  ip: '10.96.0.2',
  port: 81,
  protocol: 'UDP',
  scope: 'internal',
  type: 'NodePort',
  service: { namespace: 'default', name: 'web', portName: 'https' },
  externalLocal: true,
  internalLocal: true,
  wildcard: true,
  twoScopes: true,
  algorithm: 'rr',
  sourceHashPort: true,
  maglevTableSize: 251,
  lbMode: 'dsr',
  affinityTimeoutSeconds: 10800,
  sourceRanges: ['10.0.0.0/16'],
  healthCheckNodePort: 30001,
  backends: [],
};
const changedBackend: { [K in keyof Backend]-?: Backend[K] } = {
  ip: '10.1.0.2',
  port: 8081,
  protocol: 'UDP',
  state: 'terminating',
  nodeName: 'n2',
  zone: 'z2',
  local: true,
};
const copy = (): Frontend => structuredClone(base);

t.test('equal copies are the same, with or without optional fields', async (t) => {
  t.ok(sameFrontend(copy(), copy()));
  const { algorithm: _a, healthCheckNodePort: _h, ...lean } = copy();
  t.ok(sameFrontend(lean, { ...lean, algorithm: undefined }), 'absent and undefined are the same');
  t.ok(sameFrontends(undefined, []), 'no list and an empty list');
  t.notOk(sameFrontends(undefined, [copy()]));
  t.notOk(sameFrontends([copy()], [copy(), copy()]));
});

t.test('a change to any field of the frontend differs', async (t) => {
  for (const k of Object.keys(changed) as Array<keyof Frontend>) {
    t.notOk(sameFrontend(base, { ...copy(), [k]: changed[k] }), k);
  }
  for (const k of Object.keys(base.service) as Array<keyof Frontend['service']>) {
    t.notOk(sameFrontend(base, { ...copy(), service: { ...base.service, [k]: `${base.service[k]}x` } }), `service.${k}`);
  }
  t.notOk(sameFrontend(base, { ...copy(), sourceRanges: [...base.sourceRanges, '192.168.0.0/16'] }), 'one more source range');
});

t.test('a change to any field of a backend, or their order, differs', async (t) => {
  for (const k of Object.keys(changedBackend) as Array<keyof Backend>) {
    t.notOk(sameFrontend(base, { ...copy(), backends: [{ ...backend, [k]: changedBackend[k] }] }), `backends[0].${k}`);
  }
  const two = [backend, { ...backend, ip: '10.1.0.9' }];
  t.notOk(sameFrontend({ ...copy(), backends: two }, { ...copy(), backends: [...two].reverse() }), 'order');
});
