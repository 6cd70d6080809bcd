// SNAT at rate: new TCP connections per second from outside the node to a
// NodePort whose one backend is on another node (externalTrafficPolicy
// Cluster, so the node DNATs and SNATs every flow), through svcmap's tc
// datapath and through kube-proxy's iptables rules for the same NodePort
// (KUBE-NODEPORTS -> KUBE-EXT-* -> KUBE-MARK-MASQ, KUBE-SVC-* -> KUBE-SEP-*
// DNAT, KUBE-POSTROUTING MASQUERADE --random-fully: bench/iptables.ts), side
// by side. Issue 13's target: >= 50k new SNATed flows/s sustained, 0 failed.
//
// Topology (lab namespaces of this run only, point-to-point veths, no route
// out): the client has one link to each proxy node ("sm" runs the agent with
// its tc programs on both of its links; "kp" holds the iptables rules), each
// proxy node has a link of its own to the backend node "be", whose pod runs
// bench/server.c. The client connects to each proxy node's address on its
// link (the node's InternalIP); the node SNATs to its address on the link to
// "be" (svcmap: the device map, bpf/lib/snat_addr.h; MASQUERADE: the egress
// device's address). bench/client.c processes run in parallel, each opening
// one connection after another (RST on close, so no TIME_WAIT at the
// client), all on the CPU the server shares; the agent runs on the other.
// Each round runs both modes back to back, the order alternating; conntrack
// is flushed in "kp" before each of its runs.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AgentProcess, SVCMAP } from '../lab/agent-process.ts';
import type { Lab, LabNs } from '../lab/index.ts';
import { JsonLines, waitReady } from '../lab/jsonl.ts';
import { stopProcess } from '../lab/processes.ts';
import { cleanupPins } from '../src/cli/cleanup.ts';
import { stopAgent } from './agent.ts';
import { pinToCpu } from './cluster.ts';
import type { ClientRun } from './datapath.ts';
import { serviceObject, sliceObject } from './manifests.ts';
import type { Binaries } from './native.ts';
import { NetfilterNs } from './netfilter.ts';
import { runProgram } from './proc.ts';
import { median, pairedMedianRatio } from './stats.ts';
import { type BenchService, TARGET_PORT } from './workload.ts';

export const SNAT_MODES = ['svcmap', 'iptables'] as const;
export type SnatMode = (typeof SNAT_MODES)[number];

const NODE_PORT = 30080;
const BACKEND = '10.244.9.10';
const NODE_NAME = 'sn-node';
/** Per mode: the client's link to the proxy node, the proxy node's link to "be" (/30s). */
const NETS: Record<SnatMode, { front: [string, string]; back: [string, string] }> = {
  svcmap: { front: ['10.200.1.1', '10.200.1.2'], back: ['10.200.3.1', '10.200.3.2'] },
  iptables: { front: ['10.200.2.1', '10.200.2.2'], back: ['10.200.4.1', '10.200.4.2'] },
};

export interface SnatOptions {
  lab: Lab;
  bins: Binaries;
  /** The CPU that clients and the server share. */
  cpu: number;
  agentCpu: number;
  reps: number;
  durationMs: number;
  warmupMs: number;
  /** Client processes running at once. */
  processes: number;
  agentTimeoutMs: number;
  workDir: string;
  pinRoot: string;
  log: (s: string) => void;
}

export interface SnatRun {
  /** Summed over the client processes. */
  ok: number;
  failed: number;
  errors: Record<string, number>;
  connPerSec: number;
  seconds: number;
}

export interface SnatModeResult {
  mode: SnatMode;
  /** Median over the rounds. */
  connPerSec: number;
  ok: number;
  failed: number;
  errors: Record<string, number>;
  runs: SnatRun[];
}

