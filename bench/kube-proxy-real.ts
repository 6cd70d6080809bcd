// The real kube-proxy (Kubernetes' own binary, .tools/cluster/bin/kube-proxy,
// `make cluster-bins`) beside svcmap, both fed by the same real kube-apiserver
// (+ etcd) holding N Services x E endpoints, the shape of the control-plane
// bench. Per N, a fresh etcd and API server; the objects are written through
// the API with concurrency (timed); then, one at a time, kube-proxy in
// nftables mode, kube-proxy in iptables mode (ipvs only if the kernel has
// IPVS) and the svcmap agent run against it in the bench's "node" namespace,
// each measured the same way:
//   - process start -> rules programmed (kube-proxy: its first
//     sync_proxy_rules observation; svcmap: its first full "sync done"),
//     and that first sync's own duration;
//   - RSS after that sync and after a stream of EndpointSlice changes;
//   - under the stream (distinct services, each slice carrying
//     endpoints.kubernetes.io/last-change-trigger-time, as the EndpointSlice
//     controller sets it): kubeproxy_network_programming_duration_seconds and
//     kubeproxy_sync_proxy_rules_duration_seconds from its own /metrics
//     (svcmap: svcmap_network_programming_duration_seconds and its "sync done"
//     lines);
//   - connections/s to the last service from a client pod on the node
//     (bench/client.c, against bench/server.c in 4 backend pods), paired
//     round by round with the client connecting to the pod IPs directly.
//
// Topology (all lab namespaces of this run, no route out, nothing in the root
// namespace): "kpr-cp" holds etcd and kube-apiserver; "kpr-node" is the node
// (bridge 10.244.0.1/24, forwarding on), linked to kpr-cp by a /30 veth;
// backend pods 10.244.0.11-14 and a client pod 10.244.0.100 hang off the
// node's bridge. kube-proxy runs in kpr-node's network namespace and in a
// mount namespace of its own (a private /run: its xtables lock), so its
// iptables / nftables rules land in kpr-node only; the bench checks that the
// root namespace's ruleset and the kernel-wide conntrack settings are the same
// after the run as before. The bench process reaches the API server through a
// unix-socket relay inside kpr-cp (lab/cluster/relay.ts): no port, address or
// route in the root namespace.
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { AgentProcess, type LogLine } from '../lab/agent-process.ts';
import { API_PORT, ControlPlane } from '../lab/cluster/control-plane.ts';
import { bin } from '../lab/cluster/paths.ts';
import { makePki, type Pki, writeKubeconfig } from '../lab/cluster/pki.ts';
import { type Lab, type LabNode, type LabNs, type LabPod, registerTeardown, unregisterTeardown } from '../lab/index.ts';
import { JsonLines, waitReady } from '../lab/jsonl.ts';
import { hasExited, helperEnv, stopProcess } from '../lab/processes.ts';
import { cleanupPins } from '../src/cli/cleanup.ts';
import { diffHistogram, type Histogram, histogramQuantile, isSyncDone, memoryOf, stopAgent } from './agent.ts';
import { fmtDuration, type Budget } from './budget.ts';
import { BACKEND_IPS } from './cluster.ts';
import type { ClientRun } from './datapath.ts';
import { serviceObject, sliceObject } from './manifests.ts';
import type { Binaries } from './native.ts';
import { runProgram } from './proc.ts';
import { histogramOf, parseSamples, type Sample } from './prom.ts';
import { median, pairedMedianRatio, percentile } from './stats.ts';
import {
  type BenchService,
  CLUSTER_CIDR,
  makeServices,
  NAMESPACE,
  PORT,
  SERVICE_CIDR,
  TARGET_PORT,
  vipOf,
  withChangedEndpoint,
} from './workload.ts';

export const REAL_PROXIES = ['nftables', 'iptables', 'ipvs', 'svcmap'] as const;
export type RealProxy = (typeof REAL_PROXIES)[number];

const NODE_NAME = 'kpr-node';
const CP_IP = '172.31.255.1';
const NODE_IP = '172.31.255.2';
export const KP_METRICS = 10249;
const KP_HEALTHZ = 10256;
const CLIENT_IP = '10.244.0.100';
export const SYNC_METRIC = 'kubeproxy_sync_proxy_rules_duration_seconds';
const PROG_METRIC = 'kubeproxy_network_programming_duration_seconds';
const SM_PROG_METRIC = 'svcmap_network_programming_duration_seconds';

export interface Quantile {
  value: number;
  bucketLe: number;
}

