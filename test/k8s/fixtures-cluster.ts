// The real API server for the Kubernetes source tests: Kubernetes' own
// etcd + kube-apiserver + kube-controller-manager + kube-scheduler
// (lab/cluster, no kubelets), reached from the test process through a
// loopback forward. Without kubelets the test plays the kubelet's part: it
// makes a Node object, creates Pods bound to it (spec.nodeName, so the
// scheduler is not involved) and writes their status (IP, phase, Ready)
// through pods/status, as a kubelet would. The EndpointSlices the agent sees
// are the ones the real endpointslice controller writes from those Pods.
import { KubeConfig, Watch } from '@kubernetes/client-node';
import { Cluster } from '../../lab/cluster/cluster.ts';
import type { ApiForward } from '../../lab/cluster/api-forward.ts';
import type { Kubectl } from '../../lab/cluster/kubectl.ts';
import { waitUntil } from '../../lab/cluster/component.ts';

/** The Node every Pod is bound to; the harness (startSync) watches it by this name. */
export const NODE = 'node1';

export interface RealApiServer {
  cluster: Cluster;
  kubectl: Kubectl;
  forward: ApiForward & { kubeconfig: string };
  /** A fresh client config for the forwarded API server (CA-verified, admin token). */
  kubeConfig(): KubeConfig;
  /** Bring-up progress lines ("[ 4.4s] etcd and kube-apiserver ready (3.2 s)"). */
  log: string[];
  /** Creates a namespace and waits for its default ServiceAccount (admission refuses Pods if it does not appear within ~1-2 s). */
  namespace(name: string): Promise<string>;
  down(): Promise<void>;
}

/**
 * A control plane for the whole test file (~10 s to bring up).
 *
 * --watch-cache=false: with the watch cache (the default) the API server
 * serves watches from its own in-memory window of recent events, so
 * compacting etcd does not make an old resourceVersion expire; only falling
 * out of that window does, which a test cannot arrange on purpose. Without
 * it every watch is an etcd watch, and a watch from a resourceVersion etcd
 * has compacted away gets etcd's own "required revision has been compacted",
 * which the API server sends as an ERROR event with a 410 Expired Status:
 * the real 410 path of the informers.
 *
 * -nodelifecycle: no kubelet ever reports for the Node, so the node
 * lifecycle controller would set its conditions Unknown and taint it
 * unreachable:NoExecute after its 50 s grace period, and the taint eviction
 * controller would delete its Pods once their default 300 s toleration ran
 * out. The other controllers leave kubelet-less Pods alone: pod GC collects
 * only Pods of Nodes that do not exist, terminated Pods beyond a threshold
 * (12500), and terminating Pods on out-of-service Nodes; a gracefully
 * deleted Pod stays terminating, as nothing confirms its end.
 */
export async function startRealApiServer(): Promise<RealApiServer> {
  const log: string[] = [];
  const cluster = await Cluster.up({
    nodes: 0,
    apiserverArgs: ['--watch-cache=false'],
    controllers: '*,-nodelifecycle',
    log: (l) => log.push(l),
  });
  try {
    const forward = await cluster.forwardApi();
    const kubectl = cluster.kubectl;
    await kubectl.apply(
      JSON.stringify({ apiVersion: 'v1', kind: 'Node', metadata: { name: NODE, labels: { 'kubernetes.io/hostname': NODE } } }),
    );
    return {
      cluster,
      kubectl,
      forward,
      log,
      kubeConfig() {
        const kc = new KubeConfig();
        kc.loadFromFile(forward.kubeconfig);
        return kc;
      },
      async namespace(name) {
        await kubectl.run(['create', 'namespace', name]);
        await waitUntil(
          `the default ServiceAccount of ${name}`,
          async () => {
            await kubectl.run(['get', 'serviceaccount', 'default', '-n', name], { timeoutMs: 5000 });
            return true;
          },
          { timeoutMs: 20_000, intervalMs: 100 },
        );
        return name;
      },
      async down() {
        await forward.close().catch(() => {});
        await cluster.down();
      },
    };
  } catch (e) {
    await cluster.down();
    throw e;
  }
}

export interface PodOptions {
  ready?: boolean;
  /** The Ready condition's lastTransitionTime (the endpointslice controller's trigger time); default now. */
  readySince?: Date;
}

const podName = (app: string, ip: string) => `${app}-${ip.replaceAll('.', '-')}`;

/**
 * A Service and its Pods in one namespace. Pods are named after their IP
 * (web-10-244-1-5). Every write goes through kubectl from the lab's
 * outside namespace, so it works while the test process's forward is paused.
 */
export class Workload {
  readonly kubectl: Kubectl;
  readonly namespace: string;
  readonly app: string;
  readonly clusterIP: string;

  constructor(api: RealApiServer, namespace: string, app: string, clusterIP: string) {
    this.kubectl = api.kubectl;
    this.namespace = namespace;
    this.app = app;
    this.clusterIP = clusterIP;
  }

