// Where the agent finds the API server: --kubeconfig, with --k8s-api-server
// pointing the client at the API server directly (kube-proxy is gone, so the
// `kubernetes` Service VIP is not reachable until svcmap programs it).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadKubeConfig } from '../../src/sources/kubernetes/config.ts';

const dir = mkdtempSync(join(tmpdir(), 'svcmap-kc-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const path = join(dir, 'kubeconfig');
writeFileSync(
  path,
  `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://10.96.0.1:443", certificate-authority-data: "${Buffer.from('not a real CA').toString('base64')}"}
users:
- name: u
  user: {token: "abc"}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`,
);

t.test('--kubeconfig alone uses its server', async (t) => {
  t.equal(loadKubeConfig({ kubeconfig: path }).getCurrentCluster()?.server, 'https://10.96.0.1:443');
});

t.test('--k8s-api-server replaces only the address, keeping CA and credentials', async (t) => {
  const kc = loadKubeConfig({ kubeconfig: path, apiServer: 'https://192.168.1.10:6443' });
  t.equal(kc.getCurrentCluster()?.server, 'https://192.168.1.10:6443');
  t.ok(kc.getCurrentCluster()?.caData, 'the CA is kept');
  t.equal(kc.getCurrentUser()?.token, 'abc', 'the credentials are kept');
});

t.test('clear errors', async (t) => {
  t.throws(() => loadKubeConfig({ kubeconfig: join(dir, 'missing') }), { message: /--kubeconfig .*missing does not exist/ });
  t.throws(() => loadKubeConfig({ kubeconfig: path, apiServer: 'not a url' }), { message: /--k8s-api-server "not a url" is not a URL/ });
});
