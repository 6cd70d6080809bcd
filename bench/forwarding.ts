// Forwarding at rate: small UDP packets from outside the cluster to a NodePort
// whose one backend is on another node (externalTrafficPolicy Cluster, so the
// node DNATs and SNATs every packet), forwarded packets per second counted at
// the backend and the node's CPU time per forwarded packet, for:
//   routing              no Service at all: the generator sends to the pod's
//                        address through the same kind of node (the ceiling);
//   svcmap-tc            the svcmap agent, its tc programs on both links;
//   svcmap-xdp           the same with --acceleration native (reported as not
//                        built while the agent has no such flag);
//   kube-proxy-nftables  Kubernetes' own kube-proxy (.tools/cluster/bin), fed
//   kube-proxy-iptables  by a real kube-apiserver holding the same Service and
//                        EndpointSlice (as bench/kube-proxy-real.ts runs it).
//
// Topology (namespaces of this run only, point-to-point veths, no route out,
// nothing in the root namespace): the generator namespace "fw-gen" has one
// link to each row's node namespace; each node has a second link to a backend
// pod namespace of its own holding 10.244.9.10. The backend's node is reduced
// to the pod at the far end of the node's link: what the node does is the
// same (the backend is reached through a route and a neighbour on another
// device), and a second forwarding hop would only compete for the two CPUs.
// The kube-proxy nodes also have a link to "fw-cp" (etcd, kube-apiserver).
//
// Where the work runs. A veth's receive work by default runs on the sending
// CPU (veth_xmit -> netif_rx -> that CPU's backlog), so generator and node
// would share a CPU. Measured on this VM (3 s of the generator on CPU 0,
// nothing else arranged, /proc/stat): CPU 0 1.46 s of softirq, CPU 1 0.01 s:
// the node's forwarding ran on the generator's CPU. So the node's
// ingress veth has GRO on, which gives it a NAPI instance (veth_xmit then
// only puts the packet on the NAPI's ring), and threaded NAPI: its poll runs
// in a kthread "napi/<dev>-<id>" that the bench pins to the node CPU and runs
// at SCHED_FIFO 10, so that other processes on this shared machine do not
// decide how much of that CPU the node gets. Everything the node does for a
// packet (GRO, XDP, tc, netfilter, routing, the transmit to the pod and the
// pod's own receive, which runs in the same context through the backlog or
// the pod veth's NAPI) is then accounted to that kthread; the node CPU per
// packet is its run time (/proc/PID/schedstat, ns) plus ksoftirqd's on that
// CPU over the packets counted at the pod. Pinning RPS instead would put the
// node's work in softirq, which this kernel (no IRQ_TIME_ACCOUNTING) only
// samples per tick and mixes with everyone else's; and XDP on a veth runs in
// its NAPI poll, which RPS does not move. A first try had the pod's receive
// in a NAPI kthread of its own on the generator's CPU: the generator starved
// it and 64% of what the node forwarded was dropped at the pod's ring.
// The pod's receive is a netdev-ingress nftables counter that drops what it
// counts (the cheapest delivery there is, the same in every row; an
// application socket would double the per-packet cost on the node's CPU).
//
// The generator (bench/fwdgen.c) sends prebuilt 60-byte frames from FLOWS
// UDP source ports through AF_PACKET with qdisc bypass on the other CPU, at
// SCHED_FIFO too, napping 20 us whenever the node's ring is full (refused
// frames are counted): it outruns the node, so each row runs at the node's
// own limit, without spinning on that CPU. Run as an ordinary process on this
// shared machine (load average 7), it got a third of its CPU and the node sat
// idle two thirds of the time, at a higher cost per packet (fewer packets per
// NAPI poll). Rounds run every row once, back to
// back, the order alternating; ratios are medians of the per-round ratios.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AgentProcess, SVCMAP } from '../lab/agent-process.ts';
import { API_PORT, ControlPlane } from '../lab/cluster/control-plane.ts';
import { bin } from '../lab/cluster/paths.ts';
import { makePki, writeKubeconfig } from '../lab/cluster/pki.ts';
import type { Lab, LabNs } from '../lab/index.ts';
import { JsonLines, waitReady } from '../lab/jsonl.ts';
import { helperEnv, stopProcess } from '../lab/processes.ts';
import { cleanupPins } from '../src/cli/cleanup.ts';
import { stopAgent } from './agent.ts';
import { BpfStats } from './bpf-stats.ts';
import { pinToCpu } from './cluster.ts';
import { ApiClient, KP_METRICS, kubeProxyArgv, Proc, SYNC_METRIC } from './kube-proxy-real.ts';
import { serviceObject, sliceObject } from './manifests.ts';
import type { Binaries } from './native.ts';
import { runProgram } from './proc.ts';
import { histogramOf, parseSamples } from './prom.ts';
import { median, pairedMedianRatio } from './stats.ts';
import { type BenchService, CLUSTER_CIDR, NAMESPACE, SERVICE_CIDR, TARGET_PORT, vipOf } from './workload.ts';

