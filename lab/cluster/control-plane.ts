// The control plane of a lab cluster, Kubernetes' own binaries in the first
// node's network namespace: etcd on loopback, kube-apiserver on the node
// address (Node,RBAC authorization, ServiceAccount tokens signed with the lab
// key), kube-controller-manager (its endpointslice controller writes the real
// EndpointSlices) and kube-scheduler. No kube-proxy: that is svcmap's job.
// Optionally a second kube-apiserver on the same etcd (a highly available
// control plane), on another port of the same address: then every other
// client (controllers, kubelets, kubectl) uses the second, so that the first
// can be killed for the svcmap agents alone to fail over.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Lab } from '../lab.ts';
import { Component, waitUntil } from './component.ts';
import { Kubectl } from './kubectl.ts';
import { bin } from './paths.ts';
import { type Pki, writeKubeconfig } from './pki.ts';

export interface ControlPlaneOptions {
  lab: Lab;
  netns: string;
  /** cgroup v2 directory the components run in. */
  cgroup: string;
  dir: string;
  logDir: string;
  pki: Pki;
  /** The node address the API server advertises (its `kubernetes` endpoint). */
  advertiseIp: string;
  /** The Service ranges, primary family first (both: a dual-stack cluster). */
  serviceCidrs: readonly string[];
  /** kube-controller-manager --controllers (default "*"). */
  controllers?: string;
  /** Extra kube-apiserver flags (e.g. --watch-cache=false for tests that need etcd's own 410s). */
  apiserverArgs?: readonly string[];
  /** A second kube-apiserver on the same etcd, on this port (the other clients use it). */
  secondApiPort?: number;
  log: (line: string) => void;
}

export const API_PORT = 6443;
/** The second API server's port (ClusterOptions.secondApiserver). */
export const SECOND_API_PORT = 6444;
const ETCD_CLIENT = 'http://127.0.0.1:2379';

export class ControlPlane {
  readonly opts: ControlPlaneOptions;
  /** Admin kubeconfig reaching the API server over loopback, for use inside the node namespace. */
  readonly localKubeconfig: string;
  readonly kubectl: Kubectl;
  /** kubectl on the first API server, when the other clients use the second. */
  readonly #firstKubectl: Kubectl | undefined;
  etcd!: Component;
  apiserver!: Component;
  /** The second kube-apiserver (with secondApiPort). */
  apiserver2: Component | undefined;
  controllerManager!: Component;
  scheduler!: Component;

  constructor(opts: ControlPlaneOptions) {
    this.opts = opts;
    mkdirSync(opts.dir, { recursive: true });
    this.localKubeconfig = writeKubeconfig(
      join(opts.dir, 'admin-local.kubeconfig'),
      `https://127.0.0.1:${opts.secondApiPort ?? API_PORT}`,
      opts.pki.caCert,
      'admin',
      opts.pki.adminToken,
    );
    this.kubectl = new Kubectl(opts.netns, this.localKubeconfig, join(opts.dir, 'kube-cache'));
    if (opts.secondApiPort !== undefined) {
      const first = writeKubeconfig(
        join(opts.dir, 'admin-local-first.kubeconfig'),
        `https://127.0.0.1:${API_PORT}`,
        opts.pki.caCert,
        'admin',
        opts.pki.adminToken,
      );
      this.#firstKubectl = new Kubectl(opts.netns, first, join(opts.dir, 'kube-cache-first'));
    }
  }

