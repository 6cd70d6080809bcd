// One node of a lab cluster: containerd and a kubelet inside the node's network
// and mount namespaces, with their own state directories and configuration
// files, pods on a CNI bridge (cni0) inside the node namespace, and the pods'
// cgroups below a lab cgroup (kubelet --cgroup-root), never the host's.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Lab } from '../lab.ts';
import { run } from '../run.ts';
import { netnsPath } from '../netns.ts';
import { Component, waitUntil } from './component.ts';
import { inMountNs } from './mount-ns.ts';
import { bin } from './paths.ts';
import { writeKubeconfig } from './pki.ts';
import type { NodeNet } from './topology.ts';

/** The sandbox image: the name kubelet 1.34 and e2e.test use for it. */
export const PAUSE_IMAGE = 'registry.k8s.io/pause:3.10.1';

export interface NodeOptions {
  lab: Lab;
  net: NodeNet;
  /** File of the node's mount namespace. */
  mountNs: string;
  /** The node's cgroup v2 directory; also its kubelet's --cgroup-root (by name) in every v1 hierarchy. */
  cgroupV2: string;
  cgroupRoot: string;
  dir: string;
  logDir: string;
  apiServer: string;
  caCert: string;
  token: string;
  clusterDns: string;
  resolvConf: string;
  /** The CNI's portmap plugin serves hostPorts (default); false: left out, for a proxy that serves them itself (svcmap's hostPort.enabled). */
  portmap?: boolean;
}

function containerdConfig(dir: string, cniConfDir: string): string {
  // state, the sockets and runc's root stay below /run, the node's own tmpfs.
  return `version = 2
root = "${join(dir, 'containerd')}"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "/run/containerd/containerd.sock"
[ttrpc]
  address = "/run/containerd/containerd.sock.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "${join(dir, 'containerd-opt')}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  stream_server_address = "127.0.0.1"
  # This VM's capability bounding set lacks CAP_SYS_RESOURCE: runc must never
  # be asked to lower a container's oom_score_adj below containerd's own.
  restrict_oom_score_adj = true
  # Pod network namespaces pinned at /var/run/netns, containerd's default and
  # where the chart's netns mount looks: the node's own /run (a tmpfs of its
  # mount namespace), not the host's.
  netns_mounts_under_state_dir = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${cniConfDir}"
`;
}

/**
 * One address of each family per pod; the bridge plugin puts each range's
 * gateway on cni0. With `portmap`, that plugin serves the pods' hostPorts
 * (DNAT rules in the node's namespace), as kind's CNI does and as
 * kube-proxy needs; without, the service proxy must (svcmap with
 * hostPort.enabled, as Cilium with its kube-proxy replacement).
 */
function cniConfig(net: NodeNet, ipamDir: string, portmap: boolean): string {
  return `${JSON.stringify(
    {
      cniVersion: '0.4.0',
      name: 'lab',
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            dataDir: ipamDir,
            ranges: [[{ subnet: net.podCidr }], [{ subnet: net.podCidr6 }]],
            routes: [{ dst: '0.0.0.0/0' }, { dst: '::/0' }],
          },
        },
        ...(portmap ? [{ type: 'portmap', capabilities: { portMappings: true } }] : []),
      ],
    },
    null,
    2,
  )}\n`;
}