  /** Service app: clusterIP:80 -> the Pods' port "http" (8080). */
  async createService(): Promise<void> {
    await this.kubectl.run(['create', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: this.app, namespace: this.namespace },
        spec: {
          clusterIP: this.clusterIP,
          selector: { app: this.app },
          ports: [{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }],
        },
      }),
    });
  }

  async deleteService(): Promise<void> {
    await this.kubectl.run(['delete', 'service', this.app, '-n', this.namespace, '--wait=false']);
  }

  /** Creates Pods bound to the Node, then gives them their IPs and phase Running, as their kubelet would. */
  async addPods(ips: readonly string[], opts: PodOptions = {}): Promise<void> {
    const pods = ips.map((ip) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: podName(this.app, ip), namespace: this.namespace, labels: { app: this.app, ip } },
      spec: {
        nodeName: NODE,
        automountServiceAccountToken: false,
        terminationGracePeriodSeconds: 600,
        containers: [
          { name: 'app', image: 'registry.k8s.io/pause:3.10.1', ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }] },
        ],
      },
    }));
    await this.kubectl.run(['create', '-f', '-'], { input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: pods }) });
    await this.setStatus(ips, opts);
  }

  /** Writes the Pods' status (IP, Running, Ready true/false) through pods/status with server-side apply. */
  async setStatus(ips: readonly string[], opts: PodOptions = {}): Promise<void> {
    const since = (opts.readySince ?? new Date()).toISOString().replace(/\.\d+Z$/, 'Z');
    const items = ips.map((ip) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: podName(this.app, ip), namespace: this.namespace },
      status: {
        phase: 'Running',
        podIP: ip,
        podIPs: [{ ip }],
        hostIP: '172.30.0.10',
        conditions: [{ type: 'Ready', status: opts.ready === false ? 'False' : 'True', lastTransitionTime: since }],
      },
    }));
    await this.kubectl.run(
      ['apply', '--server-side', '--subresource=status', '--field-manager=lab-kubelet', '--force-conflicts', '-f', '-'],
      {
        input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items }),
      },
    );
  }

  /**
   * Deletes Pods. graceful: with a grace period, so they stay (terminating,
   * with a deletionTimestamp) until their kubelet would confirm, which here
   * never happens; otherwise at once (gracePeriodSeconds 0, as --force does).
   */
  async deletePods(ips: readonly string[], opts: { graceful?: boolean } = {}): Promise<void> {
    // One deletecollection (kubectl deletes one object per request, ~140 ms each).
    const query = new URLSearchParams({
      labelSelector: `app=${this.app},ip in (${ips.join(',')})`,
      gracePeriodSeconds: opts.graceful ? '600' : '0',
    });
    await this.kubectl.run(['delete', '--raw', `/api/v1/namespaces/${this.namespace}/pods?${query}`]);
  }

  /** The EndpointSlices the controller wrote for the Service. */
  async slices(): Promise<RealSlice[]> {
    const list = await this.kubectl.json<{ items: RealSlice[] }>([
      'get',
      'endpointslices',
      '-n',
      this.namespace,
      '-l',
      `kubernetes.io/service-name=${this.app}`,
    ]);
    return list.items;
  }

  /** "ip ready/serving/terminating" of every endpoint in the Service's slices, sorted. */
  async endpoints(): Promise<string[]> {
    const out: string[] = [];
    for (const s of await this.slices()) {
      for (const e of s.endpoints ?? []) {
        const c = e.conditions ?? {};
        out.push(`${e.addresses[0]} ${c.ready ? 'R' : '-'}${c.serving ? 'S' : '-'}${c.terminating ? 'T' : '-'}`);
      }
    }
    return out.sort();
  }

  /** Waits until the controller's slices hold exactly these endpoints (see endpoints()). */
  async waitEndpoints(want: readonly string[], limitMs = 20_000): Promise<void> {
    const until = Date.now() + limitMs;
    let got: string[] = [];
    while (Date.now() < until) {
      got = await this.endpoints();
      if (JSON.stringify(got) === JSON.stringify([...want].sort())) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`the endpointslice controller did not write ${JSON.stringify(want)} within ${limitMs} ms: ${JSON.stringify(got)}`);
  }
}

export interface RealSlice {
  metadata: { name: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  endpoints?: Array<{ addresses: string[]; conditions?: { ready?: boolean; serving?: boolean; terminating?: boolean } }> | null;
}

export interface WatchEvent {
  at: number;
  path: string;
  resourceVersion: string | undefined;
  type: string;
  code?: number;
  reason?: string;
}

/**
 * Records the ERROR events that client-node's Watch delivers (every watch in
 * this process goes through Watch.prototype.watch). client-node 2.x reports
 * a 410 to nobody: the informer clears its resourceVersion, relists when the
 * stream ends, and calls no error handler; this is how a test sees it.
 */
export function recordWatchErrors(): { events: WatchEvent[]; restore(): void } {
  const events: WatchEvent[] = [];
  const original = Watch.prototype.watch;
  Watch.prototype.watch = function (this: Watch, path, query, callback, done) {
    const wrapped = (type: string, obj: unknown, raw: unknown) => {
      if (type === 'ERROR') {
        const o = obj as { code?: number; reason?: string };
        events.push({
          at: Date.now(),
          path,
          resourceVersion: (query as { resourceVersion?: string }).resourceVersion,
          type,
          ...(o.code !== undefined ? { code: o.code } : {}),
          ...(o.reason !== undefined ? { reason: o.reason } : {}),
        });
      }
      callback(type, obj, raw);
    };
    return original.call(this, path, query, wrapped, done);
  };
  return {
    events,
    restore() {
      Watch.prototype.watch = original;
    },
  };
}

export interface ApiRequest {
  at: number;
  watch: boolean;
  path: string;
  resourceVersion: string | undefined;
}

/** Records every request a KubeConfig authenticates (the source's lists and watches): method-less, URL only. */
export function recordRequests(kc: KubeConfig): ApiRequest[] {
  const out: ApiRequest[] = [];
  const original = kc.applySecurityAuthentication.bind(kc);
  kc.applySecurityAuthentication = async (ctx) => {
    const url = new URL(ctx.getUrl());
    out.push({
      at: Date.now(),
      watch: url.searchParams.get('watch') === 'true',
      path: url.pathname,
      resourceVersion: url.searchParams.get('resourceVersion') ?? undefined,
    });
    return original(ctx);
  };
  return out;
}