export interface RealProxyResult {
  proxy: RealProxy;
  /** Process start -> the N services programmed (polled every 100 ms). */
  startToSyncedMs: number;
  /** That first full sync's own duration (kube-proxy: its sync_proxy_rules observation, exact while count = 1; svcmap: "sync done"). */
  firstSyncMs: number;
  rssAfterSync: number;
  rssAfterChanges: number;
  stream?: {
    changes: number;
    ratePerSec: number;
    /** Network programming latency observations during the stream. */
    observed: number;
    p50: Quantile | undefined;
    p99: Quantile | undefined;
    /** Syncs during the stream: count, p50 / p99 (kube-proxy: histogram quantiles, interpolated; svcmap: exact from its log), mean. */
    syncs: {
      count: number;
      p50Ms: number | undefined;
      p99Ms: number | undefined;
      p50BucketLeMs?: number;
      p99BucketLeMs?: number;
      meanMs: number;
    };
  };
  datapath?: {
    connPerSec: number;
    p50Us: number;
    p99Us: number;
    /** Paired with direct runs in the same rounds (median of per-round ratios). */
    vsDirect: { perConn: number; p50: number; p99: number };
    runs: ClientRun[];
    directRuns: ClientRun[];
  };
  /** Lines of `nft list ruleset` in the node namespace after the first sync (kube-proxy only). */
  rulesetLines?: number;
}

export interface RealSkipped {
  proxy: RealProxy;
  skipped: string;
}

export interface RealKpPoint {
  n: number;
  endpointsPerService: number;
  /** Writing the N Services and N EndpointSlices through the API from empty. */
  load: { ms: number; objects: number; perSec: number; concurrency: number } | { skipped: string };
  proxies: Array<RealProxyResult | RealSkipped>;
}

export interface RealKpResult {
  kubernetesVersion: string;
  endpointsPerService: number;
  points: RealKpPoint[];
  /** Why ipvs mode did not run (when it did not). */
  ipvs: string | undefined;
  safety: { rootRulesetUnchanged: boolean; sysctlsUnchanged: boolean; restored: string[] };
  notes: string[];
}

export function isRealSkipped(r: RealProxyResult | RealSkipped): r is RealSkipped {
  return 'skipped' in r;
}

export interface RealKpOptions {
  lab: Lab;
  bins: Binaries;
  /** CPU of client and servers; the proxies and the control plane get the other one. */
  cpu: number;
  sizes: number[];
  endpointsPerService: number;
  proxies: RealProxy[];
  reps: number;
  durationMs: number;
  warmupMs: number;
  stream: { changes: number; ratePerSec: number };
  /** Loading objects predicted to take longer than this (from the previous N, linearly) is skipped. */
  loadBudgetMs: number;
  concurrency: number;
  budget: Budget;
  workDir: string;
  pinRoot: string;
  log: (s: string) => void;
  /** The svcmap CLI to run (default bin/svcmap of this checkout), e.g. one built from a clean export of a commit. */
  svcmapBin?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether the kernel can do IPVS: undefined if so, else why not. */
export function ipvsUnavailable(): string | undefined {
  if (existsSync('/proc/net/ip_vs')) return undefined;
  let modprobe = '';
  try {
    execFileSync('modprobe', ['ip_vs'], { stdio: ['ignore', 'ignore', 'pipe'] });
    if (existsSync('/proc/net/ip_vs')) return undefined;
    modprobe = 'modprobe ip_vs succeeded but /proc/net/ip_vs is missing';
  } catch (e) {
    const err = e as Error & { code?: string; stderr?: Buffer };
    modprobe =
      err.code === 'ENOENT' ? 'no modprobe on this system' : `modprobe ip_vs failed: ${err.stderr?.toString().trim() || err.message}`;
  }
  let config = '';
  try {
    const cfg = execFileSync('sh', ['-c', 'zcat /proc/config.gz 2>/dev/null | grep -E "^(# )?CONFIG_(IP_VS|MODULES)[ =]"'], {
      encoding: 'utf8',
    }).trim();
    if (cfg) config = ` (kernel config: ${cfg.split('\n').join(', ')})`;
  } catch {
    /* no /proc/config.gz */
  }
  return `the kernel has no IPVS: ${modprobe}${config}`;
}

// ---------------------------------------------------------------- API client

/** HTTPS to the API server through the relay's unix socket, as the admin. */
export class ApiClient {
  readonly #agent: HttpsAgent;
  readonly #socket: string;
  readonly #token: string;

  constructor(socketPath: string, pki: Pki, concurrency: number) {
    this.#socket = socketPath;
    this.#token = pki.adminToken;
    this.#agent = new HttpsAgent({ keepAlive: true, maxSockets: concurrency, ca: readFileSync(pki.caCert) });
  }

