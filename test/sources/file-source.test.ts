import t from 'tap';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileSource } from '../../src/sources/file/file-source.ts';
import type { Frontend, Problem } from '../../src/model/types.ts';

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

/** The source's model as of each change signal (frontends by key, and the problems it reported since the last one), as a queue. */
function recorder(src: () => FileSource) {
  const seen: Array<{ frontends: Map<string, Frontend>; problems: Problem[] }> = [];
  let wake: (() => void) | undefined;
  return {
    changed: () => {
      const changes = src().model.takeChanges();
      const frontends = new Map<string, Frontend>();
      for (const list of src().model.allFrontends().values()) for (const f of list) frontends.set(f.key, f);
      seen.push({ frontends, problems: [...changes.problems.values()].flat() });
      wake?.();
    },
    async next() {
      while (seen.length === 0) await new Promise<void>((r) => (wake = r));
      return seen.shift()!;
    },
  };
}

t.test('reads the directory at start and again after every change', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-fs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'web.yaml'), service);
  writeFileSync(join(dir, 'node.yaml'), nodeYaml);
  writeFileSync(join(dir, 'slices.yaml'), slice(['10.244.1.1']));

  const rec = recorder(() => src);
  const src: FileSource = new FileSource({ dir, nodeName: 'node-a', debounceMs: 20, changed: rec.changed });
  t.teardown(() => src.stop());
  t.notOk(src.isSynced);
  await src.start();
  t.ok(src.isSynced);

  const first = await rec.next();
  t.same(first.problems, []);
  t.same(
    [...first.frontends.keys()].sort(),
    ['0.0.0.0:30080/TCP', '10.96.0.10:80/TCP', '192.168.56.10:30080/TCP'],
    'node addresses from the Node object',
  );
  t.same(
    first.frontends.get('10.96.0.10:80/TCP')?.backends.map((b) => [b.ip, b.local]),
    [['10.244.1.1', true]],
  );

  writeFileSync(join(dir, '.slices.tmp'), slice(['10.244.1.1', '10.244.1.2']));
  renameSync(join(dir, '.slices.tmp'), join(dir, 'slices.yaml'));
  let update = await rec.next();
  // A temp-file event may be delivered as its own burst; wait for the state that has the change.
  while (update.frontends.get('10.96.0.10:80/TCP')?.backends.length !== 2) update = await rec.next();
  t.same(
    update.frontends.get('10.96.0.10:80/TCP')?.backends.map((b) => b.ip),
    ['10.244.1.1', '10.244.1.2'],
  );

  writeFileSync(join(dir, 'broken.yaml'), 'kind: Service\napiVersion: v1\nmetadata: {name: x}\nspec: {ports: [{port: 0}]}\n');
  let broken = await rec.next();
  while (broken.problems.length === 0) broken = await rec.next();
  t.match(broken.problems, [{ name: 'x', path: 'spec.ports[0].port', source: join(dir, 'broken.yaml') }]);
  t.equal(broken.frontends.size, 3, 'the valid objects are still served');
});

t.test('start fails fast on a missing directory', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-fs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const src = new FileSource({ dir: join(dir, 'nope') });
  await t.rejects(src.start(), { code: 'ENOENT' });
  t.notOk(src.isSynced);
});

t.test('an explicit NodeInfo wins over Node objects', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-fs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'all.yaml'), `${service}---\n${nodeYaml}`);
  const rec = recorder(() => src);
  const src: FileSource = new FileSource({
    dir,
    node: { name: 'node-b', addresses: ['10.0.0.2'] },
    nodeName: 'node-a',
    changed: rec.changed,
  });
  t.teardown(() => src.stop());
  await src.start();
  const { frontends } = await rec.next();
  t.ok(frontends.has('10.0.0.2:30080/TCP'));
  t.notOk(frontends.has('192.168.56.10:30080/TCP'));
});
