// A real Kubernetes cluster on this machine, for the real-cluster tier: the
// network of topology.ts, the control plane of control-plane.ts in node1, and
// on every node containerd + a kubelet (node.ts) in the node's network and
// mount namespaces. No kube-proxy. With nodes: 0 it is only the control plane
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), which is
// enough for the Kubernetes source tests.
//
// Everything belongs to one lab run (lab/lab.ts): namespaces, cgroups and
// processes go with the lab; what the lab does not know about (the nodes'
// mount namespaces, the kubelets' cgroup v1 directories, the kernel sysctls
// the kubelet rewrites, the state directory) is removed here, on down(), on
// exit and on a signal, and by sweepStaleClusters() after a SIGKILL.

import { existsSync, mkdirSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { registerTeardown, unregisterTeardown, type Teardown } from '../cleanup.ts';
import { Lab } from '../lab.ts';
import { forwardApi, type ApiForward } from './api-forward.ts';
import { waitUntil } from './component.ts';
import { API_PORT, ControlPlane, SECOND_API_PORT } from './control-plane.ts';
import { createCgroupV1, guardSysctls, removeCgroupV1Sync, restoreSysctls, saveSysctlsOnce, type SysctlValues } from './host-state.ts';
import { Kubectl } from './kubectl.ts';
import { createMountNs, releaseMntnsDir, removeMountNsSync } from './mount-ns.ts';
import { LabNode } from './node.ts';
import { mntnsFile, stateDir } from './paths.ts';
import { makePki, type Pki, writeKubeconfig } from './pki.ts';
import { CLUSTER_DNS_IP, createClusterNet, KUBERNETES_SERVICE_IP, type ClusterNet } from './topology.ts';

export interface ClusterOptions {
  /** Nodes running a kubelet (default 2); 0: the control plane only. */
  nodes?: number;
  /** OCI archives imported into every node's containerd before its kubelet starts. */
  images?: readonly string[];
  apiserverArgs?: readonly string[];
  /** kube-controller-manager --controllers (default "*"). */
  controllers?: string;
  /**
   * A second kube-apiserver on the same etcd (SECOND_API_PORT, same address):
   * the controllers, kubelets, kubectl and helm use it, the first is left to
   * the svcmap agents (which get both), to be killed.
   */
  secondApiserver?: boolean;
  /** Progress lines (default: stderr). */
  log?: (line: string) => void;
  /** The nodes' CNI config has the portmap plugin for hostPorts (default); false: the proxy serves them (svcmap's hostPort.enabled). */
  portmap?: boolean;
}

interface NodeKubeStatus {
  items: Array<{
    metadata: { name: string };
    spec: { podCIDR?: string };
    status: { conditions?: Array<{ type: string; status: string }> };
  }>;
}

export class Cluster {
  readonly lab: Lab;
  readonly dir: string;
  readonly logDir: string;
  readonly log: (line: string) => void;
  net!: ClusterNet;
  pki!: Pki;
  controlPlane!: ControlPlane;
  readonly nodes: LabNode[] = [];
  /** Admin kubeconfig for use from the outside namespace (where kubectl, helm and e2e.test run). */
  adminKubeconfig!: string;
  /** The port of the API server every client but svcmap uses: API_PORT, or SECOND_API_PORT with secondApiserver. */
  clientApiPort = API_PORT;
  /** kubectl as the admin, from the outside namespace. */
  kubectl!: Kubectl;
  readonly #t0 = Date.now();
  readonly #teardown: Teardown;
  readonly #mountNss: string[] = [];
  readonly #cgroupV1: string[] = [];
  #sysctls: SysctlValues | undefined;
  #sysctlGuard: { stop(): void } | undefined;
  readonly #kubeletSupervisors: Array<() => void> = [];
  /** /var/lib/cni did not exist: createMountNs made it (an empty mount point). */
  #madeCniDir = false;
  #down: Promise<void> | undefined;

  private constructor(lab: Lab, log: (line: string) => void) {
    this.lab = lab;
    this.log = log;
    this.dir = stateDir(lab.id);
    this.logDir = join(this.dir, 'logs');
    // Registered after the lab's own teardown, so it runs after every process is gone.
    this.#teardown = { emergency: () => this.#hostTeardownSync() };
    registerTeardown(this.#teardown);
  }

  /** Brings a cluster up; on any failure everything made so far is removed and the error names the step. */
  static async up(opts: ClusterOptions = {}): Promise<Cluster> {
    const lab = await Lab.create();
    const c = new Cluster(lab, opts.log ?? ((l) => process.stderr.write(`${l}\n`)));
    try {
      await c.#up(opts);
      return c;
    } catch (e) {
      c.log(`cluster ${lab.id}: bring-up failed: ${(e as Error).message}`);
      await c.down().catch(() => {});
      throw e;
    }
  }

  /** Prints "[  12.3s] what (took)" progress lines. */
  step<T>(what: string, f: () => Promise<T>): Promise<T> {
    const t = Date.now();
    return f().then((v) => {
      this.log(`[${((Date.now() - this.#t0) / 1000).toFixed(1).padStart(6)}s] ${what} (${((Date.now() - t) / 1000).toFixed(1)} s)`);
      return v;
    });
  }

  async #up(opts: ClusterOptions): Promise<void> {
    const kubelets = opts.nodes ?? 2;
    const names = Array.from({ length: Math.max(kubelets, 1) }, (_, i) => `node${i + 1}`);
    mkdirSync(this.logDir, { recursive: true });
    this.log(`cluster ${this.lab.id}: state in ${this.dir}`);

    this.net = await this.step(`network: ${names.join(', ')}, outside, switch`, () => createClusterNet(this.lab, names));
    const cp = this.net.nodes[0]!;
    this.pki = await this.step('certificates and tokens', async () =>
      makePki({ dir: join(this.dir, 'pki'), apiserverIps: [cp.ip, KUBERNETES_SERVICE_IP, '127.0.0.1'], nodes: names }),
    );
    if (opts.secondApiserver) this.clientApiPort = SECOND_API_PORT;
    const cgroups = new Map<string, string>();
    for (const n of names) cgroups.set(n, await this.lab.cgroup(n));

    const controlPlaneCgroup = join(cgroups.get(cp.name)!, 'control-plane');
    mkdirSync(controlPlaneCgroup);
    this.controlPlane = new ControlPlane({
      lab: this.lab,
      netns: cp.ns.ns,
      cgroup: controlPlaneCgroup,
      dir: join(this.dir, 'control-plane'),
      logDir: this.logDir,
      pki: this.pki,
      advertiseIp: cp.ip,
      serviceCidrs: this.net.serviceCidrs,
      apiserverArgs: opts.apiserverArgs ?? [],
      ...(opts.secondApiserver ? { secondApiPort: SECOND_API_PORT } : {}),
      ...(opts.controllers !== undefined ? { controllers: opts.controllers } : {}),
      log: this.log,
    });
    this.adminKubeconfig = writeKubeconfig(
      join(this.dir, 'admin.kubeconfig'),
      `https://${cp.ip}:${this.clientApiPort}`,
      this.pki.caCert,
      'admin',
      this.pki.adminToken,
    );
    this.kubectl = new Kubectl(this.net.outside.ns.ns, this.adminKubeconfig, join(this.dir, 'kube-cache'));

    const cpReady = this.step('etcd and kube-apiserver ready', async () => {
      this.controlPlane.startEtcd();
      this.controlPlane.startApiserver();
      if (opts.secondApiserver) this.controlPlane.startSecondApiserver();
      await this.controlPlane.waitApiserverReady();
    });
    if (kubelets === 0) {
      await cpReady;
      await this.#startControllers();
      return;
    }

    this.#sysctls = saveSysctlsOnce(join(this.dir, 'sysctls.json'));
    const resolvConf = join(this.dir, 'resolv.conf');
    // Pods with dnsPolicy Default get this: no resolver outside the lab.
    writeFileSync(resolvConf, 'options ndots:1\n');
    this.#madeCniDir = !existsSync('/var/lib/cni');
    for (const n of this.net.nodes.slice(0, kubelets)) {
      const name = `svcmap-${this.lab.id}-${n.name}`;
      this.#cgroupV1.push(name);
      createCgroupV1(name);
      const file = mntnsFile(this.lab.id, n.name);
      this.#mountNss.push(file);
      createMountNs(file, { cgroupV2: cgroups.get(n.name)!, hostname: n.name });
      this.nodes.push(
        new LabNode({
          lab: this.lab,
          net: n,
          mountNs: file,
          cgroupV2: cgroups.get(n.name)!,
          cgroupRoot: `/${name}`,
          dir: join(this.dir, n.name),
          logDir: this.logDir,
          apiServer: `https://${cp.ip}:${this.clientApiPort}`,
          caCert: this.pki.caCert,
          token: this.pki.nodeTokens.get(n.name)!,
          clusterDns: CLUSTER_DNS_IP,
          resolvConf,
          portmap: opts.portmap ?? true,
        }),
      );
    }
    const runtimes = Promise.all(
      this.nodes.map((n) =>
        this.step(`${n.name}: containerd`, async () => {
          await n.startContainerd();
          if (opts.images?.length) await this.step(`${n.name}: ${opts.images.length} images imported`, () => n.importImages(opts.images!));
        }),
      ),
    );
    await Promise.all([cpReady, runtimes]);
    await this.#startControllers();
    await this.step(`kubelets on ${this.nodes.map((n) => n.name).join(', ')}: nodes Ready`, async () => {
      this.#sysctlGuard = guardSysctls(this.#sysctls!, (keys) => this.log(`restored ${keys.join(', ')} (the kubelet changed them)`));
      for (const n of this.nodes) {
        n.startKubelet();
        this.#kubeletSupervisors.push(n.superviseKubelet(this.log));
      }
      await this.waitNodesReady();
    });
    await this.step('pod CIDRs on the Node objects', () => this.#setPodCidrs());
  }

  async #startControllers(): Promise<void> {
    await this.step('kube-controller-manager and kube-scheduler', async () => {
      this.controlPlane.startControllerManager();
      this.controlPlane.startScheduler();
      await this.controlPlane.waitControllersReady();
    });
  }

  async waitNodesReady(timeoutMs = 120_000): Promise<void> {
    const want = this.nodes.map((n) => n.name);
    await waitUntil(
      `nodes ${want.join(', ')} Ready`,
      async () => {
        const list = await this.kubectl.json<NodeKubeStatus>(['get', 'nodes']);
        const ready = list.items
          .filter((n) => n.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
          .map((n) => n.metadata.name);
        return want.every((w) => ready.includes(w));
      },
      { timeoutMs, intervalMs: 500, alive: this.nodes.map((n) => n.containerd), check: () => this.nodes.forEach((n) => n.checkKubelet()) },
    );
  }

  /** Every kubelet restart so far, "node: how: cause" (see LabNode.superviseKubelet). */
  kubeletRestarts(): string[] {
    return this.nodes.flatMap((n) => n.kubeletRestarts.map((r) => `${n.name}: ${r}`));
  }

  #stopSupervisors(): void {
    for (const stop of this.#kubeletSupervisors.splice(0)) stop();
  }

  /**
   * What kube-controller-manager's node IPAM would do (--allocate-node-cidrs,
   * one CIDR per family); the CIDRs the CNI bridges already use, IPv4 first.
   */
  async #setPodCidrs(): Promise<void> {
    for (const n of this.nodes) {
      const { podCidr, podCidr6 } = n.opts.net;
      await this.kubectl.run([
        'patch',
        'node',
        n.name,
        '--type',
        'merge',
        '-p',
        JSON.stringify({ spec: { podCIDR: podCidr, podCIDRs: [podCidr, podCidr6] } }),
      ]);
    }
  }

  /** The API server on a loopback port of this process's namespace (see api-forward.ts). */
  async forwardApi(): Promise<ApiForward & { kubeconfig: string }> {
    const fwd = await forwardApi(this.lab, this.net.outside.ns, join(this.dir, 'api.sock'), this.net.nodes[0]!.ip, this.clientApiPort);
    const kubeconfig = writeKubeconfig(join(this.dir, 'admin-forward.kubeconfig'), fwd.url, this.pki.caCert, 'admin', this.pki.adminToken);
    return { ...fwd, kubeconfig };
  }

  /** Stops everything and removes everything (idempotent). */
  down(): Promise<void> {
    this.#down ??= this.#downAsync();
    return this.#down;
  }

  async #downAsync(): Promise<void> {
    const t = Date.now();
    this.#sysctlGuard?.stop();
    this.#stopSupervisors();
    let error: unknown;
    try {
      await this.lab.destroy();
    } catch (e) {
      error = e;
    }
    this.#hostTeardownSync();
    unregisterTeardown(this.#teardown);
    this.log(`cluster ${this.lab.id}: removed (${((Date.now() - t) / 1000).toFixed(1)} s)`);
    if (error) throw error;
  }

  /** After the lab's processes are gone: mount namespaces, cgroup v1 directories, sysctls, state. */
  #hostTeardownSync(): void {
    this.#sysctlGuard?.stop();
    this.#stopSupervisors();
    for (const f of this.#mountNss) removeMountNsSync(f);
    releaseMntnsDir();
    for (const name of this.#cgroupV1) removeCgroupV1Sync(name);
    if (this.#sysctls) restoreSysctls(this.#sysctls);
    rmSync(this.dir, { recursive: true, force: true });
    // Made (empty) by createMountNs; kept while another run uses it as a mount point.
    if (this.#madeCniDir) {
      try {
        rmdirSync('/var/lib/cni');
      } catch {
        /* not empty or in use */
      }
    }
  }
}
