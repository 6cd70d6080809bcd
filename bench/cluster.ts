// The bench's namespace cluster: one node (bridge 10.244.0.1/24), four
// backend pods running the C accept-and-close server, three client pods
// (svcmap + direct; iptables shape; nftables shape - separate namespaces so
// that one shape's rules never sit in another's path), two cgroups (one with
// svcmap's socket hooks, one without), and the agent. Client pods have a
// default route to the node, which has no route out, so connect() to a VIP
// reaches the nat OUTPUT hook in the iptables/nftables namespaces and goes
// nowhere unless translated.
import { type ChildProcess, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentProcess } from '../lab/agent-process.ts';
import { type Lab, type LabNode, type LabPod, registerTeardown, unregisterTeardown } from '../lab/index.ts';
import { JsonLines, waitReady } from '../lab/jsonl.ts';
import { cleanupPins } from '../src/cli/cleanup.ts';
import { memoryOf, startAgent, stopAgent } from './agent.ts';
import { writeManifestDir } from './manifests.ts';
import type { Binaries } from './native.ts';
import type { BenchService } from './workload.ts';
import { TARGET_PORT } from './workload.ts';

export const BACKEND_IPS = ['10.244.0.11', '10.244.0.12', '10.244.0.13', '10.244.0.14'];
/** The same pods' IPv6 addresses (unique local, inside the lab only), for the IPv6 datapath rows. */
export const BACKEND_IPS6 = ['fd00:10:244::11', 'fd00:10:244::12', 'fd00:10:244::13', 'fd00:10:244::14'];
const NODE_IP6 = 'fd00:10:244::1';
const CLIENT_IP6 = 'fd00:10:244::100';

/** Sets the CPU affinity of every thread of a process (taskset -a -p). */
export function pinToCpu(pid: number, cpu: number): void {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' });
  } catch {
    /* the process may already be gone; its start is then reported anyway */
  }
}

export interface ClusterOptions {
  lab: Lab;
  bins: Binaries;
  /** The CPU that clients and servers share. */
  cpu: number;
  /** Map sizes for the datapath agent (the largest N it will hold). */
  maxServices: number;
  maxBackends: number;
  pinDir: string;
  /** The agent's --lb-algorithm (the datapath's services have no annotation); default: the agent's own (random). */
  lbAlgorithm?: string;
}

export class BenchCluster {
  readonly lab: Lab;
  readonly bins: Binaries;
  readonly cpu: number;
  readonly pinDir: string;
  readonly manifests: string;
  readonly #maxServices: number;
  readonly #maxBackends: number;
  readonly #lbAlgorithm: string | undefined;
  node!: LabNode;
  backends: LabPod[] = [];
  clientSm!: LabPod;
  clientIpt!: LabPod;
  clientNft!: LabPod;
  /** Processes in this cgroup go through svcmap's socket hooks. */
  cgSvcmap!: string;
  /** No hooks: direct, iptables and nftables clients. */
  cgPlain!: string;
  agent: AgentProcess | undefined;
  readonly #servers: ChildProcess[] = [];
  readonly #teardown = { emergency: () => this.#emergency() };

  constructor(o: ClusterOptions) {
    this.lab = o.lab;
    this.bins = o.bins;
    this.cpu = o.cpu;
    this.pinDir = o.pinDir;
    this.#maxServices = o.maxServices;
    this.#maxBackends = o.maxBackends;
    this.#lbAlgorithm = o.lbAlgorithm;
    this.manifests = mkdtempSync(join(tmpdir(), `svcmap-bench-${o.lab.id}-`));
    registerTeardown(this.#teardown);
  }

  #emergency(): void {
    this.agent?.kill('SIGKILL');
    try {
      cleanupPins(this.pinDir);
    } catch {
      /* best effort */
    }
    rmSync(this.manifests, { recursive: true, force: true });
  }

  async setup(): Promise<void> {
    const lab = this.lab;
    this.node = await lab.node('node', { cidr: '10.244.0.0/24' });
    await lab.ipv6(this.node, NODE_IP6, { dev: this.node.bridge });
    for (let i = 0; i < BACKEND_IPS.length; i++) {
      const pod = await lab.pod(this.node, `be-${i}`, BACKEND_IPS[i]!);
      await lab.ipv6(pod, BACKEND_IPS6[i]!, { dev: pod.ifname, gateway: NODE_IP6 });
      this.backends.push(pod);
      await this.#server(pod);
    }
    this.clientSm = await lab.pod(this.node, 'cl-svcmap', '10.244.0.100');
    await lab.ipv6(this.clientSm, CLIENT_IP6, { dev: this.clientSm.ifname, gateway: NODE_IP6 });
    this.clientIpt = await lab.pod(this.node, 'cl-iptables', '10.244.0.101');
    this.clientNft = await lab.pod(this.node, 'cl-nftables', '10.244.0.102');
    this.cgSvcmap = await lab.cgroup('svcmap');
    this.cgPlain = await lab.cgroup('plain');
  }

  async #server(pod: LabPod): Promise<void> {
    const child = this.lab.spawn(pod, this.bins.server, [String(TARGET_PORT)], { cpu: this.cpu, stdio: ['pipe', 'pipe', 'pipe'] });
    const lines = new JsonLines(child);
    await waitReady(child, lines, `bench server in ${pod.name}`);
    this.#servers.push(child);
  }

  /** Replaces the agent's services: restarts it on the new manifests (same pins, same cgroup) and waits for the sync. */
  async programSvcmap(
    services: readonly BenchService[],
    timeoutMs: number,
  ): Promise<{ startToSyncMs: number; syncMs: number; rss: number }> {
    await stopAgent(this.agent);
    this.agent = undefined;
    writeManifestDir(this.manifests, services);
    const started = await startAgent(
      [
        '--manifests',
        this.manifests,
        '--cgroup',
        this.cgSvcmap,
        '--pin-dir',
        this.pinDir,
        '--max-services',
        String(this.#maxServices),
        '--max-backends',
        String(this.#maxBackends),
        '--metrics-bind-address',
        '127.0.0.1:0',
        '--healthz-bind-address',
        '127.0.0.1:0',
        ...(this.#lbAlgorithm ? ['--lb-algorithm', this.#lbAlgorithm] : []),
      ],
      services.length,
      timeoutMs,
      (a) => {
        this.agent = a;
        // Keep the agent (its parsing, its GC) off the CPU that clients and servers share.
        if (a.child.pid !== undefined) pinToCpu(a.child.pid, this.agentCpu);
      },
    );
    return { startToSyncMs: started.startToSyncMs, syncMs: Number(started.firstSync.durationMs), rss: memoryOf(started.pid).rss };
  }

  /** The other CPU (when there is one): where the agent runs. */
  get agentCpu(): number {
    return availableParallelism() > 1 ? (this.cpu === 0 ? 1 : 0) : this.cpu;
  }

  async destroy(): Promise<void> {
    await stopAgent(this.agent);
    this.agent = undefined;
    try {
      cleanupPins(this.pinDir);
    } finally {
      rmSync(this.manifests, { recursive: true, force: true });
      unregisterTeardown(this.#teardown);
    }
  }
}