  request(method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      const req = httpsRequest(
        {
          socketPath: this.#socket,
          path,
          method,
          agent: this.#agent,
          servername: 'kubernetes',
          headers: {
            host: 'kubernetes',
            authorization: `Bearer ${this.#token}`,
            accept: 'application/json',
            ...(payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {}),
          },
          timeout: 60_000,
        },
        (res) => {
          let text = '';
          res
            .setEncoding('utf8')
            .on('data', (d: string) => {
              text += d;
            })
            .on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timed out`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** A request that must succeed (2xx), retried on 429 / 5xx / connection errors. */
  async must(method: string, path: string, body?: unknown): Promise<string> {
    for (let attempt = 0; ; attempt++) {
      let r: { status: number; text: string } | undefined;
      let err: unknown;
      try {
        r = await this.request(method, path, body);
      } catch (e) {
        err = e;
      }
      if (r && r.status >= 200 && r.status < 300) return r.text;
      const retry = !r || r.status === 429 || r.status >= 500;
      if (!retry || attempt >= 8) throw new Error(`${method} ${path}: ${r ? `${r.status} ${r.text.slice(0, 300)}` : String(err)}`);
      await sleep(100 * 2 ** attempt);
    }
  }

  close(): void {
    this.#agent.destroy();
  }
}

/** Runs f over items with at most `concurrency` in flight. */
async function pool<T>(items: readonly T[], concurrency: number, f: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) await f(items[next++]!);
    }),
  );
}

// ---------------------------------------------------------------- processes

/** A process of ours in a lab namespace, output to a log file. */
export class Proc {
  readonly child: ChildProcess;
  readonly logFile: string;
  readonly name: string;

  constructor(
    lab: Lab,
    ns: LabNs,
    name: string,
    cmd: string,
    args: readonly string[],
    logDir: string,
    opts: { cpu?: number; cgroup?: string } = {},
  ) {
    this.name = name;
    this.logFile = join(logDir, `${name}.log`);
    const fd = openSync(this.logFile, 'a');
    try {
      this.child = lab.spawn(ns, cmd, args, {
        stdio: ['ignore', fd, fd],
        ...(opts.cpu !== undefined ? { cpu: opts.cpu } : {}),
        ...(opts.cgroup !== undefined ? { cgroup: opts.cgroup } : {}),
      });
    } finally {
      closeSync(fd);
    }
  }

  get pid(): number {
    return this.child.pid!;
  }

  logTail(lines = 20): string {
    try {
      return readFileSync(this.logFile, 'utf8')
        .split('\n')
        .slice(-lines - 1)
        .join('\n');
    } catch {
      return '(no log)';
    }
  }

  checkRunning(): void {
    if (!hasExited(this.child)) return;
    throw new Error(
      `${this.name} stopped (${this.child.signalCode ?? `exit ${this.child.exitCode}`}); last lines of ${this.logFile}:\n${this.logTail()}`,
    );
  }

  stop(): Promise<void> {
    return stopProcess(this.child, 5000);
  }
}

// ---------------------------------------------------------------- host state

/** Kernel-wide (not per network namespace) settings kube-proxy could write, as files. */
const GLOBAL_SYSCTLS = [
  '/proc/sys/net/netfilter/nf_conntrack_max',
  '/proc/sys/net/nf_conntrack_max',
  '/sys/module/nf_conntrack/parameters/hashsize',
];
/** Per-namespace on this kernel, but read in the root namespace: must not change either. */
const ROOT_NS_SYSCTLS = [
  '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established',
  '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait',
  '/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal',
  '/proc/sys/net/netfilter/nf_conntrack_udp_timeout',
  '/proc/sys/net/netfilter/nf_conntrack_udp_timeout_stream',
  '/proc/sys/net/ipv4/conf/all/route_localnet',
  '/proc/sys/net/ipv4/ip_forward',
];

function readSysctls(): Map<string, string> {
  const m = new Map<string, string>();
  for (const f of [...GLOBAL_SYSCTLS, ...ROOT_NS_SYSCTLS]) {
    try {
      m.set(f, readFileSync(f, 'utf8').trim());
    } catch {
      /* absent on this kernel */
    }
  }
  return m;
}

function rootRuleset(): string {
  return execFileSync('nft', ['list', 'ruleset'], { encoding: 'utf8', maxBuffer: 1 << 30 });
}

// ---------------------------------------------------------------- the run

interface Env {
  o: RealKpOptions;
  lab: Lab;
  cp: LabNs;
  node: LabNode;
  client: LabPod;
  cgPlain: string;
  cgSvcmap: string;
  proxyCpu: number;
  dir: string;
  logDir: string;
  pki: Pki;
  /** kube-proxy's and svcmap's kubeconfig: the API server over the cp <-> node link. */
  kubeconfig: string;
  socket: string;
}

export async function runRealKubeProxy(o: RealKpOptions): Promise<RealKpResult> {
  for (const b of ['etcd', 'kube-apiserver', 'kube-proxy', 'kubectl'] as const) {
    if (!existsSync(bin(b))) throw new Error(`${bin(b)} is missing: build the Kubernetes binaries first (make cluster-bins)`);
  }
  const version = execFileSync(bin('kube-proxy'), ['--version'], { encoding: 'utf8' }).trim();
  const ipvs = ipvsUnavailable();
  const proxies = o.proxies.filter((p) => p !== 'ipvs' || ipvs === undefined);
  if (o.proxies.includes('ipvs') && ipvs) o.log(`real kube-proxy: ipvs mode not run: ${ipvs}`);

  const rulesBefore = rootRuleset();
  const sysctlsBefore = readSysctls();
  const lab = o.lab;
  const dir = join(o.workDir, 'real-kube-proxy');
  const logDir = join(dir, 'logs');
  mkdirSync(logDir, { recursive: true });

  const cp = await lab.netns('kpr-cp');
  const node = await lab.node('kpr-node', { cidr: '10.244.0.0/24', forward: true });
  await lab.link(cp, node, `${CP_IP}/30`, `${NODE_IP}/30`);
  const backends: LabPod[] = [];
  for (let i = 0; i < BACKEND_IPS.length; i++) backends.push(await lab.pod(node, `kpr-be-${i}`, BACKEND_IPS[i]!));
  const client = await lab.pod(node, 'kpr-client', CLIENT_IP);
  const cgPlain = await lab.cgroup('kpr-plain');
  const cgSvcmap = await lab.cgroup('kpr-svcmap');
  const servers: ChildProcess[] = [];
  for (const pod of backends) {
    const child = lab.spawn(pod, o.bins.server, [String(TARGET_PORT)], { cpu: o.cpu, stdio: ['pipe', 'pipe', 'pipe'] });
    await waitReady(child, new JsonLines(child), `bench server in ${pod.name}`);
    servers.push(child);
  }
  const pki = makePki({ dir: join(dir, 'pki'), apiserverIps: [CP_IP, '127.0.0.1', vipOf(0)], nodes: [] });
  const kubeconfig = writeKubeconfig(join(dir, 'node.kubeconfig'), `https://${CP_IP}:${API_PORT}`, pki.caCert, 'admin', pki.adminToken);
  const proxyCpu = o.cpu === 0 ? 1 : 0;
  const env: Env = { o, lab, cp, node, client, cgPlain, cgSvcmap, proxyCpu, dir, logDir, pki, kubeconfig, socket: join(dir, 'api.sock') };

  const result: RealKpResult = {
    kubernetesVersion: version,
    endpointsPerService: o.endpointsPerService,
    points: [],
    ipvs,
    safety: { rootRulesetUnchanged: true, sysctlsUnchanged: true, restored: [] },
    notes: [],
  };
  let lastLoad: { n: number; ms: number } | undefined;
  try {
    for (const n of o.sizes) {
      const point: RealKpPoint = { n, endpointsPerService: o.endpointsPerService, load: { skipped: 'not run' }, proxies: [] };
      result.points.push(point);
      if (lastLoad) {
        const predicted = lastLoad.ms * (n / lastLoad.n);
        if (predicted > o.loadBudgetMs) {
          point.load = {
            skipped: `loading ${(2 * n).toLocaleString('en-US')} objects predicted to take ${fmtDuration(predicted)} (linearly from ${fmtDuration(lastLoad.ms)} at N=${lastLoad.n}), over the ${fmtDuration(o.loadBudgetMs)} budget`,
          };
          o.log(`real kube-proxy N=${n}: ${point.load.skipped}`);
          for (const p of proxies) point.proxies.push({ proxy: p, skipped: 'the API server was not loaded at this N' });
          continue;
        }
      }
      await runPoint(env, point, proxies, (ms) => {
        lastLoad = { n, ms };
      });
    }
  } finally {
    for (const s of servers) await stopProcess(s, 1000);
    // The node's rules go with its namespace (lab.destroy); emptied here already so that the check below is about the root namespace only.
    await lab.exec(node, 'nft', ['flush', 'ruleset']).catch(() => {});
    const after = readSysctls();
    for (const [f, v] of sysctlsBefore) {
      if (after.get(f) !== v) {
        result.safety.sysctlsUnchanged = false;
        try {
          execFileSync('sh', ['-c', 'echo "$1" > "$2"', 'sh', v, f]);
          result.safety.restored.push(`${f} (${after.get(f)} -> ${v})`);
        } catch (e) {
          result.safety.restored.push(`${f}: could not restore ${v}: ${(e as Error).message}`);
        }
      }
    }
    result.safety.rootRulesetUnchanged = rootRuleset() === rulesBefore;
    if (!result.safety.rootRulesetUnchanged)
      o.log("real kube-proxy: WARNING: the root namespace's nftables ruleset changed during the run");
    if (!result.safety.sysctlsUnchanged)
      o.log(`real kube-proxy: WARNING: kernel settings changed and were restored: ${result.safety.restored.join(', ')}`);
    rmSync(dir, { recursive: true, force: true });
  }
  return result;
}

async function runPoint(env: Env, point: RealKpPoint, proxies: readonly RealProxy[], onLoad: (ms: number) => void): Promise<void> {
  const { o, lab, cp } = env;
  const n = point.n;
  // VIPs from 10.96.0.2: 10.96.0.1 is the API server's own `kubernetes` Service.
  const services = makeServices(n, o.endpointsPerService, BACKEND_IPS).map((s) => ({ ...s, vip: vipOf(s.index + 1) }));
  const cpDir = join(env.dir, `cp-${n}`);
  const control = new ControlPlane({
    lab,
    netns: cp.ns,
    cgroup: await lab.cgroup(`kpr-cp-${n}`),
    dir: cpDir,
    logDir: env.logDir,
    pki: env.pki,
    advertiseIp: CP_IP,
    serviceCidrs: [SERVICE_CIDR],
    log: o.log,
    // Serve many writes and the big lists: the admin is exempt from APF anyway.
    apiserverArgs: ['--max-requests-inflight', '800', '--max-mutating-requests-inflight', '400'],
  });
  let relay: ChildProcess | undefined;
  let api: ApiClient | undefined;
  try {
    o.log(`real kube-proxy N=${n}: etcd and kube-apiserver`);
    control.startEtcd();
    control.startApiserver();
    await control.waitApiserverReady(120_000);
    relay = lab.spawn(
      cp,
      process.execPath,
      [
        '--disable-warning=ExperimentalWarning',
        join(import.meta.dirname, '..', 'lab', 'cluster', 'relay.ts'),
        env.socket,
        '127.0.0.1',
        String(API_PORT),
      ],
      {
        env: helperEnv(),
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    await waitReady(relay, new JsonLines(relay), 'API relay');
    api = new ApiClient(env.socket, env.pki, o.concurrency);

    await api.must('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } });
    await api.must('POST', '/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: NODE_NAME, labels: { 'kubernetes.io/hostname': NODE_NAME } },
      spec: { podCIDR: env.node.cidr, podCIDRs: [env.node.cidr] },
      status: {
        addresses: [
          { type: 'InternalIP', address: NODE_IP },
          { type: 'Hostname', address: NODE_NAME },
        ],
      },
    });
    o.log(
      `real kube-proxy N=${n}: writing ${n} Services and ${n} EndpointSlices (x ${o.endpointsPerService}) through the API, ${o.concurrency} at a time`,
    );
    const t0 = performance.now();
    await pool(services, o.concurrency, async (s) => {
      await api!.must('POST', `/api/v1/namespaces/${NAMESPACE}/services`, serviceObject(s));
      await api!.must('POST', `/apis/discovery.k8s.io/v1/namespaces/${NAMESPACE}/endpointslices`, sliceObject(s));
    });
    const loadMs = performance.now() - t0;
    point.load = { ms: loadMs, objects: 2 * n, perSec: (2 * n) / (loadMs / 1000), concurrency: o.concurrency };
    onLoad(loadMs);
    o.log(`  loaded in ${fmtDuration(loadMs)} (${Math.round(point.load.perSec)} objects/s)`);

    const current = [...services];
    let changeNo = 3_000_000;
    for (const proxy of proxies) {
      // kube-proxy's first sync grows faster than N (iptables-restore / nft -f of the whole ruleset): predicted
      // from the smaller N as the other netfilter loads are. svcmap is only held to the hard limit.
      const op = `real-${proxy}`;
      const a = proxy === 'svcmap' ? { run: true as const, predictedMs: undefined, reason: undefined } : o.budget.attempt(op, n);
      if (!a.run) {
        point.proxies.push({ proxy, skipped: `not started: ${a.reason}` });
        o.log(`real kube-proxy N=${n}: ${proxy} skipped (${a.reason})`);
        continue;
      }
      o.log(
        `real kube-proxy N=${n}: ${proxy === 'svcmap' ? 'svcmap agent' : `kube-proxy --proxy-mode ${proxy}`}${a.predictedMs ? ` (first sync predicted ${fmtDuration(a.predictedMs)})` : ''}`,
      );
      const change = async (i: number): Promise<void> => {
        const next = withChangedEndpoint(current[i]!, changeNo++);
        current[i] = next;
        await api!.must(
          'PUT',
          `/apis/discovery.k8s.io/v1/namespaces/${NAMESPACE}/endpointslices/${next.name}-bench`,
          sliceObject(next, new Date()),
        );
      };
      try {
        const r = proxy === 'svcmap' ? await runSvcmap(env, services, change) : await runKubeProxy(env, proxy, services, change);
        o.budget.record(op, n, r.startToSyncedMs);
        point.proxies.push(r);
        const s = r.stream;
        o.log(
          `  ${proxy}: synced in ${fmtDuration(r.startToSyncedMs)} (sync ${fmtDuration(r.firstSyncMs)}), RSS ${(r.rssAfterSync / 2 ** 20).toFixed(0)} MiB${s ? `, programming p50 ${s.p50 ? fmtDuration(s.p50.value * 1000) : 'n/a'} p99 ${s.p99 ? fmtDuration(s.p99.value * 1000) : 'n/a'} (${s.observed} obs)` : ''}${r.datapath ? `, ${Math.round(r.datapath.connPerSec)} conn/s (x${r.datapath.vsDirect.perConn.toFixed(2)} vs direct)` : ''}`,
        );
      } catch (err) {
        const msg = (err as Error).message.split('\n')[0] ?? String(err);
        if (err instanceof SyncTimeout) o.budget.kill(op, n);
        o.log(`  ${proxy} failed at N=${n}: ${(err as Error).message}`);
        point.proxies.push({ proxy, skipped: `failed: ${msg}` });
      } finally {
        await lab.exec(env.node, 'nft', ['flush', 'ruleset'], { timeoutMs: 600_000 });
      }
    }
  } finally {
    api?.close();
    if (relay) await stopProcess(relay, 1000);
    await control.stop();
    rmSync(cpDir, { recursive: true, force: true });
  }
}

class SyncTimeout extends Error {}

async function scrapeIn(env: Env, port: number): Promise<Sample[]> {
  const text = await env.lab.exec(env.node, 'curl', ['-sS', '--fail', '--max-time', '10', `http://127.0.0.1:${port}/metrics`], {
    timeoutMs: 15_000,
  });
  return parseSamples(text);
}

/** The IPv4 series only, when the metric has an ip_family label (a dual-stack kube-proxy runs two proxiers). */
function familyFilter(samples: readonly Sample[], name: string): Record<string, string> {
  return samples.some((s) => s.name.startsWith(name) && s.labels.ip_family !== undefined) ? { ip_family: 'IPv4' } : {};
}

async function flushConntrack(env: Env): Promise<number> {
  const out = await env.lab.exec(env.node, env.o.bins.ctflush, [], { timeoutMs: 30_000 });
  const r = JSON.parse(out) as { flushed: boolean; before: number; error?: string };
  if (!r.flushed) throw new Error(`conntrack flush in ${env.node.name} failed: ${r.error}`);
  return r.before;
}

async function clientRun(env: Env, ips: string, port: number, cgroup: string): Promise<ClientRun> {
  const { o } = env;
  const flushed = await flushConntrack(env);
  const out = await runProgram(env.lab, env.client, o.bins.client, [ips, String(port), String(o.durationMs), String(o.warmupMs)], {
    cgroup,
    cpu: o.cpu,
    timeoutMs: o.durationMs + o.warmupMs + 60_000,
  });
  const run = { ...(JSON.parse(out) as Omit<ClientRun, 'conntrackFlushed'>), conntrackFlushed: flushed };
  if (run.ok === 0) throw new Error(`client to ${ips}:${port}: no connection succeeded (${JSON.stringify(run.errors)})`);
  return run;
}

/** Rounds of (direct, through the proxy), the order alternating. */
async function datapath(env: Env, vip: string, cgroup: string): Promise<NonNullable<RealProxyResult['datapath']>> {
  const direct: ClientRun[] = [];
  const through: ClientRun[] = [];
  for (let r = 0; r < env.o.reps; r++) {
    const steps: Array<() => Promise<void>> = [
      async () => {
        direct.push(await clientRun(env, BACKEND_IPS.join(','), TARGET_PORT, env.cgPlain));
      },
      async () => {
        through.push(await clientRun(env, vip, PORT, cgroup));
      },
    ];
    if (r % 2) steps.reverse();
    for (const s of steps) await s();
  }
  return {
    connPerSec: median(through.map((x) => x.connPerSec)),
    p50Us: median(through.map((x) => x.connectUs.p50)),
    p99Us: median(through.map((x) => x.connectUs.p99)),
    vsDirect: {
      perConn: pairedMedianRatio(
        direct.map((x) => x.connPerSec),
        through.map((x) => x.connPerSec),
      ),
      p50: pairedMedianRatio(
        through.map((x) => x.connectUs.p50),
        direct.map((x) => x.connectUs.p50),
      ),
      p99: pairedMedianRatio(
        through.map((x) => x.connectUs.p99),
        direct.map((x) => x.connectUs.p99),
      ),
    },
    runs: through,
    directRuns: direct,
  };
}

/** The stream of changes: distinct services (never the measured last one), at a fixed rate. */
async function streamChanges(env: Env, n: number, change: (i: number) => Promise<void>): Promise<number> {
  const { changes, ratePerSec } = env.o.stream;
  const pool = n - 1;
  const count = Math.min(changes, pool);
  if (count <= 0) return 0;
  const stride = pool > 1 ? 104729 % pool || 1 : 1;
  const interval = 1000 / ratePerSec;
  const t0 = performance.now();
  const inflight: Array<Promise<void>> = [];
  for (let c = 0; c < count; c++) {
    const wait = t0 + c * interval - performance.now();
    if (wait > 0) await sleep(wait);
    inflight.push(change((c * stride) % pool));
  }
  await Promise.all(inflight);
  return count;
}

function quantileMs(h: Histogram, q: number): { ms: number | undefined; leMs: number | undefined } {
  const x = histogramQuantile(h, q);
  return { ms: x ? x.value * 1000 : undefined, leMs: x ? x.bucketLe * 1000 : undefined };
}

/**
 * unshare's argv for kube-proxy in the node's network namespace: a mount
 * namespace of its own with a private /run (its xtables lock), then exec
 * kube-proxy (same pid). Kernel-wide conntrack settings stay as they are (see
 * lab/cluster/kube-proxy.ts); metrics and healthz on the namespace's loopback.
 */
export function kubeProxyArgv(kubeconfig: string, mode: 'iptables' | 'nftables' | 'ipvs', nodeName: string, clusterCidr: string): string[] {
  const kpArgs = [
    '--kubeconfig',
    kubeconfig,
    '--proxy-mode',
    mode,
    '--hostname-override',
    nodeName,
    '--cluster-cidr',
    clusterCidr,
    '--conntrack-max-per-core',
    '0',
    '--conntrack-tcp-timeout-established',
    '0',
    '--conntrack-tcp-timeout-close-wait',
    '0',
    '--healthz-bind-address',
    `127.0.0.1:${KP_HEALTHZ}`,
    '--metrics-bind-address',
    `127.0.0.1:${KP_METRICS}`,
    '-v',
    '2',
  ];
  const script = 'mount -t tmpfs -o mode=0755 svcmap-bench-kp-run /run && exec "$0" "$@"';
  return ['--mount', '--propagation', 'private', '--', 'sh', '-c', script, bin('kube-proxy'), ...kpArgs];
}

async function runKubeProxy(
  env: Env,
  mode: 'iptables' | 'nftables' | 'ipvs',
  services: readonly BenchService[],
  change: (i: number) => Promise<void>,
): Promise<RealProxyResult> {
  const { o, lab, node } = env;
  const n = services.length;
  const t0 = performance.now();
  const kp = new Proc(
    lab,
    node,
    `kube-proxy-${mode}-${n}`,
    'unshare',
    kubeProxyArgv(env.kubeconfig, mode, NODE_NAME, CLUSTER_CIDR),
    env.logDir,
    {
      cpu: env.proxyCpu,
      cgroup: env.cgPlain,
    },
  );
  const teardown = {
    emergency: () => {
      try {
        process.kill(kp.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    },
  };
  registerTeardown(teardown);
  try {
    // Synced: its first sync_proxy_rules observation (kube-proxy syncs only once its Service and EndpointSlice informers have listed everything).
    const deadline = t0 + o.budget.hardLimitMs;
    let samples: Sample[] = [];
    let filter: Record<string, string> = {};
    for (;;) {
      kp.checkRunning();
      try {
        samples = await scrapeIn(env, KP_METRICS);
        filter = familyFilter(samples, SYNC_METRIC);
        if (histogramOf(samples, SYNC_METRIC, filter).count >= 1) break;
      } catch {
        /* not serving yet */
      }
      if (performance.now() > deadline)
        throw new SyncTimeout(
          `kube-proxy ${mode}: its first sync did not finish within ${fmtDuration(o.budget.hardLimitMs)}\nlast lines of its log:\n${kp.logTail()}`,
        );
      await sleep(100);
    }
    const startToSyncedMs = performance.now() - t0;
    const first = histogramOf(samples, SYNC_METRIC, filter);
    const firstSyncMs = (first.sum / first.count) * 1000;
    const comm = readFileSync(`/proc/${kp.pid}/comm`, 'utf8').trim();
    if (comm !== 'kube-proxy') throw new Error(`pid ${kp.pid} is ${comm}, not kube-proxy`);
    await sleep(2000); // let the informers' and the first sync's garbage settle as it would
    const rssAfterSync = memoryOf(kp.pid).rss;
    const ruleset = await lab.exec(node, 'nft', ['list', 'ruleset'], { timeoutMs: 600_000 });
    const rulesetLines = ruleset.split('\n').length;
    if (mode === 'nftables' && !/table ip kube-proxy/.test(ruleset))
      throw new Error('kube-proxy nftables: no `ip kube-proxy` table in the node namespace');
    if (mode === 'iptables' && !/KUBE-SERVICES/.test(ruleset))
      throw new Error('kube-proxy iptables: no KUBE-SERVICES chain in the node namespace');

    o.log(`  ${mode}: synced (${fmtDuration(startToSyncedMs)}); datapath`);
    const dp = await datapath(env, services.at(-1)!.vip, env.cgPlain);

    let stream: RealProxyResult['stream'];
    if (n > 1) {
      o.log(`  ${mode}: ${Math.min(o.stream.changes, n - 1)} endpoint changes at ${o.stream.ratePerSec}/s`);
      const before = await scrapeIn(env, KP_METRICS);
      const pf = familyFilter(before, PROG_METRIC);
      const count = await streamChanges(env, n, change);
      const end = performance.now() + 120_000;
      let after = before;
      for (;;) {
        kp.checkRunning();
        after = await scrapeIn(env, KP_METRICS);
        if (histogramOf(after, PROG_METRIC, pf).count - histogramOf(before, PROG_METRIC, pf).count >= count || performance.now() > end)
          break;
        await sleep(250);
      }
      const prog = diffHistogram(histogramOf(after, PROG_METRIC, pf), histogramOf(before, PROG_METRIC, pf));
      const syncs = diffHistogram(histogramOf(after, SYNC_METRIC, filter), histogramOf(before, SYNC_METRIC, filter));
      const s50 = quantileMs(syncs, 0.5);
      const s99 = quantileMs(syncs, 0.99);
      stream = {
        changes: count,
        ratePerSec: o.stream.ratePerSec,
        observed: prog.count,
        p50: histogramQuantile(prog, 0.5),
        p99: histogramQuantile(prog, 0.99),
        syncs: {
          count: syncs.count,
          p50Ms: s50.ms,
          p99Ms: s99.ms,
          ...(s50.leMs !== undefined ? { p50BucketLeMs: s50.leMs } : {}),
          ...(s99.leMs !== undefined ? { p99BucketLeMs: s99.leMs } : {}),
          meanMs: syncs.count ? (syncs.sum / syncs.count) * 1000 : 0,
        },
      };
    }
    const rssAfterChanges = memoryOf(kp.pid).rss;
    return {
      proxy: mode,
      startToSyncedMs,
      firstSyncMs,
      rssAfterSync,
      rssAfterChanges,
      ...(stream ? { stream } : {}),
      datapath: dp,
      rulesetLines,
    };
  } finally {
    await kp.stop();
    unregisterTeardown(teardown);
  }
}

async function runSvcmap(env: Env, services: readonly BenchService[], change: (i: number) => Promise<void>): Promise<RealProxyResult> {
  const { o, lab, node } = env;
  const n = services.length;
  const pinDir = join(o.pinRoot, `real-kp-${n}`);
  const svcEntries = Math.ceil(n * (1 + o.endpointsPerService) * 1.05) + 1024;
  const beEntries = Math.ceil(n * o.endpointsPerService * 1.05) + 1024;
  let agent: AgentProcess | undefined;
  const teardown = { emergency: () => agent?.kill('SIGKILL') };
  registerTeardown(teardown);
  try {
    const t0 = performance.now();
    agent = new AgentProcess(
      [
        '--kubeconfig',
        env.kubeconfig,
        '--node-name',
        NODE_NAME,
        '--cgroup',
        env.cgSvcmap,
        '--pin-dir',
        pinDir,
        '--max-services',
        String(svcEntries),
        '--max-backends',
        String(beEntries),
        '--metrics-bind-address',
        '127.0.0.1:0',
        '--healthz-bind-address',
        '127.0.0.1:0',
      ],
      (cmd, args) => lab.spawn(node, o.svcmapBin ?? cmd, args, { cpu: env.proxyCpu, stdio: ['ignore', 'pipe', 'pipe'] }),
    );
    const running = agent;
    const first = await running.waitFor((l) => isSyncDone(l) && l.full === true && Number(l.frontends) >= n, {
      timeoutMs: o.budget.hardLimitMs,
      what: `"sync done" with ${n} frontends`,
    });
    const startToSyncedMs = performance.now() - t0;
    const pid = running.child.pid!;
    const port = running.lines.find((l) => l.msg === 'serving metrics and health')?.metricsPort;
    await sleep(2000);
    const rssAfterSync = memoryOf(pid).rss;
    o.log(`  svcmap: synced (${fmtDuration(startToSyncedMs)}); datapath`);
    const dp = await datapath(env, services.at(-1)!.vip, env.cgSvcmap);

    let stream: RealProxyResult['stream'];
    if (n > 1 && typeof port === 'number') {
      o.log(`  svcmap: ${Math.min(o.stream.changes, n - 1)} endpoint changes at ${o.stream.ratePerSec}/s`);
      const before = histogramOf(await scrapeIn(env, port), SM_PROG_METRIC);
      const from = running.mark();
      const count = await streamChanges(env, n, change);
      const end = performance.now() + 60_000;
      let after = before;
      for (;;) {
        after = histogramOf(await scrapeIn(env, port), SM_PROG_METRIC);
        if (after.count - before.count >= count || performance.now() > end) break;
        await sleep(100);
      }
      const prog = diffHistogram(after, before);
      const syncs = running.lines
        .slice(from)
        .filter((l: LogLine) => isSyncDone(l) && l.full === false)
        .map((l) => Number(l.durationMs));
      stream = {
        changes: count,
        ratePerSec: o.stream.ratePerSec,
        observed: prog.count,
        p50: histogramQuantile(prog, 0.5),
        p99: histogramQuantile(prog, 0.99),
        syncs: {
          count: syncs.length,
          p50Ms: median(syncs),
          p99Ms: percentile(syncs, 0.99),
          meanMs: syncs.reduce((a, b) => a + b, 0) / (syncs.length || 1),
        },
      };
    }
    const rssAfterChanges = memoryOf(pid).rss;
    return {
      proxy: 'svcmap',
      startToSyncedMs,
      firstSyncMs: Number(first.durationMs),
      rssAfterSync,
      rssAfterChanges,
      ...(stream ? { stream } : {}),
      datapath: dp,
    };
  } finally {
    await stopAgent(agent);
    unregisterTeardown(teardown);
    cleanupPins(pinDir);
  }
}