export const FWD_ROWS = ['routing', 'svcmap-tc', 'svcmap-xdp', 'kube-proxy-nftables', 'kube-proxy-iptables'] as const;
export type FwdRow = (typeof FWD_ROWS)[number];

const NODE_PORT = 30090;
const BACKEND = '10.244.9.10';
/** UDP source ports per run: a few conntrack entries, as a handful of clients would make. */
const FLOWS = 64;
const FRAME_BYTES = 60;
/** SCHED_FIFO priority of the node's NAPI kthreads and of the generator. */
const RT_PRIORITY = 10;
/** Per row: a letter for device names, the generator <-> node link, the node <-> pod link (/30s). */
const NETS: Record<FwdRow, { k: string; front: [string, string]; back: [string, string] }> = {
  routing: { k: 'r', front: ['172.30.1.1', '172.30.1.2'], back: ['172.29.1.1', '172.29.1.2'] },
  'svcmap-tc': { k: 't', front: ['172.30.2.1', '172.30.2.2'], back: ['172.29.2.1', '172.29.2.2'] },
  'svcmap-xdp': { k: 'x', front: ['172.30.3.1', '172.30.3.2'], back: ['172.29.3.1', '172.29.3.2'] },
  'kube-proxy-nftables': { k: 'n', front: ['172.30.4.1', '172.30.4.2'], back: ['172.29.4.1', '172.29.4.2'] },
  'kube-proxy-iptables': { k: 'i', front: ['172.30.5.1', '172.30.5.2'], back: ['172.29.5.1', '172.29.5.2'] },
};
/** The kube-proxy nodes' links to the control plane (cp end first). */
const CP_NETS = {
  'kube-proxy-nftables': ['172.31.254.1', '172.31.254.2'],
  'kube-proxy-iptables': ['172.31.254.5', '172.31.254.6'],
} as const;

export interface ForwardingOptions {
  lab: Lab;
  bins: Binaries;
  /** The node's CPU (its NAPI kthread); the generator, agents and kube-proxy get the other one. */
  nodeCpu: number;
  genCpu: number;
  reps: number;
  durationMs: number;
  warmupMs: number;
  agentTimeoutMs: number;
  workDir: string;
  pinRoot: string;
  log: (s: string) => void;
}

export interface FwdRun {
  /** Frames the generator handed to its device, and those refused (the node's ring was full). */
  sent: number;
  refused: number;
  seconds: number;
  /** Counted at the backend pod's ingress. */
  packets: number;
  pps: number;
  /** The node's NAPI kthread's and ksoftirqd's run time on the node CPU. */
  nodeCpuNs: number;
  nsPerPacket: number;
  /** Packets per second of node CPU time: pps per core. */
  perCorePps: number;
  /** Share of the run the node CPU spent on it. */
  nodeBusy: number;
}

export interface FwdRowResult {
  row: FwdRow;
  /** Medians over the rounds. */
  pps: number;
  nsPerPacket: number;
  perCorePps: number;
  nodeBusy: number;
  runs: FwdRun[];
  /** svcmap rows: one more run after the rounds with the kernel's BPF statistics on, its programs' own time per forwarded packet. */
  bpf?: BpfShare;
}

export interface BpfShare {
  /** That run's node CPU per packet (the statistics add their own cost to it). */
  nsPerPacket: number;
  /** The programs' run time per forwarded packet, summed. */
  bpfNsPerPacket: number;
  programs: Array<{ name: string; nsPerRun: number; runsPerPacket: number }>;
}

export interface FwdSkipped {
  row: FwdRow;
  skipped: string;
}