export interface SnatResult {
  processes: number;
  durationMs: number;
  reps: number;
  modes: SnatModeResult[];
  /** svcmap's rate over MASQUERADE's, the median of the per-round ratios. */
  svcmapVsIptables: number;
  /** svcmap's tc_ingress drops for want of a SNAT port during its runs. */
  snatPortsExhausted: number;
}

interface Env {
  o: SnatOptions;
  client: LabNs;
  nodes: Record<SnatMode, LabNs>;
}

export async function runSnat(o: SnatOptions): Promise<SnatResult> {
  const { lab } = o;
  const client = await lab.netns('sn-client');
  const be = await lab.node('sn-be', { cidr: '10.244.9.0/24', forward: true });
  const nodes = {} as Record<SnatMode, LabNs>;
  for (const mode of SNAT_MODES) {
    const n = NETS[mode];
    const node = await lab.netns(mode === 'svcmap' ? 'sn-sm' : 'sn-kp');
    await lab.forward(node);
    await lab.link(node, client, `${n.front[0]}/30`, `${n.front[1]}/30`, { names: ['eth0', `to-${mode.slice(0, 3)}`] });
    await lab.link(node, be, `${n.back[0]}/30`, `${n.back[1]}/30`, { names: ['eth1', `from-${mode.slice(0, 3)}`] });
    await lab.route(node, '10.244.9.0/24', n.back[1]);
    nodes[mode] = node;
  }
  const pod = await lab.pod(be, 'sn-srv', BACKEND);
  const server = lab.spawn(pod, o.bins.server, [String(TARGET_PORT)], { cpu: o.cpu, stdio: ['pipe', 'pipe', 'pipe'] });
  let agent: AgentProcess | undefined;
  const pinDir = join(o.pinRoot, 'snat');
  try {
    await waitReady(server, new JsonLines(server), 'bench server in sn-srv');
    const svc: BenchService = { index: 0, name: 'snat', vip: '10.96.200.1', endpoints: [BACKEND], nodePort: NODE_PORT };

    // kube-proxy's rules for it, in "kp".
    const nf = new NetfilterNs(lab, nodes.iptables, o.workDir);
    await nf.iptablesReplace([svc], 60_000);

    // The agent in "sm", on both of its links, with the file source.
    const manifests = join(o.workDir, 'snat-manifests');
    mkdirSync(manifests, { recursive: true });
    const service = serviceObject(svc) as { spec: Record<string, unknown> & { ports: Array<Record<string, unknown>> } };
    service.spec.type = 'NodePort';
    service.spec.externalTrafficPolicy = 'Cluster';
    service.spec.ports[0]!.nodePort = NODE_PORT;
    const node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: NODE_NAME },
      status: { addresses: [{ type: 'InternalIP', address: NETS.svcmap.front[0] }] },
    };
    writeFileSync(
      join(manifests, 'snat.json'),
      JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [service, sliceObject(svc), node] }),
    );
    const cgroup = await lab.cgroup('snat-agent'); // the socket hooks need a cgroup; nothing runs in it
    agent = new AgentProcess(
      [
        '--manifests',
        manifests,
        '--cgroup',
        cgroup,
        '--pin-dir',
        pinDir,
        '--node-name',
        NODE_NAME,
        '--devices',
        'eth0,eth1',
        '--metrics-bind-address',
        '127.0.0.1:0',
        '--healthz-bind-address',
        '127.0.0.1:0',
      ],
      (cmd, args) => lab.spawn(nodes.svcmap, cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }),
    );
    if (agent.child.pid !== undefined) pinToCpu(agent.child.pid, o.agentCpu);
    await agent.waitFor((l) => l.msg === 'tc datapath attached', { timeoutMs: o.agentTimeoutMs, what: 'tc datapath attached' });
    await agent.waitForSync(0, o.agentTimeoutMs);

    const env: Env = { o, client, nodes };
    const exhaustedBefore = await snatExhausted(env, pinDir);
    const runs: Record<SnatMode, SnatRun[]> = { svcmap: [], iptables: [] };
    for (let r = 0; r < o.reps; r++) {
      const order = r % 2 ? [...SNAT_MODES].reverse() : [...SNAT_MODES];
      for (const mode of order) {
        const run = await clientRound(env, mode);
        o.log(`snat round ${r + 1}/${o.reps} ${mode}: ${Math.round(run.connPerSec)} conn/s, ${run.failed} failed`);
        runs[mode].push(run);
      }
    }
    const exhaustedAfter = await snatExhausted(env, pinDir);
    const modes = SNAT_MODES.map((mode): SnatModeResult => {
      const rs = runs[mode];
      const errors: Record<string, number> = {};
      for (const x of rs) for (const [k, v] of Object.entries(x.errors)) errors[k] = (errors[k] ?? 0) + v;
      return {
        mode,
        connPerSec: median(rs.map((x) => x.connPerSec)),
        ok: rs.reduce((a, x) => a + x.ok, 0),
        failed: rs.reduce((a, x) => a + x.failed, 0),
        errors,
        runs: rs,
      };
    });
    return {
      processes: o.processes,
      durationMs: o.durationMs,
      reps: o.reps,
      modes,
      svcmapVsIptables: pairedMedianRatio(
        runs.svcmap.map((x) => x.connPerSec),
        runs.iptables.map((x) => x.connPerSec),
      ),
      snatPortsExhausted: exhaustedAfter - exhaustedBefore,
    };
  } finally {
    await stopAgent(agent);
    try {
      cleanupPins(pinDir);
    } catch (e) {
      o.log(`snat cleanup: ${String(e)}`);
    }
    await stopProcess(server);
  }
}

