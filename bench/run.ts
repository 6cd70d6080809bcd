// make bench / make bench-smoke: svcmap against kube-proxy's iptables and
// nftables shapes, datapath and control plane, in one run, in network
// namespaces this process creates (see lab/). Prints markdown tables and
// writes <out>/<timestamp>.json, <out>/latest.json, <out>/chart.svg and
// <out>/summary.md (default out: bench/results; --smoke: build/bench/smoke).
//
//   node bench/run.ts [--smoke] [--only datapath,datapath6,lb,control,files,churn,snat,forwarding,real-kube-proxy] [--out DIR] [--budget-s S] [--cpu N]
//                     [--datapath-sizes 1,1000,...] [--control-sizes 1,1000,...] [--real-sizes 1000,10000,...]
//                     [--lb-algorithm NAME]   the datapath part's svcmap agent with this node default (e.g. lc)
//                     [--algorithm-sizes 1,10000]   the N at which the datapath part measures every algorithm beside random
//                     [--file-sizes 1000,10000] [--file-layouts json,yaml-one-file,yaml-file-each] [--churn-minutes M]
//   node bench/run.ts --only churn --churn-minutes 6   the churn soak alone: 2 min warm-up, then 6 min measured
//   node bench/run.ts --only real-kube-proxy   the real kube-proxy beside svcmap alone (bench/kube-proxy-real.ts)
//   node bench/run.ts --only forwarding   forwarded packets/s and CPU per packet, svcmap beside kube-proxy (bench/forwarding.ts)
//   node bench/run.ts --render [--out DIR]   chart and summary again from <out>/latest.json, no measuring
//
// Network safety: every address, route and rule lives in a lab namespace; the
// kube-proxy-shaped rules are loaded with nsenter into lab namespaces only;
// the agent's hooks attach to lab cgroups only. Everything is removed on exit,
// on error and on Ctrl-C (the lab's teardown plus ours below).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { assertBuilt } from '../lab/agent-process.ts';
import { Lab, registerTeardown, unregisterTeardown } from '../lab/index.ts';
import { ensureBpffs, labPinDir, removePinDir, sweepStalePins } from '../lab/pins.ts';
import { Budget } from './budget.ts';
import { chartSvg } from './chart.ts';
import { BenchCluster } from './cluster.ts';
import { type ControlPlaneResult, runControlPlane } from './control-plane.ts';
import { type DatapathPoint, runDatapath } from './datapath.ts';
import { type RealKpResult, type RealProxy, runRealKubeProxy } from './kube-proxy-real.ts';
import { type LbResult, runLbQuality } from './lb-quality.ts';
import { maglevDisruptionOf } from './maglev-disruption.ts';
import { describeMachine } from './machine.ts';
import { buildNative, ROOT } from './native.ts';
import { type SnatResult, runSnat } from './snat.ts';
import { type ForwardingResult, runForwarding } from './forwarding.ts';
import { type ChurnResult, churnTable, runChurn } from './churn.ts';
import { type FileSourceResult, fileSourceTable, runFileSource } from './cp-files.ts';
import { MANIFEST_LAYOUTS, type ManifestLayout } from './manifests.ts';
import { makeServices } from './workload.ts';
import { LB_ALGORITHM_NAMES } from '../src/maps/constants.ts';
import {
  algorithmCostTable,
  controlPlaneTables,
  datapath6Table,
  datapathTables,
  lbTable,
  realKubeProxyTables,
  snatTable,
  forwardingTable,
  summaryMarkdown,
  targetsTable,
  behind,
} from './report.ts';
import type { AgentTargetInputs } from './agent-targets.ts';
import { type BenchResults, evaluateTargets } from './results.ts';

