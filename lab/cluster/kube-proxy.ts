// The real kube-proxy (nftables mode) on a lab cluster, as the reference that
// svcmap is compared with: one process per node, in the node's network and
// mount namespaces (like its kubelet), with a ServiceAccount of its own bound
// to the bootstrap ClusterRole system:node-proxier, as kubeadm sets it up.
//
// kube-proxy's effects outside its node's namespaces, and how each is kept away:
//  - conntrack sysctls: nf_conntrack_max (and the module's hashsize) are global;
//    --conntrack-max-per-core 0 leaves them alone. The TCP timeouts are
//    per namespace on this kernel, but 0 ("leave as-is") is passed anyway;
//    tcp-be-liberal and the UDP timeouts are only written when asked for.
//  - route_localnet (iptables mode only) and the IPVS sysctls (ipvs mode only):
//    not touched in nftables mode.
//  - its nftables tables (`ip kube-proxy`, `ip6 kube-proxy`), the cleanup of
//    iptables / IPVS leftovers at start, conntrack flushes over netlink, the
//    healthz (:10256) and metrics (127.0.0.1:10249) ports: all in the node's
//    network namespace, gone with it. /run/xtables.lock is the node's own /run.
//  - oom_score_adj: its own process only (lowering it fails here, without
//    CAP_SYS_RESOURCE; kube-proxy logs that and goes on).
// Bridged pod-to-pod replies must pass the ip hooks (br_netfilter) for the
// DNAT of a Service whose endpoint is on the client's own bridge to be undone:
// this kernel has br_netfilter built in and bridge-nf-call-iptables is 1 in
// every new namespace, so nothing is changed for that either (checked below).

import { join } from 'node:path';
import type { Cluster } from './cluster.ts';
import { Component, waitUntil } from './component.ts';
import { API_PORT } from './control-plane.ts';
import type { LabNode } from './node.ts';
import { bin } from './paths.ts';
import { writeKubeconfig } from './pki.ts';

export const KUBE_PROXY_SA = 'kube-proxy';
export const HEALTHZ_PORT = 10256;

const RBAC = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: ${KUBE_PROXY_SA}
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: svcmap-lab:node-proxier
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:node-proxier
subjects:
  - kind: ServiceAccount
    name: ${KUBE_PROXY_SA}
    namespace: kube-system
`;

export interface KubeProxyOptions {
  /** The only mode whose side effects were checked (see above). */
  mode?: 'nftables';
  /** -v (default 2: one line per sync). */
  verbosity?: number;
}

export class KubeProxy {
  readonly node: LabNode;
  readonly component: Component;

  constructor(node: LabNode, component: Component) {
    this.node = node;
    this.component = component;
  }

  /** True once /healthz answers 200: the first full sync of its rules is done. */
  async healthy(): Promise<boolean> {
    try {
      await this.node.exec('curl', ['-sSf', '-o', '/dev/null', '--max-time', '2', `http://127.0.0.1:${HEALTHZ_PORT}/healthz`], {
        timeoutMs: 5000,
      });
      return true;
    } catch {
      return false;
    }
  }

  /** The rules it programmed (nft list table ip kube-proxy), for diagnostics. */
  ruleset(): Promise<string> {
    return this.node.exec('nft', ['list', 'table', 'ip', 'kube-proxy'], { timeoutMs: 20_000 });
  }
}

/** bridge-nf-call-iptables as a node's namespace sees it ("1", "0", or "missing"). */
async function bridgeNfCallIptables(node: LabNode): Promise<string> {
  try {
    return (await node.exec('cat', ['/proc/sys/net/bridge/bridge-nf-call-iptables'])).trim();
  } catch {
    return 'missing';
  }
}

/**
 * Starts kube-proxy on every node of the cluster and waits until each has
 * synced (healthz 200). The processes belong to the cluster's lab: they stop
 * with cluster.down(), on exit and on a signal.
 */
export async function startKubeProxies(cluster: Cluster, opts: KubeProxyOptions = {}): Promise<KubeProxy[]> {
  const mode = opts.mode ?? 'nftables';
  for (const n of cluster.nodes) {
    const v = await bridgeNfCallIptables(n);
    if (v !== '1') {
      throw new Error(
        `${n.name}: net.bridge.bridge-nf-call-iptables is ${v} in the node's namespace; kube-proxy needs bridged replies to pass its rules (br_netfilter), and this harness does not change kernel-wide settings`,
      );
    }
  }
  await cluster.kubectl.apply(RBAC);
  // A bound token of the ServiceAccount, valid as long as a lab cluster lives.
  const token = (await cluster.kubectl.run(['-n', 'kube-system', 'create', 'token', KUBE_PROXY_SA, '--duration', '48h'])).trim();
  const server = `https://${cluster.net.nodes[0]!.ip}:${API_PORT}`;
  const kubeconfig = writeKubeconfig(join(cluster.dir, 'kube-proxy.kubeconfig'), server, cluster.pki.caCert, KUBE_PROXY_SA, token);
  const proxies = cluster.nodes.map((n) => {
    const o = n.opts;
    const component = new Component(
      o.lab,
      {
        name: `${n.name}-kube-proxy`,
        netns: o.net.ns.ns,
        mountNs: o.mountNs,
        cgroup: join(o.cgroupV2, 'system'),
        cmd: bin('kube-proxy'),
        args: [
          '--kubeconfig',
          kubeconfig,
          '--proxy-mode',
          mode,
          '--hostname-override',
          n.name,
          '--cluster-cidr',
          cluster.net.clusterCidrs.join(','),
          // Kernel-wide conntrack settings stay as they are (see the top of this file).
          '--conntrack-max-per-core',
          '0',
          '--conntrack-tcp-timeout-established',
          '0',
          '--conntrack-tcp-timeout-close-wait',
          '0',
          '--healthz-bind-address',
          `0.0.0.0:${HEALTHZ_PORT}`,
          '--metrics-bind-address',
          '127.0.0.1:10249',
          '-v',
          String(opts.verbosity ?? 2),
        ],
      },
      o.logDir,
    );
    return new KubeProxy(n, component);
  });
  await cluster.step(`kube-proxy (${mode}) on ${cluster.nodes.map((n) => n.name).join(', ')}: synced`, () =>
    waitUntil('kube-proxy /healthz on every node', async () => (await Promise.all(proxies.map((p) => p.healthy()))).every(Boolean), {
      timeoutMs: 60_000,
      intervalMs: 500,
      alive: proxies.map((p) => p.component),
    }),
  );
  return proxies;
}

/** The last lines of every kube-proxy's log and its table, printed when a check fails. */
export async function kubeProxyDiagnostics(proxies: readonly KubeProxy[]): Promise<string> {
  const out: string[] = [];
  for (const p of proxies) {
    out.push(
      `==== ${p.node.name}: kube-proxy (${p.component.running ? 'running' : 'stopped'}), last lines of ${p.component.logFile}\n${p.component.logTail(60).trimEnd()}`,
    );
    try {
      const rules = await p.ruleset();
      out.push(
        `==== ${p.node.name}: nft list table ip kube-proxy (${rules.split('\n').length} lines; first 150)\n${rules.split('\n').slice(0, 150).join('\n')}`,
      );
    } catch (e) {
      out.push(`==== ${p.node.name}: nft list table ip kube-proxy\n(failed: ${(e as Error).message.split('\n')[0]})`);
    }
  }
  return out.join('\n');
}