export interface ForwardingResult {
  durationMs: number;
  reps: number;
  flows: number;
  frameBytes: number;
  nodeCpu: number;
  genCpu: number;
  kubernetesVersion?: string;
  rows: Array<FwdRowResult | FwdSkipped>;
  /** Medians of the per-round ratios; absent where a side did not run. */
  ratios: {
    /** Forwarded packets per core, svcmap over kube-proxy nftables. */
    tcVsNftables?: number;
    xdpVsNftables?: number;
    /** CPU per packet over plain routing's. */
    tcCpuVsRouting?: number;
    xdpCpuVsRouting?: number;
    nftablesCpuVsRouting?: number;
    iptablesCpuVsRouting?: number;
  };
}

export function isFwdSkipped(r: FwdRowResult | FwdSkipped): r is FwdSkipped {
  return 'skipped' in r;
}

interface RowEnv {
  row: FwdRow;
  node: LabNs;
  pod: LabNs;
  /** The node's ingress device (named after the run: its NAPI kthread's name must be unique on the machine). */
  ingress: string;
  genDev: string;
  nodeMac: string;
  dst: string;
  dstPort: number;
}

/** Why the agent cannot run the XDP row, or undefined if it can. */
export function xdpUnavailable(): string | undefined {
  const help = execFileSync(SVCMAP, ['agent', '--help'], { encoding: 'utf8' });
  return /--acceleration\b/.test(help) ? undefined : 'not built: the agent has no --acceleration flag yet';
}

