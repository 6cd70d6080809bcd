// Credentials of a lab cluster, made with openssl: a cluster CA, the API
// server's serving certificate (every name and address pods and tools use to
// reach it: the node address, the `kubernetes` Service ClusterIP, loopback),
// the ServiceAccount signing key, static tokens for the admin and each
// kubelet (Node authorizer identities), and kubeconfigs. Valid for two days:
// a lab cluster lives for one run.

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Pki {
  dir: string;
  caCert: string;
  caKey: string;
  apiserverCert: string;
  apiserverKey: string;
  /** The API server's client certificate towards the kubelets (system:masters). */
  kubeletClientCert: string;
  kubeletClientKey: string;
  saKey: string;
  saPub: string;
  tokensFile: string;
  adminToken: string;
  nodeTokens: Map<string, string>;
}

export interface PkiOptions {
  dir: string;
  /** IP SANs of the API server certificate. */
  apiserverIps: readonly string[];
  nodes: readonly string[];
}

function openssl(args: readonly string[], cwd: string): void {
  try {
    execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const err = e as Error & { stderr?: Buffer };
    throw new Error(`openssl ${args[0]}: ${err.stderr?.toString().trim() || err.message}`);
  }
}

const DNS_NAMES = ['kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local', 'localhost'];

export function makePki(opts: PkiOptions): Pki {
  const dir = opts.dir;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  openssl(
    [
      'req',
      '-x509',
      '-new',
      '-nodes',
      '-newkey',
      'rsa:2048',
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      '2',
      '-subj',
      '/CN=svcmap-lab-ca',
    ],
    dir,
  );
  const san = [...DNS_NAMES.map((d) => `DNS:${d}`), ...opts.apiserverIps.map((ip) => `IP:${ip}`)].join(',');
  writeFileSync(
    join(dir, 'apiserver.ext'),
    `subjectAltName=${san}\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n`,
  );
  openssl(
    ['req', '-new', '-nodes', '-newkey', 'rsa:2048', '-keyout', 'apiserver.key', '-out', 'apiserver.csr', '-subj', '/CN=kube-apiserver'],
    dir,
  );
  openssl(
    [
      'x509',
      '-req',
      '-in',
      'apiserver.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'apiserver.crt',
      '-days',
      '2',
      '-extfile',
      'apiserver.ext',
    ],
    dir,
  );
  writeFileSync(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n');
  openssl(
    [
      'req',
      '-new',
      '-nodes',
      '-newkey',
      'rsa:2048',
      '-keyout',
      'kubelet-client.key',
      '-out',
      'kubelet-client.csr',
      '-subj',
      '/O=system:masters/CN=kube-apiserver-kubelet-client',
    ],
    dir,
  );
  openssl(
    [
      'x509',
      '-req',
      '-in',
      'kubelet-client.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'kubelet-client.crt',
      '-days',
      '2',
      '-extfile',
      'client.ext',
    ],
    dir,
  );
  openssl(['genrsa', '-out', 'sa.key', '2048'], dir);
  openssl(['rsa', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir);

  const token = () => randomBytes(16).toString('hex');
  const adminToken = token();
  const nodeTokens = new Map(opts.nodes.map((n) => [n, token()]));
  // token,user,uid,"group1,group2"
  const lines = [`${adminToken},admin,admin,"system:masters"`];
  for (const [n, tk] of nodeTokens) lines.push(`${tk},system:node:${n},node-${n},"system:nodes"`);
  const tokensFile = join(dir, 'tokens.csv');
  writeFileSync(tokensFile, `${lines.join('\n')}\n`, { mode: 0o600 });
  return {
    dir,
    caCert: join(dir, 'ca.crt'),
    caKey: join(dir, 'ca.key'),
    apiserverCert: join(dir, 'apiserver.crt'),
    apiserverKey: join(dir, 'apiserver.key'),
    kubeletClientCert: join(dir, 'kubelet-client.crt'),
    kubeletClientKey: join(dir, 'kubelet-client.key'),
    saKey: join(dir, 'sa.key'),
    saPub: join(dir, 'sa.pub'),
    tokensFile,
    adminToken,
    nodeTokens,
  };
}

/** A kubeconfig for server with a bearer token, verifying the server against the cluster CA. */
export function writeKubeconfig(path: string, server: string, caCert: string, user: string, token: string): string {
  const text = [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: lab',
    '  cluster:',
    `    server: ${server}`,
    `    certificate-authority: ${caCert}`,
    'users:',
    `- name: ${user}`,
    '  user:',
    `    token: ${token}`,
    'contexts:',
    '- name: lab',
    '  context:',
    '    cluster: lab',
    `    user: ${user}`,
    'current-context: lab',
    '',
  ].join('\n');
  writeFileSync(path, text, { mode: 0o600 });
  return path;
}