function kubeletConfig(o: NodeOptions): string {
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: ${o.cgroupRoot}
# This host has cgroup v1 controllers beside the unified hierarchy (hybrid).
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
address: ${o.net.ip}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: ${o.caCert} }
authorization: { mode: Webhook }
clusterDNS: [${o.clusterDns}]
clusterDomain: cluster.local
resolvConf: ${o.resolvConf}
evictionHard: { "memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%" }
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`;
}

/** Restarts of one node's kubelet before its supervisor gives up (systemd's StartLimitBurst is 5 too). */
const KUBELET_RESTART_LIMIT = 5;

export class LabNode {
  readonly opts: NodeOptions;
  readonly name: string;
  containerd!: Component;
  kubelet!: Component;
  /** What made the kubelet exit each time its supervisor started it again (cause lines from its log). */
  readonly kubeletRestarts: string[] = [];

  constructor(opts: NodeOptions) {
    this.opts = opts;
    this.name = opts.net.name;
    mkdirSync(opts.dir, { recursive: true });
  }

  /** argv running a command in this node's network, mount and UTS namespaces. */
  argv(cmd: string, args: readonly string[]): string[] {
    const [nsenter, ...rest] = inMountNs(this.opts.mountNs);
    return [nsenter!, `--net=${netnsPath(this.opts.net.ns.ns)}`, ...rest, cmd, ...args];
  }

  /** Runs a command in the node (network + mount namespace) and resolves with its stdout. */
  exec(cmd: string, args: readonly string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<string> {
    const [file, ...rest] = this.argv(cmd, args);
    return run(file as string, rest, { timeoutMs: opts.timeoutMs ?? 60_000, ...(opts.input !== undefined ? { input: opts.input } : {}) });
  }

  #component(name: string, cmd: string, args: readonly string[]): Component {
    const o = this.opts;
    return new Component(
      o.lab,
      { name: `${this.name}-${name}`, netns: o.net.ns.ns, mountNs: o.mountNs, cmd, args, cgroup: join(o.cgroupV2, 'system') },
      o.logDir,
    );
  }

  async startContainerd(): Promise<void> {
    const o = this.opts;
    const cniConf = join(o.dir, 'cni', 'net.d');
    mkdirSync(cniConf, { recursive: true });
    mkdirSync(join(o.cgroupV2, 'system'), { recursive: true });
    writeFileSync(join(cniConf, '10-lab.conflist'), cniConfig(o.net, join(o.dir, 'cni', 'ipam'), o.portmap ?? true));
    const config = join(o.dir, 'containerd.toml');
    writeFileSync(config, containerdConfig(o.dir, cniConf));
    this.containerd = this.#component('containerd', 'containerd', ['--config', config]);
    await waitUntil(
      `containerd on ${this.name}`,
      async () => {
        await this.exec('ctr', ['version'], { timeoutMs: 3000 });
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 100, alive: [this.containerd] },
    );
  }

  /** Imports OCI archives into the node's containerd (namespace k8s.io, where the kubelet looks). */
  async importImages(archives: readonly string[]): Promise<void> {
    for (const a of archives)
      await this.exec('ctr', ['-n', 'k8s.io', 'images', 'import', '--all-platforms', '--no-unpack', a], { timeoutMs: 300_000 });
  }

  /** Gives an imported image a second name (e.g. a new tag for an upgrade). */
  async tagImage(ref: string, newRef: string): Promise<void> {
    await this.exec('ctr', ['-n', 'k8s.io', 'images', 'tag', '--force', ref, newRef]);
  }

  startKubelet(): Component {
    const o = this.opts;
    const kubeconfig = writeKubeconfig(join(o.dir, 'kubelet.kubeconfig'), o.apiServer, o.caCert, `system:node:${this.name}`, o.token);
    const config = join(o.dir, 'kubelet.yaml');
    writeFileSync(config, kubeletConfig(o));
    this.kubelet = this.#component('kubelet', bin('kubelet'), [
      '--config',
      config,
      '--kubeconfig',
      kubeconfig,
      '--root-dir',
      join(o.dir, 'kubelet'),
      '--cert-dir',
      join(o.dir, 'kubelet', 'pki'),
      '--hostname-override',
      this.name,
      // Both families: the Node's InternalIPs (IPv4 first, the primary family).
      '--node-ip',
      `${o.net.ip},${o.net.ip6}`,
      '-v',
      '1',
    ]);
    return this.kubelet;
  }

  /**
   * Starts the kubelet again whenever it exits, as systemd's Restart=always
   * does for the kubelet on a real node (kubeadm's and kind's units), at
   * most KUBELET_RESTART_LIMIT times; each restart is logged with the cause
   * from the kubelet's log. The kubelet is upstream code: a crash of it is
   * reported, and the cluster carries on as a node would. Returns the stop
   * function (call it before stopping the kubelet on purpose).
   */
  superviseKubelet(log: (line: string) => void, intervalMs = 500): () => void {
    const timer = setInterval(() => {
      if (this.kubelet.running || this.kubeletRestarts.length >= KUBELET_RESTART_LIMIT) return;
      const how = this.kubelet.child.signalCode ?? `exit ${this.kubelet.child.exitCode}`;
      const cause = this.kubelet.crashLines() || '(nothing in its log says why)';
      this.kubeletRestarts.push(`${how}: ${cause}`);
      log(
        `${this.name}: the kubelet stopped (${how}); started again, as systemd would on a node (restart ${this.kubeletRestarts.length} of at most ${KUBELET_RESTART_LIMIT}). From its log:\n${cause}`,
      );
      this.startKubelet();
    }, intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** Throws (with the cause) once the kubelet is down for good: exited after its supervisor's last restart. */
  checkKubelet(): void {
    if (this.kubeletRestarts.length >= KUBELET_RESTART_LIMIT) this.kubelet.checkRunning();
  }

  async stop(): Promise<void> {
    await this.kubelet?.stop(3000);
    await this.containerd?.stop(3000);
  }
}