interface Config {
  mode: 'full' | 'smoke';
  datapathSizes: number[];
  /** The IPv6 rows (datapath6): IPv6-only Services, direct vs svcmap. */
  datapath6Sizes: number[];
  /** The N at which the datapath part also measures every other algorithm beside random, and which ones. */
  algorithmCost: { sizes: number[]; names: string[]; reps: number };
  reps: number;
  durationMs: number;
  warmupMs: number;
  controlSizes: number[];
  controlEndpoints: number;
  engineReps: { partial: number; full: number };
  agentChangeReps: number;
  netfilterChangeReps: number;
  stream: { n: number; changes: number; ratePerSec: number };
  /** algorithms: the svcmap.io/lb-algorithm values to run (default: every one svcmap implements). */
  lb: { connections: number; trials: number; algorithms?: string[] };
  budgetMs: number;
  agentTimeoutMs: number;
  /** The real kube-proxy beside svcmap under a real kube-apiserver (bench/kube-proxy-real.ts). */
  real: {
    sizes: number[];
    proxies: RealProxy[];
    reps: number;
    stream: { changes: number; ratePerSec: number };
    loadBudgetMs: number;
    concurrency: number;
  };
  /** New SNATed TCP flows/s through a NodePort, svcmap beside MASQUERADE (bench/snat.ts). */
  snat: { reps: number; durationMs: number; warmupMs: number; processes: number };
  /** Forwarded UDP packets/s and node CPU per packet through a NodePort: routing, svcmap tc / XDP, kube-proxy nftables / iptables (bench/forwarding.ts). */
  forwarding: { reps: number; durationMs: number; warmupMs: number };
  /** The file source through the agent: N services from a manifest directory laid out each way, and one changed file (bench/cp-files.ts). */
  files: { sizes: number[]; layouts: readonly ManifestLayout[]; changeReps: number };
  /** The churn soak (bench/churn.ts): RSS under steady EndpointSlice changes. */
  churn: { n: number; ratePerSec: number; warmupMs: number; durationMs: number; sampleMs: number; flatPct: number };
}

const FULL: Config = {
  mode: 'full',
  datapathSizes: [1, 1000, 10_000, 100_000],
  datapath6Sizes: [1, 10_000],
  algorithmCost: { sizes: [1, 10_000], names: LB_ALGORITHM_NAMES.filter((a) => a !== 'random'), reps: 10 },
  reps: 15,
  durationMs: 1000,
  warmupMs: 300,
  controlSizes: [1, 1000, 10_000, 100_000],
  controlEndpoints: 10,
  engineReps: { partial: 200, full: 3 },
  agentChangeReps: 30,
  netfilterChangeReps: 3,
  stream: { n: 10_000, changes: 1000, ratePerSec: 100 },
  lb: { connections: 200, trials: 3 },
  budgetMs: 300_000,
  agentTimeoutMs: 600_000,
  real: {
    sizes: [1000, 10_000, 100_000],
    proxies: ['nftables', 'iptables', 'ipvs', 'svcmap'],
    reps: 10,
    stream: { changes: 1000, ratePerSec: 100 },
    loadBudgetMs: 180_000,
    concurrency: 32,
  },
  snat: { reps: 3, durationMs: 30_000, warmupMs: 1000, processes: 4 },
  forwarding: { reps: 6, durationMs: 5000, warmupMs: 1000 },
  files: { sizes: [1000, 10_000], layouts: MANIFEST_LAYOUTS, changeReps: 10 },
  // The issue's soak: 1k services, ~100 changes/s, 2 min warm-up, then to minute 30.
  churn: { n: 1000, ratePerSec: 100, warmupMs: 120_000, durationMs: 28 * 60_000, sampleMs: 30_000, flatPct: 2 },
};

const SMOKE: Config = {
  mode: 'smoke',
  datapathSizes: [1, 100],
  datapath6Sizes: [1, 100],
  algorithmCost: { sizes: [1], names: ['lc', 'maglev'], reps: 1 },
  reps: 1,
  durationMs: 200,
  warmupMs: 50,
  controlSizes: [1, 100],
  controlEndpoints: 10,
  engineReps: { partial: 5, full: 1 },
  agentChangeReps: 3,
  netfilterChangeReps: 1,
  stream: { n: 100, changes: 20, ratePerSec: 100 },
  lb: { connections: 20, trials: 2, algorithms: ['random', 'lc'] },
  budgetMs: 30_000,
  agentTimeoutMs: 60_000,
  real: {
    sizes: [100],
    proxies: ['nftables', 'iptables', 'svcmap'],
    reps: 1,
    stream: { changes: 20, ratePerSec: 100 },
    loadBudgetMs: 30_000,
    concurrency: 16,
  },
  snat: { reps: 1, durationMs: 300, warmupMs: 50, processes: 2 },
  forwarding: { reps: 1, durationMs: 300, warmupMs: 100 },
  files: { sizes: [100], layouts: MANIFEST_LAYOUTS, changeReps: 2 },
  churn: { n: 100, ratePerSec: 50, warmupMs: 5000, durationMs: 10_000, sampleMs: 5000, flatPct: 2 },
};

