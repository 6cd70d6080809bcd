// Which Pods bypass the socket LB: the Pod's own svcmap.io/socket-lb wins
// over its Namespace's; host-network and finished Pods never bypass; without
// veth translation, and without a uid, a Pod keeps the socket LB with a
// warning naming it and the field; an unknown value is a warning and counts
// as absent.
import t from 'tap';
import { type BypassNamespaceInput, type BypassPodInput, BypassModel, socketLbBypass } from '../../src/model/socket-lb-bypass.ts';

function pod(
  name: string,
  o: Partial<Omit<BypassPodInput, 'metadata'>> & { namespace?: string; socketLb?: string; uid?: string } = {},
): BypassPodInput {
  const { namespace = 'default', socketLb, uid = `uid-${name}`, ...rest } = o;
  return {
    kind: 'Pod',
    metadata: { namespace, name, uid, ...(socketLb !== undefined ? { socketLb } : {}) },
    nodeName: 'node',
    hostNetwork: false,
    phase: 'Running',
    ...rest,
  };
}

function ns(name: string, socketLb?: string): [string, BypassNamespaceInput] {
  return [name, { kind: 'Namespace', metadata: { name, ...(socketLb !== undefined ? { socketLb } : {}) } }];
}

const ON = { nodeName: 'node', vethOn: true };

t.test("the Pod's value wins over its Namespace's", async (t) => {
  const r = socketLbBypass(
    [pod('a', { socketLb: 'bypass' }), pod('b'), pod('c', { namespace: 'mesh' }), pod('d', { namespace: 'mesh', socketLb: 'on' })],
    new Map([ns('default'), ns('mesh', 'bypass')]),
    ON,
  );
  t.same(
    r.pods.map((p) => `${p.namespace}/${p.name}`),
    ['default/a', 'mesh/c'],
  );
  t.same(r.pods[0]!.uid, 'uid-a');
  t.ok(
    [...r.problems.values()].every((l) => l.length === 0),
    'no problems',
  );
});

t.test("host-network, finished and other nodes' Pods never bypass", async (t) => {
  const r = socketLbBypass(
    [
      pod('host', { socketLb: 'bypass', hostNetwork: true }),
      pod('done', { socketLb: 'bypass', phase: 'Succeeded' }),
      pod('away', { socketLb: 'bypass', nodeName: 'other' }),
      pod('pending', { socketLb: 'bypass', phase: 'Pending' }),
    ],
    new Map(),
    ON,
  );
  t.same(
    r.pods.map((p) => p.name),
    ['pending'],
    'a Pending Pod bypasses (its cgroup comes before its containers)',
  );
});

t.test('without veth translation: kept on the socket LB, a SocketLbBypassIgnored warning naming the source and the flag', async (t) => {
  const r = socketLbBypass([pod('a', { socketLb: 'bypass' }), pod('b', { namespace: 'mesh' })], new Map([ns('mesh', 'bypass')]), {
    nodeName: 'node',
    vethOn: false,
  });
  t.same(r.pods, []);
  const [a] = r.problems.get('Pod default/a')!;
  t.equal(a!.reason, 'SocketLbBypassIgnored');
  t.equal(a!.path, 'metadata.annotations[svcmap.io/socket-lb]');
  t.match(a!.message, /from the Pod.*--veth-lb/);
  t.match(r.problems.get('Pod mesh/b')![0]!.message, /from its Namespace mesh/);
});

t.test('an unknown value is a warning on its object and counts as absent', async (t) => {
  const r = socketLbBypass(
    [pod('a', { namespace: 'mesh', socketLb: 'yes' }), pod('b', { namespace: 'odd' })],
    new Map([ns('mesh', 'bypass'), ns('odd', 'Bypass')]),
    ON,
  );
  t.same(
    r.pods.map((p) => p.name),
    ['a'],
    "a's Namespace applies; odd's value is no value",
  );
  t.match(r.problems.get('Pod mesh/a')![0]!.message, /"yes" is not one of bypass, on/);
  t.match(r.problems.get('Namespace odd')![0]!.message, /"Bypass" is not one of bypass, on/);
  t.equal(r.problems.get('Pod mesh/a')![0]!.severity, 'warning');
});

t.test('a Pod without a uid (a manifest) keeps the socket LB, with a warning on metadata.uid', async (t) => {
  const r = socketLbBypass([pod('a', { socketLb: 'bypass', uid: '' })], new Map(), ON);
  t.same(r.pods, []);
  t.equal(r.problems.get('Pod default/a')![0]!.path, 'metadata.uid');
});

t.test('BypassModel answers only after a change', async (t) => {
  const m = new BypassModel();
  t.same(m.take(ON)?.pods, []);
  t.equal(m.take(ON), undefined, 'nothing changed');
  m.upsertPod(pod('a', { namespace: 'mesh' }));
  t.same(m.take(ON)?.pods, []);
  m.upsertNamespace(ns('mesh', 'bypass')[1]);
  t.same(
    m.take(ON)?.pods.map((p) => p.name),
    ['a'],
  );
  m.deleteNamespace('nope');
  t.equal(m.take(ON), undefined, 'deleting what is not there changes nothing');
  m.deletePod('mesh', 'a');
  t.same(m.take(ON)?.pods, []);
});
