// The lean EndpointSlice path (src/model/lean-slice.ts) against the zod
// schema it stands in for: over random slices built from valid, odd and
// invalid values of every field, whenever the lean path answers, zod accepts
// the slice too and gives the same output (the same JSON, keys in the same
// order); plain API-server slices take the lean path; and whatever it turns
// down is still validated by zod, with zod's problems.
import t from 'tap';
import * as z from 'zod';
import { serviceObject, sliceObject } from '../../bench/manifests.ts';
import { makeServices } from '../../bench/workload.ts';
import { leanIpv4Slice } from '../../src/model/lean-slice.ts';
import { EndpointSliceSchema } from '../../src/model/schemas.ts';
import { validateObject } from '../../src/model/validate.ts';
import fc from 'fast-check';
import { ABSENT, leanAgainstZod, obj, pick } from './random-objects.ts';

const TRIGGER = 'endpoints.kubernetes.io/last-change-trigger-time';

const randomEndpoint = (): fc.Arbitrary<unknown> =>
  pick(
    [
      obj([
        [
          'addresses',
          pick([['10.244.1.5'], ['010.244.1.5'], ['10.0.0.1', '10.0.0.2'], [], ['fd00::1'], ['10.0.0.256'], [5], '10.0.0.1', ABSENT]),
        ],
        [
          'conditions',
          pick([
            { ready: true, serving: true, terminating: false },
            ABSENT,
            null,
            {},
            { ready: false },
            { ready: null },
            { ready: false, serving: true, terminating: true },
            { serving: false },
            { ready: 'yes' },
            [],
          ]),
        ],
        ['nodeName', pick([ABSENT, 'node-a', null, 5, ''])],
        ['zone', pick([ABSENT, 'zone-a', null, 7])],
        [
          'hints',
          pick([
            ABSENT,
            { forZones: [{ name: 'zone-a' }] },
            { forZones: [{ name: 'a' }, { name: 'b', extra: 1 }] },
            null,
            {},
            { forZones: [] },
            { forZones: null },
            { forZones: [{}] },
            { forZones: [{ name: 3 }] },
            { forNodes: [{ name: 'node-a' }] },
            { forZones: [{ name: 'zone-a' }], forNodes: [{ name: 'node-a' }, { name: 'node-b' }] },
            { forNodes: [] },
            { forNodes: null },
            { forNodes: [{ name: 1 }] },
          ]),
        ],
        ['targetRef', pick([ABSENT, { kind: 'Pod', name: 'p' }])],
      ]),
      null,
      'x',
      [],
    ],
    0.9,
  );

function randomSlice(): fc.Arbitrary<unknown> {
  return obj([
    ['apiVersion', pick(['discovery.k8s.io/v1', 'discovery.k8s.io/v1beta1', ABSENT])],
    ['kind', pick(['EndpointSlice', 'Service', ABSENT])],
    ['addressType', pick(['IPv4', 'IPv6', 'FQDN', ABSENT, 'ipv4'])],
    [
      'metadata',
      pick(
        [
          obj([
            ['name', pick(['web-abc12', 'a', 'a.b-c', 'A', '', '-a', 'a'.repeat(253), 'a'.repeat(254), 5, ABSENT])],
            ['namespace', pick(['shop', 'default', ABSENT, null, 'Bad', '', 'a'.repeat(64)])],
            ['labels', pick([{ 'kubernetes.io/service-name': 'web' }, {}, ABSENT, null, { a: 1 }, []])],
            [
              'annotations',
              pick([
                ABSENT,
                { [TRIGGER]: '2026-01-01T00:00:01Z' },
                { [TRIGGER]: 'not a date' },
                { [TRIGGER]: 5 },
                { other: 'x' },
                null,
                [],
              ]),
            ],
            ['managedFields', pick([ABSENT, [{ manager: 'm' }]])],
          ]),
          ABSENT,
          null,
          'meta',
        ],
        0.9,
      ),
    ],
    [
      'ports',
      pick([
        fc.tuple(
          obj([
            ['name', pick(['http', '', ABSENT, 'Bad', null, 'a'.repeat(64)])],
            ['port', pick([8080, ABSENT, null, 0, 65535, 65536, 8.5, '80'])],
            ['protocol', pick(['TCP', 'UDP', 'SCTP', ABSENT, null, 'tcp'])],
            ['appProtocol', pick([ABSENT, 'http'])],
          ]),
        ),
        ABSENT,
        null,
        [],
        [
          { name: 'a', port: 80 },
          { name: 'b', port: 81, protocol: 'UDP' },
        ],
        ['x'],
      ]),
    ],
    ['endpoints', pick([fc.array(randomEndpoint(), { maxLength: 3 }), ABSENT, null, [], 'e'])],
  ]);
}

t.test('whenever the lean path answers, zod agrees, with the same output', async (t) => {
  leanAgainstZod(t, 20_000, randomSlice(), leanIpv4Slice, EndpointSliceSchema);
});

t.test('API-server slices take the lean path; what it turns down is validated by zod', async (t) => {
  const [s] = makeServices(1, 10);
  const plain = JSON.parse(JSON.stringify(sliceObject(s!, new Date('2026-01-01T00:00:00Z'))));
  const l = leanIpv4Slice(plain);
  t.ok(l, "the bench's slice (the API server's shape) is lean");
  t.same(l, z.parse(EndpointSliceSchema, plain), "with zod's output");
  t.equal(
    (l?.metadata as { lastChangeTriggerTime?: number } | undefined)?.lastChangeTriggerTime,
    Date.parse('2026-01-01T00:00:00Z'),
    'the trigger time read',
  );
  t.equal(leanIpv4Slice(JSON.parse(JSON.stringify(serviceObject(s!)))), undefined, 'a Service: not a slice');

  const bad = structuredClone(plain);
  bad.endpoints[3].addresses = ['10.0.0.300'];
  t.equal(leanIpv4Slice(bad), undefined, 'a bad address: not lean');
  const r = validateObject(bad, 'api');
  t.notOk(r.ok, 'refused');
  t.match(
    !r.ok && r.problems,
    [{ kind: 'EndpointSlice', name: plain.metadata.name, path: 'endpoints[3].addresses[0]', message: /IPv4/ }],
    "zod's problem, naming the field",
  );
  const v = validateObject(plain, 'api');
  t.ok(v.ok && v.obj.kind === 'EndpointSlice', 'validateObject accepts the plain slice');
});