export async function runForwarding(o: ForwardingOptions): Promise<ForwardingResult> {
  const { lab } = o;
  const xdpWhyNot = xdpUnavailable();
  const kpWhyNot = ['etcd', 'kube-apiserver', 'kube-proxy'].some((b) => !existsSync(bin(b as 'etcd')))
    ? 'the Kubernetes binaries are missing (make cluster-bins)'
    : undefined;
  const rows = FWD_ROWS.filter((r) => !(r === 'svcmap-xdp' && xdpWhyNot) && !(r.startsWith('kube-proxy') && kpWhyNot));
  const skipped: FwdSkipped[] = [
    ...(xdpWhyNot ? [{ row: 'svcmap-xdp' as const, skipped: xdpWhyNot }] : []),
    ...(kpWhyNot ? FWD_ROWS.filter((r) => r.startsWith('kube-proxy')).map((row) => ({ row, skipped: kpWhyNot })) : []),
  ];

  const dir = join(o.workDir, 'forwarding');
  const logDir = join(dir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const gen = await lab.netns('fw-gen');
  const envs = {} as Record<FwdRow, RowEnv>;
  for (const row of rows) envs[row] = await buildRow(o, gen, row);

  const agents: AgentProcess[] = [];
  const kubeProxies: Proc[] = [];
  let control: ControlPlane | undefined;
  let relay: ReturnType<Lab['spawn']> | undefined;
  let api: ApiClient | undefined;
  let kubernetesVersion: string | undefined;
  const agentPins: Array<[FwdRow, string]> = [];
  try {
    const svc: BenchService = { index: 0, name: 'fwd', vip: vipOf(200), endpoints: [BACKEND], nodePort: NODE_PORT };
    const service = udpNodePort(svc);
    const slice = udpSlice(svc);
    for (const row of ['svcmap-tc', 'svcmap-xdp'] as const) {
      if (!envs[row]) continue;
      const pinDir = join(o.pinRoot, `fwd-${row}`);
      agentPins.push([row, pinDir]);
      agents.push(await startAgent(o, envs[row], service, slice, pinDir, dir));
    }
    const kpRows = (['kube-proxy-nftables', 'kube-proxy-iptables'] as const).filter((r) => envs[r]);
    if (kpRows.length) {
      kubernetesVersion = execFileSync(bin('kube-proxy'), ['--version'], { encoding: 'utf8' }).trim();
      const cp = await lab.netns('fw-cp');
      for (const row of kpRows) {
        const [a, b] = CP_NETS[row];
        await lab.link(cp, envs[row].node, `${a}/30`, `${b}/30`, { names: [`cp-${NETS[row].k}`, 'cp0'] });
      }
      const pki = makePki({ dir: join(dir, 'pki'), apiserverIps: [...kpRows.map((r) => CP_NETS[r][0]), '127.0.0.1', vipOf(0)], nodes: [] });
      control = new ControlPlane({
        lab,
        netns: cp.ns,
        cgroup: await lab.cgroup('fw-cp'),
        dir: join(dir, 'cp'),
        logDir,
        pki,
        advertiseIp: CP_NETS[kpRows[0]!][0],
        serviceCidrs: [SERVICE_CIDR],
        log: o.log,
      });
      o.log('forwarding: etcd and kube-apiserver for kube-proxy');
      control.startEtcd();
      control.startApiserver();
      await control.waitApiserverReady(120_000);
      const socket = join(dir, 'api.sock');
      relay = lab.spawn(
        cp,
        process.execPath,
        [
          '--disable-warning=ExperimentalWarning',
          join(import.meta.dirname, '..', 'lab', 'cluster', 'relay.ts'),
          socket,
          '127.0.0.1',
          String(API_PORT),
        ],
        { env: helperEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
      );
      await waitReady(relay, new JsonLines(relay), 'API relay');
      api = new ApiClient(socket, pki, 4);
      await api.must('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } });
      for (const row of kpRows) await api.must('POST', '/api/v1/nodes', nodeObject(envs[row]));
      await api.must('POST', `/api/v1/namespaces/${NAMESPACE}/services`, service);
      await api.must('POST', `/apis/discovery.k8s.io/v1/namespaces/${NAMESPACE}/endpointslices`, slice);
      for (const row of kpRows) {
        const mode = row === 'kube-proxy-nftables' ? 'nftables' : 'iptables';
        const kubeconfig = writeKubeconfig(
          join(dir, `${row}.kubeconfig`),
          `https://${CP_NETS[row][0]}:${API_PORT}`,
          pki.caCert,
          'admin',
          pki.adminToken,
        );
        const kp = new Proc(
          lab,
          envs[row].node,
          row,
          'unshare',
          kubeProxyArgv(kubeconfig, mode, envs[row].node.name, CLUSTER_CIDR),
          logDir,
          {
            cpu: o.genCpu,
          },
        );
        kubeProxies.push(kp);
        await waitKubeProxy(o, envs[row], kp);
      }
    }

    const runs = {} as Record<FwdRow, FwdRun[]>;
    for (const row of rows) {
      runs[row] = [];
      const w = await measure(o, gen, envs[row], o.warmupMs);
      if (w.packets === 0) throw new Error(`forwarding ${row}: no packet reached the backend in the warm-up (${JSON.stringify(w)})`);
      o.log(`forwarding warm-up ${row}: ${Math.round(w.pps)} pps, ${Math.round(w.nsPerPacket)} ns/packet`);
    }
    for (let r = 0; r < o.reps; r++) {
      const order = r % 2 ? [...rows].reverse() : [...rows];
      for (const row of order) {
        const run = await measure(o, gen, envs[row], o.durationMs);
        runs[row].push(run);
        o.log(
          `forwarding round ${r + 1}/${o.reps} ${row}: ${Math.round(run.pps)} pps at the backend, ${Math.round(run.nsPerPacket)} ns of node CPU per packet (node busy ${(run.nodeBusy * 100).toFixed(0)}%)`,
        );
      }
    }
    const bpf: Partial<Record<FwdRow, BpfShare>> = {};
    for (const [row, pinDir] of agentPins) {
      const share = await bpfShare(o, gen, envs[row], pinDir);
      if (!share) continue;
      bpf[row] = share;
      o.log(
        `forwarding ${row} with BPF statistics: ${Math.round(share.nsPerPacket)} ns/packet, of which its programs ${Math.round(share.bpfNsPerPacket)} ns (${share.programs.map((p) => `${p.name} ${Math.round(p.nsPerRun)} ns x ${p.runsPerPacket.toFixed(2)}`).join(', ')})`,
      );
    }
    const result: ForwardingResult = {
      durationMs: o.durationMs,
      reps: o.reps,
      flows: FLOWS,
      frameBytes: FRAME_BYTES,
      nodeCpu: o.nodeCpu,
      genCpu: o.genCpu,
      ...(kubernetesVersion ? { kubernetesVersion } : {}),
      rows: FWD_ROWS.map(
        (row) =>
          skipped.find((s) => s.row === row) ?? {
            row,
            pps: median(runs[row].map((x) => x.pps)),
            nsPerPacket: median(runs[row].map((x) => x.nsPerPacket)),
            perCorePps: median(runs[row].map((x) => x.perCorePps)),
            nodeBusy: median(runs[row].map((x) => x.nodeBusy)),
            runs: runs[row],
            ...(bpf[row] ? { bpf: bpf[row] } : {}),
          },
      ),
      ratios: {},
    };
    const perCore = (a: FwdRow, b: FwdRow) =>
      runs[a] && runs[b]
        ? pairedMedianRatio(
            runs[a].map((x) => x.perCorePps),
            runs[b].map((x) => x.perCorePps),
          )
        : undefined;
    const cpu = (a: FwdRow) =>
      runs[a] && runs.routing
        ? pairedMedianRatio(
            runs[a].map((x) => x.nsPerPacket),
            runs.routing.map((x) => x.nsPerPacket),
          )
        : undefined;
    const ratios: ForwardingResult['ratios'] = {
      tcVsNftables: perCore('svcmap-tc', 'kube-proxy-nftables'),
      xdpVsNftables: perCore('svcmap-xdp', 'kube-proxy-nftables'),
      tcCpuVsRouting: cpu('svcmap-tc'),
      xdpCpuVsRouting: cpu('svcmap-xdp'),
      nftablesCpuVsRouting: cpu('kube-proxy-nftables'),
      iptablesCpuVsRouting: cpu('kube-proxy-iptables'),
    };
    for (const [k, v] of Object.entries(ratios)) if (v !== undefined) result.ratios[k as keyof typeof ratios] = v;
    return result;
  } finally {
    for (const a of agents) await stopAgent(a);
    for (const kp of kubeProxies) await kp.stop();
    api?.close();
    if (relay) await stopProcess(relay, 1000);
    await control?.stop();
    for (const [, p] of agentPins) {
      try {
        cleanupPins(p);
      } catch (e) {
        o.log(`forwarding cleanup: ${String(e)}`);
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One row's node and backend pod, linked to the generator; its NAPI set up as the module comment says. */
async function buildRow(o: ForwardingOptions, gen: LabNs, row: FwdRow): Promise<RowEnv> {
  const { lab } = o;
  const n = NETS[row];
  const node = await lab.netns(`fw-${row}`);
  const pod = await lab.netns(`fw-be-${n.k}`);
  await lab.forward(node);
  const ingress = `f${lab.id}${n.k}`;
  const genDev = `g${n.k}`;
  await lab.link(gen, node, `${n.front[0]}/30`, `${n.front[1]}/30`, { names: [genDev, ingress] });
  await lab.link(node, pod, `${n.back[0]}/30`, `${n.back[1]}/30`, { names: ['eth1', 'eth0'] });
  await lab.ip(pod, 'addr', 'add', `${BACKEND}/32`, 'dev', 'eth0');
  await lab.route(node, `${BACKEND}/32`, n.back[1], { dev: 'eth1' });
  // The pod has no route to the generator's network: with a strict reverse-path filter it would drop the routing row's packets.
  await lab.sysctl(pod, 'net.ipv4.conf.all.rp_filter', 0);
  await lab.sysctl(pod, 'net.ipv4.conf.eth0.rp_filter', 0);
  // Segmentation off on the senders so that their packets take the receiving veth's NAPI (veth_skb_is_eligible_for_gro).
  await lab.exec(gen, 'ethtool', ['-K', genDev, 'tso', 'off']);
  await lab.exec(node, 'ethtool', ['-K', 'eth1', 'tso', 'off']);
  await lab.exec(node, 'ethtool', ['-K', ingress, 'gro', 'on']);
  await lab.exec(pod, 'ethtool', ['-K', 'eth0', 'gro', 'on']);
  execFileSync('ip', ['netns', 'exec', lab.nsName(node), 'sh', '-c', `echo 1 > /sys/class/net/${ingress}/threaded`]);
  const nft = join(o.workDir, `fw-sink-${n.k}.nft`);
  writeFileSync(
    nft,
    `table netdev fwsink {\n  counter arrived {}\n  chain in {\n    type filter hook ingress device "eth0" priority 0;\n    udp dport ${TARGET_PORT} counter name "arrived" drop\n  }\n}\n`,
  );
  await lab.exec(pod, 'nft', ['-f', nft]);
  const link = JSON.parse(await lab.ip(node, '-j', 'link', 'show', ingress)) as Array<{ address: string }>;
  napiThreads(ingress, o.nodeCpu); // fails early if threaded NAPI did not start
  return {
    row,
    node,
    pod,
    ingress,
    genDev,
    nodeMac: link[0]!.address,
    dst: row === 'routing' ? BACKEND : n.front[1],
    dstPort: row === 'routing' ? TARGET_PORT : NODE_PORT,
  };
}

/** The node ingress's NAPI kthreads, pinned to the node CPU at SCHED_FIFO (again each time: XDP may make new ones). */
function napiThreads(dev: string, cpu: number): number[] {
  const prefix = `napi/${dev}-`.slice(0, 15);
  const pids: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    let comm: string;
    try {
      comm = readFileSync(`/proc/${e}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    if (!comm.startsWith(prefix)) continue;
    const pid = Number(e);
    pinToCpu(pid, cpu);
    execFileSync('chrt', ['-f', '-p', String(RT_PRIORITY), String(pid)], { stdio: 'ignore' });
    pids.push(pid);
  }
  if (!pids.length) throw new Error(`forwarding: no threaded NAPI kthread for ${dev} (${prefix}*)`);
  return pids;
}

function ksoftirqd(cpu: number): number {
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (readFileSync(`/proc/${e}/comm`, 'utf8').trim() === `ksoftirqd/${cpu}`) return Number(e);
    } catch {
      /* gone */
    }
  }
  throw new Error(`no ksoftirqd/${cpu}`);
}

/** Run time in ns (schedstat's first field) summed over the pids. */
function runtimeNs(pids: readonly number[]): number {
  return pids.reduce((a, pid) => a + Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]), 0);
}

async function arrived(o: ForwardingOptions, pod: LabNs): Promise<number> {
  const j = JSON.parse(await o.lab.exec(pod, 'nft', ['-j', 'list', 'counter', 'netdev', 'fwsink', 'arrived'])) as {
    nftables: Array<{ counter?: { packets: number } }>;
  };
  const c = j.nftables.find((x) => x.counter)?.counter;
  if (!c) throw new Error('forwarding: no counter "arrived" in the backend pod');
  return c.packets;
}

async function measure(o: ForwardingOptions, gen: LabNs, e: RowEnv, ms: number): Promise<FwdRun> {
  const pids = [...napiThreads(e.ingress, o.nodeCpu), ksoftirqd(o.nodeCpu)];
  const p0 = await arrived(o, e.pod);
  const t0 = runtimeNs(pids);
  const out = await runProgram(
    o.lab,
    gen,
    'chrt',
    [
      '-f',
      String(RT_PRIORITY),
      o.bins.fwdgen,
      e.genDev,
      e.nodeMac,
      NETS[e.row].front[0],
      e.dst,
      String(e.dstPort),
      String(FLOWS),
      String(ms),
    ],
    { cpu: o.genCpu, timeoutMs: ms + 60_000 },
  );
  const g = JSON.parse(out) as { sent: number; dropped: number; seconds: number; pps: number };
  const t1 = runtimeNs(pids);
  const packets = (await arrived(o, e.pod)) - p0;
  const nodeCpuNs = t1 - t0;
  return {
    sent: g.sent,
    refused: g.dropped,
    seconds: g.seconds,
    packets,
    pps: packets / g.seconds,
    nodeCpuNs,
    nsPerPacket: packets ? nodeCpuNs / packets : Number.NaN,
    perCorePps: nodeCpuNs ? packets / (nodeCpuNs / 1e9) : 0,
    nodeBusy: nodeCpuNs / (g.seconds * 1e9),
  };
}

/**
 * One run of an svcmap row with the kernel's BPF statistics on (bench/bpfstats.c --ids): the run time of
 * the agent's tc / XDP programs (their links pinned under <pin dir>/links) per forwarded packet.
 */
async function bpfShare(o: ForwardingOptions, gen: LabNs, e: RowEnv, pinDir: string): Promise<BpfShare | undefined> {
  const linksDir = join(pinDir, 'links');
  const names = new Map<number, string>();
  for (const f of readdirSync(linksDir)) {
    if (!/^svcmap_(tc|xdp)/.test(f)) continue;
    const link = JSON.parse(execFileSync('bpftool', ['-j', 'link', 'show', 'pinned', join(linksDir, f)], { encoding: 'utf8' })) as {
      prog_id: number;
    };
    names.set(link.prog_id, f.split('@')[0]!);
  }
  const ids = [...names.keys()];
  if (!ids.length) return undefined;
  const stats = await BpfStats.start<Record<string, { ns: number; cnt: number }>>(o.bins.bpfstats, ['--ids', ids.join(',')]);
  if (!stats) return undefined;
  try {
    const a = await stats.sample();
    const run = await measure(o, gen, e, o.durationMs);
    const b = await stats.sample();
    const programs = ids.map((id) => {
      const ns = b[id]!.ns - a[id]!.ns;
      const cnt = b[id]!.cnt - a[id]!.cnt;
      return { name: names.get(id)!, nsPerRun: cnt ? ns / cnt : 0, runsPerPacket: run.packets ? cnt / run.packets : 0, ns };
    });
    return {
      nsPerPacket: run.nsPerPacket,
      bpfNsPerPacket: programs.reduce((x, p) => x + p.ns, 0) / Math.max(1, run.packets),
      programs: programs.map(({ name, nsPerRun, runsPerPacket }) => ({ name, nsPerRun, runsPerPacket })),
    };
  } finally {
    stats.stop();
  }
}

function udpNodePort(s: BenchService): Record<string, unknown> {
  const service = serviceObject(s) as { spec: Record<string, unknown> & { ports: Array<Record<string, unknown>> } };
  service.spec.type = 'NodePort';
  service.spec.externalTrafficPolicy = 'Cluster';
  service.spec.ports[0]!.protocol = 'UDP';
  service.spec.ports[0]!.nodePort = NODE_PORT;
  return service;
}

function udpSlice(s: BenchService): Record<string, unknown> {
  const slice = sliceObject(s) as { ports: Array<Record<string, unknown>>; endpoints: Array<Record<string, unknown>> };
  slice.ports[0]!.protocol = 'UDP';
  // The backend's node is none of the proxies' nodes: every row forwards to a remote backend.
  for (const ep of slice.endpoints) ep.nodeName = 'fw-backend-node';
  return slice;
}

function nodeObject(e: RowEnv): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: e.node.name, labels: { 'kubernetes.io/hostname': e.node.name } },
    status: { addresses: [{ type: 'InternalIP', address: NETS[e.row].front[1] }] },
  };
}

async function startAgent(
  o: ForwardingOptions,
  e: RowEnv,
  service: Record<string, unknown>,
  slice: Record<string, unknown>,
  pinDir: string,
  dir: string,
): Promise<AgentProcess> {
  const manifests = join(dir, `manifests-${e.row}`);
  mkdirSync(manifests, { recursive: true });
  writeFileSync(join(manifests, 'fwd.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [service, slice, nodeObject(e)] }));
  const cgroup = await o.lab.cgroup(`fw-${e.row}`); // the socket hooks need a cgroup; nothing runs in it
  const agent = new AgentProcess(
    [
      '--manifests',
      manifests,
      '--cgroup',
      cgroup,
      '--pin-dir',
      pinDir,
      '--node-name',
      e.node.name,
      '--devices',
      `${e.ingress},eth1`,
      ...(e.row === 'svcmap-xdp' ? ['--acceleration', 'native'] : []),
      '--metrics-bind-address',
      '127.0.0.1:0',
      '--healthz-bind-address',
      '127.0.0.1:0',
    ],
    (cmd, args) => o.lab.spawn(e.node, cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  if (agent.child.pid !== undefined) pinToCpu(agent.child.pid, o.genCpu);
  await agent.waitFor((l) => l.msg === 'tc datapath attached', { timeoutMs: o.agentTimeoutMs, what: 'tc datapath attached' });
  await agent.waitForSync(0, o.agentTimeoutMs);
  return agent;
}

/** kube-proxy's first sync done and the NodePort in the node's ruleset (polled, with the agent timeout as the deadline). */
async function waitKubeProxy(o: ForwardingOptions, e: RowEnv, kp: Proc): Promise<void> {
  const deadline = performance.now() + o.agentTimeoutMs;
  for (;;) {
    kp.checkRunning();
    try {
      const text = await o.lab.exec(e.node, 'curl', ['-sS', '--fail', '--max-time', '5', `http://127.0.0.1:${KP_METRICS}/metrics`], {
        timeoutMs: 10_000,
      });
      if (histogramOf(parseSamples(text), SYNC_METRIC, {}).count >= 1) {
        const ruleset = await o.lab.exec(e.node, 'nft', ['list', 'ruleset']);
        if (ruleset.includes(String(NODE_PORT))) return;
      }
    } catch {
      /* not serving yet */
    }
    if (performance.now() > deadline)
      throw new Error(`${e.row}: kube-proxy did not program the NodePort in time; its log:\n${kp.logTail()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