const say = (s: string) => process.stdout.write(`${s}\n`);
const log = (s: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${s}\n`);

function checkTools(): void {
  for (const t of ['gcc', 'taskset', 'nsenter', 'iptables-restore', 'nft', 'ip', 'ethtool', 'chrt']) {
    try {
      execFileSync('sh', ['-c', `command -v ${t}`], { stdio: 'ignore' });
    } catch {
      throw new Error(`the bench needs ${t} (make deps installs it)`);
    }
  }
}

function iptablesBackend(): string {
  try {
    const v = execFileSync('iptables-restore', ['--version'], { encoding: 'utf8' });
    return /nf_tables/.test(v) ? 'nf_tables' : /legacy/.test(v) ? 'legacy' : v.trim();
  } catch {
    return 'unknown';
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      smoke: { type: 'boolean', default: false },
      render: { type: 'boolean', default: false },
      only: { type: 'string' },
      out: { type: 'string' },
      'budget-s': { type: 'string' },
      cpu: { type: 'string' },
      'datapath-sizes': { type: 'string' },
      'control-sizes': { type: 'string' },
      'real-sizes': { type: 'string' },
      'lb-algorithm': { type: 'string' },
      'algorithm-sizes': { type: 'string' },
      'file-sizes': { type: 'string' },
      'file-layouts': { type: 'string' },
      'churn-minutes': { type: 'string' },
    },
  });
  const outDir = values.out ?? (values.smoke ? join(ROOT, 'build', 'bench', 'smoke') : join(ROOT, 'bench', 'results'));
  if (values.render) {
    const results = JSON.parse(readFileSync(join(outDir, 'latest.json'), 'utf8')) as BenchResults & AgentTargetInputs;
    writeReport({ ...results, targets: evaluateTargets(results) }, outDir);
    say(`rendered ${join(outDir, 'summary.md')} and chart.svg from ${join(outDir, 'latest.json')}`);
    return;
  }
  if (process.getuid?.() !== 0) throw new Error('the bench needs root (network namespaces, cgroups, BPF, netfilter)');
  const cfg: Config = { ...(values.smoke ? SMOKE : FULL) };
  if (values['budget-s']) cfg.budgetMs = Number(values['budget-s']) * 1000;
  const sizes = (v: string) =>
    v.split(',').map((x) => {
      const n = Number(x.trim().replace(/k$/i, '000'));
      if (!Number.isInteger(n) || n < 1 || n > 400_000) throw new Error(`bad size ${x}`);
      return n;
    });
  if (values['datapath-sizes']) cfg.datapathSizes = sizes(values['datapath-sizes']);
  if (values['algorithm-sizes']) cfg.algorithmCost = { ...cfg.algorithmCost, sizes: sizes(values['algorithm-sizes']) };
  if (values['control-sizes']) {
    cfg.controlSizes = sizes(values['control-sizes']);
    if (!cfg.controlSizes.includes(cfg.stream.n)) cfg.stream = { ...cfg.stream, n: cfg.controlSizes.at(-1)! };
  }
  if (values['real-sizes']) cfg.real = { ...cfg.real, sizes: sizes(values['real-sizes']) };
  if (values['file-sizes']) cfg.files = { ...cfg.files, sizes: sizes(values['file-sizes']) };
  if (values['file-layouts']) {
    const layouts = values['file-layouts'].split(',').map((x) => x.trim());
    for (const l of layouts)
      if (!(MANIFEST_LAYOUTS as readonly string[]).includes(l))
        throw new Error(`--file-layouts: unknown layout ${l} (${MANIFEST_LAYOUTS.join(', ')})`);
    cfg.files = { ...cfg.files, layouts: layouts as ManifestLayout[] };
  }
  if (values['churn-minutes']) {
    const m = Number(values['churn-minutes']);
    if (!(m > 0))
      throw new Error(`--churn-minutes: must be more than 0 (the minutes measured after the warm-up), not ${values['churn-minutes']}`);
    cfg.churn = { ...cfg.churn, durationMs: m * 60_000 };
  }
  // The real kube-proxy needs Kubernetes' binaries and a real API server per N: part of the full run, not of the smoke run unless asked for.
  const only = new Set(
    (
      values.only ??
      (values.smoke
        ? 'datapath,datapath6,lb,control,files,churn,snat,forwarding'
        : 'datapath,datapath6,lb,control,files,churn,snat,forwarding,real-kube-proxy')
    )
      .split(',')
      .map((s) => s.trim()),
  );
  const PARTS = ['datapath', 'datapath6', 'lb', 'control', 'files', 'churn', 'snat', 'forwarding', 'real-kube-proxy'];
  for (const o of only) if (!PARTS.includes(o)) throw new Error(`--only: unknown part ${o} (${PARTS.join(', ')})`);
  const cpu = values.cpu !== undefined ? Number(values.cpu) : execFileSync('nproc', { encoding: 'utf8' }).trim() === '1' ? 0 : 1;

  assertBuilt();
  checkTools();
  ensureBpffs();
  sweepStalePins();
  const bins = buildNative();
  const machine = describeMachine();
  const startedAt = new Date();
  log(
    `${cfg.mode} run on ${machine.cpuModel}, ${machine.vcpus} vCPUs, Linux ${machine.kernel}; load average ${machine.loadavgAtStart.toFixed(2)}`,
  );
  if (machine.loadavgAtStart > 0.7) log('warning: the machine is busy (load average above 0.7): numbers will be noisier');

  const lab = await Lab.create({ prefix: 'bn' });
  const pinRoot = labPinDir(lab.id, '', 'bench');
  const workDir = mkdtempSync(join(tmpdir(), `svcmap-bench-${lab.id}-`));
  mkdirSync(pinRoot, { recursive: true });
  const teardown = {
    emergency() {
      try {
        removePinDir(pinRoot);
      } catch {
        /* best effort: a later run's sweep removes what is left */
      }
      rmSync(workDir, { recursive: true, force: true });
    },
  };
  registerTeardown(teardown);

  const budget = new Budget(cfg.budgetMs);
  let datapath: DatapathPoint[] = [];
  let datapath6: DatapathPoint[] = [];
  let lb: LbResult[] = [];
  let controlPlane: ControlPlaneResult | undefined;
  let realKubeProxy: RealKpResult | undefined;
  let snat: SnatResult | undefined;
  let forwarding: ForwardingResult | undefined;
  const fileSource: FileSourceResult[] = [];
  let churn: ChurnResult | undefined;
  const notes: string[] = [
    `iptables: \`iptables-restore\` here is the ${iptablesBackend()} backend, which is what kube-proxy would use on this host; its rules are kube-proxy's own layout and chain names (large-cluster mode above 1000 endpoints).`,
    "nftables: kube-proxy's nftables-mode table (`ip kube-proxy`), chain names and delta transactions.",
    `Operations predicted to take longer than ${Math.round(cfg.budgetMs / 1000)} s (from their growth at smaller N) are skipped and say so; one that runs past ${Math.round(budget.hardLimitMs / 1000)} s is killed.`,
    'Conntrack is flushed in the client namespace before every datapath run (bench/ctflush.c: the ctnetlink flush that `conntrack -F` sends).',
    "The datapath client (bench/client.c) opens one connection after another (SO_LINGER 0, so no TIME_WAIT), client and servers pinned to one CPU, the agent to the other. Each mode runs once per round, back to back, the order rotating; the absolute numbers are medians over the rounds, and each ratio to direct is the median over the rounds of the ratio within a round, so that the VM's slow and fast phases (its rates jump between two levels for seconds at a time) do not decide a ratio.",
    "The control plane's API server (lab/apiserver) runs inside the bench process: the agent's numbers through it include that server's own pauses (at 100k services it holds 200k objects).",
  ];
  let cluster: BenchCluster | undefined;
  try {
    if (only.has('datapath') || only.has('datapath6') || only.has('lb')) {
      const maxN = Math.max(1, ...(only.has('datapath') ? cfg.datapathSizes : []), ...(only.has('datapath6') ? cfg.datapath6Sizes : []));
      cluster = new BenchCluster({
        lab,
        bins,
        cpu,
        maxServices: Math.ceil(maxN * 5 * 1.05) + 1024,
        maxBackends: Math.ceil(maxN * 4 * 1.05) + 1024,
        pinDir: join(pinRoot, 'datapath'),
        ...(values['lb-algorithm'] ? { lbAlgorithm: values['lb-algorithm'] } : {}),
      });
      await cluster.setup();
      if (only.has('datapath')) {
        datapath = await runDatapath(cluster, {
          sizes: cfg.datapathSizes,
          reps: cfg.reps,
          durationMs: cfg.durationMs,
          warmupMs: cfg.warmupMs,
          agentTimeoutMs: cfg.agentTimeoutMs,
          budget,
          workDir,
          log,
          // Relative to random, the node default: another --lb-algorithm has no random row to compare with.
          ...(values['lb-algorithm'] && values['lb-algorithm'] !== 'random' ? {} : { algorithms: cfg.algorithmCost }),
        });
      }
      if (only.has('datapath6')) {
        datapath6 = await runDatapath(cluster, {
          sizes: cfg.datapath6Sizes,
          reps: cfg.reps,
          durationMs: cfg.durationMs,
          warmupMs: cfg.warmupMs,
          agentTimeoutMs: cfg.agentTimeoutMs,
          budget,
          workDir,
          log,
          family: 6,
        });
      }
      if (only.has('lb')) lb = await runLbQuality(cluster, { ...cfg.lb, agentTimeoutMs: cfg.agentTimeoutMs, log });
      await cluster.destroy();
      cluster = undefined;
    }
    if (only.has('control')) {
      controlPlane = await runControlPlane({
        lab,
        sizes: cfg.controlSizes,
        endpointsPerService: cfg.controlEndpoints,
        engineReps: cfg.engineReps,
        agentChangeReps: cfg.agentChangeReps,
        netfilterChangeReps: cfg.netfilterChangeReps,
        stream: cfg.stream,
        agentTimeoutMs: cfg.agentTimeoutMs,
        budget,
        workDir,
        pinRoot,
        log,
      });
    }
    if (only.has('files')) {
      const cgroup = await lab.cgroup('cp-files');
      for (const n of cfg.files.sizes) {
        for (const layout of cfg.files.layouts) {
          fileSource.push(
            await runFileSource({
              services: makeServices(n, cfg.controlEndpoints),
              endpointsPerService: cfg.controlEndpoints,
              layout,
              dir: join(workDir, `manifests-${n}-${layout}`),
              cgroup,
              pinDir: join(pinRoot, `files-${n}-${layout}`),
              changeReps: cfg.files.changeReps,
              timeoutMs: cfg.agentTimeoutMs,
              log,
            }),
          );
        }
      }
    }
    if (only.has('churn')) {
      const c = cfg.churn;
      log(`churn soak: ${c.n} services, ${c.ratePerSec} changes/s, ${c.warmupMs / 1000} s warm-up + ${c.durationMs / 1000} s`);
      churn = await runChurn({
        services: makeServices(c.n, cfg.controlEndpoints),
        endpointsPerService: cfg.controlEndpoints,
        ...c,
        cgroup: await lab.cgroup('cp-churn'),
        pinDir: join(pinRoot, 'churn'),
        workDir,
        timeoutMs: cfg.agentTimeoutMs,
        loadavg: () => loadavg()[0] ?? 0,
        log,
      });
    }
    if (only.has('snat')) {
      const agentCpu = cpu === 0 && Number(execFileSync('nproc', { encoding: 'utf8' }).trim()) > 1 ? 1 : 0;
      snat = await runSnat({ lab, bins, cpu, agentCpu, ...cfg.snat, agentTimeoutMs: cfg.agentTimeoutMs, workDir, pinRoot, log });
    }
    if (only.has('forwarding')) {
      const genCpu = cpu === 0 && Number(execFileSync('nproc', { encoding: 'utf8' }).trim()) > 1 ? 1 : 0;
      forwarding = await runForwarding({
        lab,
        bins,
        nodeCpu: cpu,
        genCpu,
        ...cfg.forwarding,
        agentTimeoutMs: cfg.agentTimeoutMs,
        workDir,
        pinRoot,
        log,
      });
    }
    if (only.has('real-kube-proxy')) {
      realKubeProxy = await runRealKubeProxy({
        lab,
        bins,
        cpu,
        sizes: cfg.real.sizes,
        endpointsPerService: cfg.controlEndpoints,
        proxies: cfg.real.proxies,
        reps: cfg.real.reps,
        durationMs: cfg.durationMs,
        warmupMs: cfg.warmupMs,
        stream: cfg.real.stream,
        loadBudgetMs: cfg.real.loadBudgetMs,
        concurrency: cfg.real.concurrency,
        budget,
        workDir,
        pinRoot,
        log,
      });
    }
  } finally {
    await cluster?.destroy().catch((e: unknown) => log(`cleanup: ${String(e)}`));
    try {
      removePinDir(pinRoot);
    } catch (e) {
      log(`cleanup: ${String(e)}`);
    }
    rmSync(workDir, { recursive: true, force: true });
    unregisterTeardown(teardown);
    await lab.destroy();
  }

  const finishedAt = new Date();
  const partial = {
    datapath,
    controlPlane,
    ...(snat ? { snat } : {}),
    ...(forwarding ? { forwarding } : {}),
    ...(fileSource.length ? { fileSource } : {}),
    ...(churn ? { churn } : {}),
    ...(realKubeProxy ? { realKubeProxy } : {}),
  };
  const results: BenchResults & { realKubeProxy?: RealKpResult; fileSource?: FileSourceResult[]; churn?: ChurnResult } = {
    schema: 'svcmap-bench/1',
    mode: cfg.mode,
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    durationS: (finishedAt.getTime() - startedAt.getTime()) / 1000,
    machine: { ...machine, loadavgAtEnd: loadavg()[0] ?? 0 },
    config: { ...cfg, only: [...only], cpu, ...(values['lb-algorithm'] ? { lbAlgorithm: values['lb-algorithm'] } : {}) },
    datapath,
    ...(datapath6.length ? { datapath6 } : {}),
    controlPlane,
    lb,
    ...(only.has('lb') ? { maglev: maglevDisruptionOf() } : {}),
    ...(realKubeProxy ? { realKubeProxy } : {}),
    ...(snat ? { snat } : {}),
    ...(forwarding ? { forwarding } : {}),
    ...(fileSource.length ? { fileSource } : {}),
    ...(churn ? { churn } : {}),
    targets: evaluateTargets(partial),
    notes,
  };
  mkdirSync(outDir, { recursive: true });
  const stamp = results.startedAt.replace(/[:]/g, '-').replace(/\.\d+Z$/, 'Z');
  const json = `${JSON.stringify(results, null, 2)}\n`;
  writeFileSync(join(outDir, `${stamp}.json`), json);
  writeFileSync(join(outDir, 'latest.json'), json);
  writeReport(results, outDir);

  say(`\n# svcmap bench (${cfg.mode}), ${results.startedAt}, ${Math.round(results.durationS)} s\n`);
  say(
    `${machine.cpuModel}, ${machine.vcpus} vCPUs, Linux ${machine.kernel}, load average ${machine.loadavgAtStart.toFixed(2)} -> ${results.machine.loadavgAtEnd.toFixed(2)}\n`,
  );
  if (datapath.length) say(`## Datapath\n\n${datapathTables(results)}\n`);
  if (datapath6.length) say(`## Datapath, IPv6\n\n${datapath6Table(results)}\n`);
  if (algorithmCostTable(results)) say(`${algorithmCostTable(results)}\n`);
  if (controlPlane) say(`## Control plane\n\n${controlPlaneTables(results)}\n`);
  if (lb.length) say(`## Load-balancing quality\n\n${lbTable(results)}\n`);
  if (snat) say(`## SNAT rate beside MASQUERADE\n\n${snatTable(results)}\n`);
  if (forwarding) say(`## Forwarding beside kube-proxy\n\n${forwardingTable(results)}\n`);
  if (fileSource.length) say(`## File source\n\n${fileSourceTable(fileSource)}\n`);
  if (churn) say(`## Churn soak\n\n${churnTable(churn)}\n`);
  if (realKubeProxy) say(`## The real kube-proxy beside svcmap\n\n${realKubeProxyTables(results)}\n`);
  say(`## Targets\n\n${targetsTable(results)}\n`);
  const b = behind(results);
  say(`## Where svcmap is behind\n\n${b.length ? b.map((x) => `- ${x}`).join('\n') : '- nowhere in this run'}\n`);
  say(
    `results: ${join(outDir, `${stamp}.json`)} (and latest.json), chart: ${join(outDir, 'chart.svg')}, README fragment: ${join(outDir, 'summary.md')}`,
  );
}

/** chart.svg and summary.md (the README's fragment) from one run's results. */
function writeReport(results: BenchResults, outDir: string): void {
  writeFileSync(join(outDir, 'chart.svg'), chartSvg(results));
  // The README lives at the repository root and embeds the chart by its path from there.
  const chartRef = relative(ROOT, join(outDir, 'chart.svg'));
  writeFileSync(join(outDir, 'summary.md'), summaryMarkdown(results, chartRef.startsWith('..') ? join(outDir, 'chart.svg') : chartRef));
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exitCode = 1;
});
