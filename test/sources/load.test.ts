import t, { type Test } from 'tap';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isManifestName, loadManifestDir, loadManifestFile, type LoadResult, objectKeyOf } from '../../src/sources/file/load.ts';
import { sameValue } from '../../src/sources/file/same-value.ts';
import { flattenLists, parseManifest } from '../../src/sources/file/parse.ts';
import { buildDesiredState } from '../model/desired.ts';
import { nodeInfoFromNode } from '../../src/model/node.ts';
import type { EndpointSlice, Service } from '../../src/model/schemas.ts';

const fixtures = fileURLToPath(new URL('../fixtures/manifests/', import.meta.url));

function ids(r: LoadResult): string[] {
  return r.objects.map(({ obj }) => `${obj.kind} ${'namespace' in obj.metadata ? obj.metadata.namespace : ''}/${obj.metadata.name}`).sort();
}

function build(r: LoadResult) {
  const services: Service[] = [];
  const slices: EndpointSlice[] = [];
  let node;
  for (const { obj } of r.objects) {
    if (obj.kind === 'Service') services.push(obj);
    else if (obj.kind === 'EndpointSlice') slices.push(obj);
    else if (obj.kind === 'Node') node = nodeInfoFromNode(obj);
  }
  return buildDesiredState(node === undefined ? { services, slices } : { services, slices, node });
}

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-load-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const svcYaml = (name: string, ip: string) => `apiVersion: v1
kind: Service
metadata:
  name: ${name}
spec:
  clusterIP: ${ip}
  ports:
  - port: 80
`;