/** `processes` clients at once against one mode's NodePort; their counts summed. */
async function clientRound(env: Env, mode: SnatMode): Promise<SnatRun> {
  const { o } = env;
  if (mode === 'iptables') {
    const out = await o.lab.exec(env.nodes.iptables, o.bins.ctflush, [], { timeoutMs: 30_000 });
    const r = JSON.parse(out) as { flushed: boolean; error?: string };
    if (!r.flushed) throw new Error(`conntrack flush in sn-kp failed: ${r.error}`);
  }
  const one = () =>
    runProgram(o.lab, env.client, o.bins.client, [NETS[mode].front[0], String(NODE_PORT), String(o.durationMs), String(o.warmupMs)], {
      cpu: o.cpu,
      timeoutMs: o.durationMs + o.warmupMs + 60_000,
    }).then((s) => JSON.parse(s) as Omit<ClientRun, 'conntrackFlushed'>);
  const all = await Promise.all(Array.from({ length: o.processes }, one));
  const errors: Record<string, number> = {};
  for (const x of all) for (const [k, v] of Object.entries(x.errors)) errors[k] = (errors[k] ?? 0) + v;
  const run: SnatRun = {
    ok: all.reduce((a, x) => a + x.ok, 0),
    failed: all.reduce((a, x) => a + x.failed, 0),
    errors,
    connPerSec: all.reduce((a, x) => a + x.connPerSec, 0),
    seconds: Math.max(...all.map((x) => x.seconds)),
  };
  if (run.ok === 0) throw new Error(`snat ${mode}: no connection succeeded (${JSON.stringify(errors)})`);
  return run;
}

/** svcmap's tc_ingress snat_ports_exhausted counter, read from the pins (svcmap status in "sm"). */
async function snatExhausted(env: Env, pinDir: string): Promise<number> {
  const s = JSON.parse(await env.o.lab.exec(env.nodes.svcmap, SVCMAP, ['status', '-o', 'json', '--pin-dir', pinDir])) as {
    counters: Array<{ hook: string; reason: string; packets: number }>;
  };
  return s.counters.find((c) => c.hook === 'tc_ingress' && c.reason === 'snat_ports_exhausted')?.packets ?? 0;
}