  #start(name: string, cmd: string, args: readonly string[]): Component {
    return new Component(this.opts.lab, { name, netns: this.opts.netns, cmd, args, cgroup: this.opts.cgroup }, this.opts.logDir);
  }

  startEtcd(): Component {
    const dir = this.opts.dir;
    this.etcd = this.#start('etcd', bin('etcd'), [
      '--name',
      'lab',
      '--data-dir',
      join(dir, 'etcd'),
      '--listen-client-urls',
      ETCD_CLIENT,
      '--advertise-client-urls',
      ETCD_CLIENT,
      '--listen-peer-urls',
      'http://127.0.0.1:2380',
      '--initial-advertise-peer-urls',
      'http://127.0.0.1:2380',
      '--initial-cluster',
      'lab=http://127.0.0.1:2380',
      // A lab cluster lives for one run: durability is not worth the fsyncs.
      '--unsafe-no-fsync',
      '--log-level',
      'warn',
    ]);
    return this.etcd;
  }

  startApiserver(): Component {
    this.apiserver = this.#startApiserver('kube-apiserver', API_PORT, []);
    return this.apiserver;
  }

  /** The second kube-apiserver: the same etcd, the same address; it leaves the `kubernetes` Endpoints to the first. */
  startSecondApiserver(): Component {
    const port = this.opts.secondApiPort;
    if (port === undefined) throw new Error('no secondApiPort: the control plane has one API server');
    this.apiserver2 = this.#startApiserver('kube-apiserver-2', port, ['--endpoint-reconciler-type', 'none']);
    return this.apiserver2;
  }

  #startApiserver(name: string, port: number, extra: readonly string[]): Component {
    const { pki } = this.opts;
    return this.#start(name, bin('kube-apiserver'), [
      '--etcd-servers',
      ETCD_CLIENT,
      '--bind-address',
      '0.0.0.0',
      '--advertise-address',
      this.opts.advertiseIp,
      '--secure-port',
      String(port),
      '--tls-cert-file',
      pki.apiserverCert,
      '--tls-private-key-file',
      pki.apiserverKey,
      '--client-ca-file',
      pki.caCert,
      '--service-account-issuer',
      'https://kubernetes.default.svc.cluster.local',
      '--service-account-key-file',
      pki.saPub,
      '--service-account-signing-key-file',
      pki.saKey,
      '--token-auth-file',
      pki.tokensFile,
      '--authorization-mode',
      'Node,RBAC',
      '--service-cluster-ip-range',
      this.opts.serviceCidrs.join(','),
      '--allow-privileged=true',
      '--kubelet-preferred-address-types',
      'InternalIP',
      '--kubelet-client-certificate',
      pki.kubeletClientCert,
      '--kubelet-client-key',
      pki.kubeletClientKey,
      '--profiling=false',
      ...extra,
      ...(this.opts.apiserverArgs ?? []),
    ]);
  }

  startControllerManager(): Component {
    const { pki } = this.opts;
    const kc = this.localKubeconfig;
    this.controllerManager = this.#start('kube-controller-manager', bin('kube-controller-manager'), [
      '--kubeconfig',
      kc,
      '--authentication-kubeconfig',
      kc,
      '--authorization-kubeconfig',
      kc,
      '--service-account-private-key-file',
      pki.saKey,
      '--root-ca-file',
      pki.caCert,
      '--cluster-signing-cert-file',
      pki.caCert,
      '--cluster-signing-key-file',
      pki.caKey,
      '--use-service-account-credentials=true',
      '--controllers',
      this.opts.controllers ?? '*',
      '--leader-elect=false',
      '--bind-address',
      '127.0.0.1',
      '--service-cluster-ip-range',
      this.opts.serviceCidrs.join(','),
      '--profiling=false',
    ]);
    return this.controllerManager;
  }

  startScheduler(): Component {
    const kc = this.localKubeconfig;
    this.scheduler = this.#start('kube-scheduler', bin('kube-scheduler'), [
      '--kubeconfig',
      kc,
      '--authentication-kubeconfig',
      kc,
      '--authorization-kubeconfig',
      kc,
      '--leader-elect=false',
      '--bind-address',
      '127.0.0.1',
      '--profiling=false',
    ]);
    return this.scheduler;
  }

  /** Every API server answers /readyz. */
  async waitApiserverReady(timeoutMs = 60_000): Promise<void> {
    const alive = [this.etcd, this.apiserver, ...(this.apiserver2 ? [this.apiserver2] : [])];
    await waitUntil('kube-apiserver /readyz', () => this.kubectl.rawOk('/readyz'), { timeoutMs, alive });
    const first = this.#firstKubectl;
    if (first && this.apiserver2) await waitUntil('the first kube-apiserver /readyz', () => first.rawOk('/readyz'), { timeoutMs, alive });
  }

  /** The token controller has run once the default namespace's ServiceAccount exists. */
  waitControllersReady(timeoutMs = 60_000): Promise<void> {
    return waitUntil(
      'the default ServiceAccount (kube-controller-manager)',
      async () => {
        await this.kubectl.run(['get', 'serviceaccount', 'default', '-n', 'default'], { timeoutMs: 5000 });
        return true;
      },
      { timeoutMs, alive: [this.apiserver, this.controllerManager] },
    );
  }

  /** etcd's JSON gateway (POST /v3/...), from inside the node namespace. */
  async etcdCall<T = unknown>(path: string, body: unknown): Promise<T> {
    const out = await this.kubectl.exec('curl', ['-sS', '--fail', '-X', 'POST', `${ETCD_CLIENT}${path}`, '-d', JSON.stringify(body)], {
      timeoutMs: 10_000,
    });
    return JSON.parse(out) as T;
  }

  /** Compacts etcd's history up to its current revision: older resourceVersions become 410 Gone. */
  async compactEtcd(): Promise<number> {
    const r = await this.etcdCall<{ header: { revision: string } }>('/v3/kv/range', { key: Buffer.from('/registry').toString('base64') });
    const rev = Number(r.header.revision);
    await this.etcdCall('/v3/kv/compaction', { revision: String(rev), physical: true });
    return rev;
  }

  /** SIGKILLs the API server and starts it again on the same etcd. */
  async restartApiserver(): Promise<void> {
    await this.apiserver.kill();
    this.startApiserver();
    await this.waitApiserverReady();
  }

  async stop(): Promise<void> {
    for (const c of [this.scheduler, this.controllerManager, this.apiserver2, this.apiserver, this.etcd]) await c?.stop();
  }
}