t.test('kubectl output: single documents, multi-document files, List and typed lists', async (t) => {
  const r = await loadManifestDir(join(fixtures, 'basic'));
  t.same(r.problems, []);
  t.same(ids(r), [
    'EndpointSlice apps/api-5kq8z',
    'EndpointSlice apps/multi-7xq2k',
    'EndpointSlice apps/multi-p9w4d',
    'EndpointSlice default/web-abc12',
    'EndpointSlice default/web-def34',
    'Node /node-a',
    'Service apps/api',
    'Service apps/multi',
    'Service default/web',
  ]);
  const api = r.objects.find((o) => o.obj.metadata.name === 'api-5kq8z');
  t.match(api, { obj: { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice' }, source: /api-endpointslices\.yaml$/ });
  t.notOk(JSON.stringify(r.objects).includes('managedFields'), 'unused fields are dropped');

  const { state, problems } = build(r);
  t.same(problems, []);
  const summary = Object.fromEntries([...state.frontends.values()].map((f) => [f.key, f.backends.map((b) => `${b.ip}:${b.port}`)]));
  t.same(summary, {
    '0.0.0.0:30443/TCP': ['10.244.1.40:8443'],
    '0.0.0.0:30443/TCP/internal': ['10.244.1.40:8443', '10.244.2.40:8443'],
    '10.96.10.10:80/TCP': ['10.244.1.12:8080', '10.244.3.4:8080'],
    '10.96.20.20:53/UDP': ['10.244.3.30:5353'],
    '10.96.20.20:80/TCP': ['10.244.1.20:8080', '10.244.2.20:8080'],
    '10.96.30.30:443/TCP': ['10.244.1.40:8443', '10.244.2.40:8443'],
    '192.168.56.10:30443/TCP': ['10.244.1.40:8443'],
    '192.168.56.10:30443/TCP/internal': ['10.244.1.40:8443', '10.244.2.40:8443'],
    '203.0.113.10:30443/TCP': ['10.244.1.40:8443'],
    '203.0.113.10:30443/TCP/internal': ['10.244.1.40:8443', '10.244.2.40:8443'],
  });
  t.equal(state.frontends.get('10.96.20.20:53/UDP')?.affinityTimeoutSeconds, 600);
});

t.test('broken manifests: each problem names its file, the rest still loads', async (t) => {
  const dir = join(fixtures, 'broken');
  const r = await loadManifestDir(dir);
  t.same(ids(r), [
    'EndpointSlice default/good-1',
    'EndpointSlice default/web-good',
    'Service default/dup',
    'Service default/good',
    'Service default/other',
    'Service default/web',
  ]);
  const by = (file: string) => r.problems.filter((p) => p.source === join(dir, file));

  const syntax = by('01-syntax.yaml');
  t.equal(syntax.length, 1);
  t.match(syntax[0], { severity: 'error', message: /^YAML syntax error at line 19, column \d+ \(document 2\): / });

  t.match(by('02-web.yaml'), [
    { kind: 'EndpointSlice', namespace: 'default', name: 'web-bad', path: 'endpoints[1].addresses[0]', severity: 'error' },
  ]);
  t.equal(by('02-web.yaml').length, 1);

  t.match(by('04-dup.yaml'), [{ kind: 'Service', name: 'dup', severity: 'warning', message: /03-dup\.yaml/ }]);
  const dup = r.objects.find((o) => o.obj.metadata.name === 'dup');
  t.match(dup, { source: /04-dup\.yaml$/, obj: { spec: { ports: [{ port: 81 }] } } }, 'the later file wins');

  t.match(by('05-bad-port.yaml'), [{ name: 'badport', path: 'spec.ports[0].port', message: /got 70000/ }]);
  t.equal(r.problems.length, 4);

  const { state, problems } = build(r);
  t.same(problems, []);
  t.same(
    state.frontends.get('10.96.40.10:80/TCP')?.backends.map((b) => b.ip),
    ['10.244.0.10'],
    'web keeps the backends of its valid slice',
  );
  t.same([...state.frontends.keys()], ['10.96.40.1:80/TCP', '10.96.40.10:80/TCP', '10.96.40.20:81/TCP', '10.96.40.31:53/UDP']);
});

t.test('only manifest files are read, following symlinks, not recursing', async (t) => {
  const dir = tempDir(t);
  const files: Record<string, string> = {
    'a.yaml': svcYaml('a', '10.96.0.1'),
    'e.yml': svcYaml('e', '10.96.0.5'),
    'f.json': JSON.stringify({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'f' },
      spec: { clusterIP: '10.96.0.6', ports: [{ port: 80 }] },
    }),
    'UPPER.YAML': svcYaml('upper', '10.96.0.7'),
    '.hidden.yaml': svcYaml('hidden', '10.96.1.1'),
    'b.yaml~': svcYaml('backup', '10.96.1.2'),
    '.#c.yaml': svcYaml('lock', '10.96.1.3'),
    '.d.yaml.swp': svcYaml('swap', '10.96.1.4'),
    'g.yaml.swp': svcYaml('swap2', '10.96.1.5'),
    '#h.yaml#': svcYaml('autosave', '10.96.1.6'),
    'notes.txt': svcYaml('text', '10.96.1.7'),
  };
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  mkdirSync(join(dir, 'sub.yaml'));
  writeFileSync(join(dir, 'sub.yaml', 'x.yaml'), svcYaml('nested', '10.96.1.8'));
  // A ConfigMap volume: visible names are symlinks into ..data/.
  mkdirSync(join(dir, '..2025_01_01'));
  writeFileSync(join(dir, '..2025_01_01', 'cm.yaml'), svcYaml('configmap', '10.96.0.8'));
  symlinkSync('..2025_01_01', join(dir, '..data'));
  symlinkSync(join('..data', 'cm.yaml'), join(dir, 'cm.yaml'));
  symlinkSync('missing.yaml', join(dir, 'dangling.yaml'));

  const r = await loadManifestDir(dir);
  t.same(r.problems, []);
  t.same(ids(r), ['Service default/a', 'Service default/configmap', 'Service default/e', 'Service default/f', 'Service default/upper']);
  t.ok(isManifestName('x.yml'));
  t.notOk(isManifestName('x.yaml.bak'));
});

t.test('odd documents', async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, 'empty.yaml'), '');
  writeFileSync(join(dir, 'comments.yaml'), '# nothing here\n---\n');
  writeFileSync(join(dir, 'scalar.yaml'), 'just a string\n');
  writeFileSync(join(dir, 'nokind.yaml'), 'apiVersion: v1\nmetadata:\n  name: x\n');
  writeFileSync(join(dir, 'twice.yaml'), `${svcYaml('same', '10.96.0.1')}---\n${svcYaml('same', '10.96.0.2')}`);
  writeFileSync(join(dir, 'alias.yaml'), 'a: *nope\n');
  const r = await loadManifestDir(dir);
  t.same(ids(r), ['Service default/same']);
  t.match(r.objects[0], { obj: { spec: { clusterIP: '10.96.0.2' } } });
  const msgs = r.problems.map((p) => `${p.severity} ${p.source?.slice(dir.length + 1)} ${p.path} ${p.message}`);
  t.match(msgs, [
    /^error alias\.yaml +YAML (syntax )?error at line 1/,
    /^error nokind\.yaml kind kind: is required$/,
    /^error scalar\.yaml +must be a mapping/,
    /^warning twice\.yaml +also defined earlier in the same file/,
  ]);
  t.equal(msgs.length, 4);
});

t.test('a missing directory is an error, not an empty state', async (t) => {
  const dir = tempDir(t);
  await t.rejects(loadManifestDir(join(dir, 'nope')), { code: 'ENOENT' });
});

