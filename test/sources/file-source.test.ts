import t from 'tap';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileSource } from '../../src/sources/file/file-source.ts';
import type { DesiredState, Problem } from '../../src/model/types.ts';

const service = `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  type: NodePort
  clusterIP: 10.96.0.10
  ports:
  - name: http
    port: 80
    nodePort: 30080
`;

const slice = (ips: string[]) => `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
ports:
- name: http
  port: 8080
endpoints:
${ips.map((ip) => `- addresses: ["${ip}"]\n  nodeName: node-a`).join('\n')}
`;

const nodeYaml = `apiVersion: v1
kind: Node
metadata:
  name: node-a
status:
  addresses:
  - type: InternalIP
    address: 192.168.56.10
`;

/** Emissions as a queue the test awaits one by one. */
function recorder() {
  const seen: Array<{ state: DesiredState; problems: Problem[] }> = [];
  let wake: (() => void) | undefined;
  return {
    listener: (state: DesiredState, problems: Problem[]) => {
      seen.push({ state, problems });
      wake?.();
    },
    async next() {
      while (seen.length === 0) await new Promise<void>((r) => (wake = r));
      return seen.shift()!;
    },
  };
}

t.test('emits a state at start and again after every change', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-fs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'web.yaml'), service);
  writeFileSync(join(dir, 'node.yaml'), nodeYaml);
  writeFileSync(join(dir, 'slices.yaml'), slice(['10.244.1.1']));

  const src = new FileSource({ dir, nodeName: 'node-a', debounceMs: 20 });
  t.teardown(() => src.stop());
  const rec = recorder();
  await src.start(rec.listener);

  const first = await rec.next();
  t.same(first.problems, []);
  t.same([...first.state.frontends.keys()], ['0.0.0.0:30080/TCP', '10.96.0.10:80/TCP', '192.168.56.10:30080/TCP'], 'node addresses from the Node object');
  t.same(first.state.frontends.get('10.96.0.10:80/TCP')?.backends.map((b) => [b.ip, b.local]), [['10.244.1.1', true]]);

  writeFileSync(join(dir, '.slices.tmp'), slice(['10.244.1.1', '10.244.1.2']));
  renameSync(join(dir, '.slices.tmp'), join(dir, 'slices.yaml'));
  let update = await rec.next();
  // A temp-file event may be delivered as its own burst; wait for the state that has the change.
  while (update.state.frontends.get('10.96.0.10:80/TCP')?.backends.length !== 2) update = await rec.next();
  t.same(update.state.frontends.get('10.96.0.10:80/TCP')?.backends.map((b) => b.ip), ['10.244.1.1', '10.244.1.2']);

  writeFileSync(join(dir, 'broken.yaml'), 'kind: Service\napiVersion: v1\nmetadata: {name: x}\nspec: {ports: [{port: 0}]}\n');
  let broken = await rec.next();
  while (broken.problems.length === 0) broken = await rec.next();
  t.match(broken.problems, [{ name: 'x', path: 'spec.ports[0].port', source: join(dir, 'broken.yaml') }]);
  t.equal(broken.state.frontends.size, 3, 'the valid objects are still served');
});

t.test('start fails fast on a missing directory', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-fs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const src = new FileSource({ dir: join(dir, 'nope') });
  await t.rejects(src.start(() => {}), { code: 'ENOENT' });
});

t.test('an explicit NodeInfo wins over Node objects', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-fs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'all.yaml'), `${service}---\n${nodeYaml}`);
  const src = new FileSource({ dir, node: { name: 'node-b', addresses: ['10.0.0.2'] }, nodeName: 'node-a' });
  t.teardown(() => src.stop());
  const rec = recorder();
  await src.start(rec.listener);
  const { state } = await rec.next();
  t.ok(state.frontends.has('10.0.0.2:30080/TCP'));
  t.notOk(state.frontends.has('192.168.56.10:30080/TCP'));
});