t.test('List flattening', async (t) => {
  t.same(
    flattenLists({
      apiVersion: 'v1',
      kind: 'List',
      items: [
        { apiVersion: 'v1', kind: 'Service', metadata: { name: 'a' } },
        {
          apiVersion: 'v1',
          kind: 'ServiceList',
          items: [{ metadata: { name: 'b' } }, { kind: 'Service', apiVersion: 'v1', metadata: { name: 'c' } }],
        },
      ],
    }),
    [
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'a' } },
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'b' } },
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'c' } },
    ],
  );
  t.same(flattenLists({ kind: 'ServiceList', apiVersion: 'v1', items: null }), []);
  t.same(
    flattenLists({ kind: 'AccessList', spec: {} }),
    [{ kind: 'AccessList', spec: {} }],
    'a kind ending in List without items is an object',
  );
  const { objects, problems } = parseManifest('a: 1\n---\nb: [1\nc: 2\n---\nd: 3\n', 'x.yaml');
  t.same(objects, [{ a: 1 }, { d: 3 }], 'a broken document does not take its neighbours down');
  t.match(problems, [{ source: 'x.yaml', message: /^YAML syntax error at line 4, column 1 \(document 2\)/ }]);
});

t.test('a file read again: unchanged documents keep their objects, changed ones are validated anew', async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'all.yaml');
  const docs = (port: number, v6: string) =>
    [
      svcYaml('plain', '10.96.0.1').replace('port: 80', `port: ${port}`), // the lean path
      svcYaml('other', '10.96.0.2'),
      `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: plain-1, labels: {kubernetes.io/service-name: plain}}
addressType: IPv4
endpoints: [{addresses: [10.244.0.1]}]
`,
      // zod's path (an IPv6 slice, a Service with load-balancer ingress): known by fingerprint.
      `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: plain-2, labels: {kubernetes.io/service-name: plain}}
addressType: IPv6
endpoints: [{addresses: ["${v6}"]}]
`,
      `apiVersion: v1
kind: Service
metadata: {name: lb}
spec: {type: LoadBalancer, clusterIP: 10.96.0.3, ports: [{port: 80, nodePort: 30001}]}
status: {loadBalancer: {ingress: [{ip: 192.0.2.1}]}}
`,
      'apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {ports: [{port: 0}]}\n',
    ].join('---\n');
  writeFileSync(file, docs(80, 'fd00::1'));
  const first = await loadManifestFile(file);
  t.ok(first);
  t.same(
    first!.objects.map((o) => o.metadata.name),
    ['plain', 'other', 'plain-1', 'plain-2', 'lb'],
  );
  t.same(
    first!.prints.map((p) => p !== undefined),
    [false, false, false, true, true],
    'only the documents zod validates are fingerprinted',
  );
  t.match(first!.problems, [{ name: 'bad', path: 'spec.ports[0].port' }]);

  const knownOf = (read: typeof first) => ({
    byKey: new Map(read!.objects.map((o) => [objectKeyOf(o), o])),
    byPrint: new Map(read!.objects.flatMap((o, i) => (read!.prints[i] === undefined ? [] : [[read!.prints[i]!, o] as const]))),
  });
  writeFileSync(file, docs(80, 'fd00::1'));
  const again = (await loadManifestFile(file, knownOf(first)))!;
  again.objects.forEach((o, i) =>
    t.equal(o, first!.objects[i], `${o.metadata.name}: the same object (plain ones compared, the others by fingerprint)`),
  );
  t.match(again.problems, [{ name: 'bad', path: 'spec.ports[0].port' }], 'an invalid document is reported again');
  t.ok(
    again.prints.every((p) => p !== undefined),
    'a read again fingerprints every document',
  );

  writeFileSync(file, docs(81, 'fd00::2'));
  const changed = (await loadManifestFile(file, knownOf(again)))!;
  t.same(
    changed.objects.map((o) => o === first!.objects[changed.objects.indexOf(o)]),
    [false, true, true, false, true],
    'the changed Service and slice are new objects, the rest the same',
  );
  t.equal((changed.objects[0] as Service).spec.ports[0]!.port, 81);
  t.same((changed.objects[3] as EndpointSlice).endpoints[0]!.addresses, ['fd00::2']);
});

t.test('sameValue: deep equality of validated objects', async (t) => {
  t.ok(sameValue({ a: [1, { b: 'x' }], c: undefined }, { a: [1, { b: 'x' }] }), 'undefined and absent are alike');
  t.notOk(sameValue({ a: [1, 2] }, { a: [1, 2, 3] }));
  t.notOk(sameValue({ a: [1] }, { a: { 0: 1 } }), 'an array is not an object');
  t.notOk(sameValue({ a: 1 }, { a: 1, b: 2 }));
  t.notOk(sameValue({ a: 1, b: 2 }, { a: 1 }));
  t.notOk(sameValue({ a: null }, { a: {} }));
  t.notOk(sameValue({ a: 'x' }, { a: 'y' }));
  t.ok(sameValue({ a: true, b: null }, { b: null, a: true }), 'key order does not matter');
});
