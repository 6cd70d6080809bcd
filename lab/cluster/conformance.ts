// Upstream conformance against a lab cluster (make conformance): the
// `[sig-network] Services ... [Conformance]` specs of Kubernetes' own e2e.test
// (built from the k8s.io/kubernetes module by make cluster-bins) run against a
// real two-node cluster (lab/cluster) whose Services are proxied by svcmap,
// installed by its chart, or, as the reference, by the real kube-proxy in
// nftables mode (lab/cluster/kube-proxy.ts).
//
//   node lab/cluster/conformance.ts [--proxy svcmap|kube-proxy] [--focus REGEX] [--skip REGEX]
//                                   [--report FILE] [--parallel N] [--artifacts DIR] [--verbose]
//
// Steps: the images (pause, CoreDNS, the specs' images under the names
// e2e.test asks for, svcmap) are built or taken from the cache and imported
// into every node;
// the cluster comes up; the proxy is installed; CoreDNS is deployed, and its
// becoming Ready is the proof that ClusterIPs work (it reaches the API server
// through the `kubernetes` Service). Then e2e.test runs from the outside
// namespace (like the host in kind: it reaches the node addresses and their
// NodePorts) with the admin kubeconfig. The selected specs are split over
// --parallel e2e.test processes (each with its own --ginkgo.focus list, the
// longer specs spread first), which is what `ginkgo -p` would do, plus one
// more for the specs that mostly sleep (SLEEPERS); each writes its JUnit
// report, which is read back and merged.
//
// Output: progress lines with the elapsed time (the specs' steps and results;
// --verbose: all of e2e.test's output), then one line per spec and
// "N passed, N failed, N skipped"; the exit status is 1 when a spec or the
// setup failed. Kept in the artifacts directory (default
// .tools/conformance/<proxy>/, replaced by each run): every shard's JUnit and
// full log, the cluster components' logs, summary.json, and on a failure the
// proxy's diagnostics (agent logs and `svcmap status`, or kube-proxy's log and
// rules). The cluster is removed at the end, on failure and on a signal.

import { cpSync, createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync, type WriteStream } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { run } from '../run.ts';
import { hasExited } from '../processes.ts';
import { deployCoreDns } from './addons.ts';
import { Cluster } from './cluster.ts';
import { counts, mergeResults, parseJunit, type JunitCase, type SpecResult } from './conformance-junit.ts';
import { buildImages } from './images/index.ts';
import { kubeProxyDiagnostics, startKubeProxies, type KubeProxy } from './kube-proxy.ts';
import { bin, REPO_ROOT } from './paths.ts';
import { installSvcmap, splitRef, svcmapDiagnostics } from './svcmap.ts';

export const DEFAULT_FOCUS = String.raw`\[sig-network\] Services.*\[Conformance\]`;

/**
 * Imported into every node: the DNS and the images the specs' pods run
 * (e2e.test's names; the [sig-network] specs of v1.34 use agnhost, busybox,
 * jessie-dnsutils, nginx and regression-issue-74839, and pause as every
 * sandbox). Nothing is pulled: the lab has no route out.
 */
const CLUSTER_IMAGES = ['pause', 'coredns', 'agnhost', 'busybox', 'jessie-dnsutils', 'nginx', 'regression-issue-74839'] as const;
export type ProxyKind = 'svcmap' | 'kube-proxy';

export interface ConformanceOptions {
  proxy: ProxyKind;
  focus: string;
  skip?: string;
  parallel: number;
  artifacts: string;
  verbose: boolean;
  /** --ginkgo.timeout of each e2e.test. */
  timeout: string;
}

export interface ConformanceSummary {
  proxy: ProxyKind;
  focus: string;
  skip?: string;
  parallel: number;
  startedAt: string;
  /** Seconds per phase: images, cluster, proxy, coredns, e2e, teardown, total. */
  durations: Record<string, number>;
  counts: { passed: number; failed: number; skipped: number };
  specs: SpecResult[];
  suiteFailures: SpecResult[];
  /** Set when the run stopped before the specs (setup failure). */
  error?: string;
  artifacts: string;
}

// ---------------------------------------------------------------------------
// Which specs, and how they are split over the e2e.test processes

export interface ListedSpec {
  name: string;
  /** file:line in the module. */
  location: string;
}

/** `e2e.test --list-tests`: every spec of the suite (no cluster needed). */
export async function listSpecs(): Promise<ListedSpec[]> {
  const specs = parseListing(await run(bin('e2e.test'), ['--list-tests'], { timeoutMs: 60_000 }));
  if (specs.length === 0) throw new Error('e2e.test --list-tests listed no specs');
  return specs;
}

/**
 * The specs of `e2e.test --list-tests` output ("  file:line: name" lines).
 * A name is taken without trailing blanks: the listing leaves a space where
 * it took a label out ("... adding or deleting ports "), the JUnit report
 * does not, and a listed name must match its report to be counted as run.
 */
export function parseListing(out: string): ListedSpec[] {
  const specs: ListedSpec[] = [];
  for (const line of out.split('\n')) {
    const m = /^\s+(\S+:\d+): (.+)$/.exec(line);
    if (m) specs.push({ location: m[1]!, name: m[2]!.trimEnd() });
  }
  return specs;
}

/** A Go (RE2) regular expression as JavaScript reads it; undefined if it cannot. */
function jsRegex(re: string): RegExp | undefined {
  try {
    return new RegExp(re);
  } catch {
    return undefined;
  }
}

/** Quotes every metacharacter that RE2 and JavaScript share. */
export function quoteRegex(s: string): string {
  return s.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&');
}

/**
 * Specs that spend their time asleep: the session-affinity-timeout specs wait
 * 130 s (their timeout and 5 s) per try, and try again while the backend has
 * not changed, which with 3 backends happens 1 time in 3 (135 s at best, 526 s
 * seen after four repeats). They run in an e2e.test of their own beside the
 * others' processes, so that such a run no longer holds up a whole shard;
 * asleep, they take little of the CPU the others use.
 */
export const SLEEPERS = /session affinity timeout/i;

/**
 * The relative cost of a spec, to balance the shards: about its usual
 * seconds / 10 in the lab's runs (the per-spec table of make e2e-network).
 * Granular checks and the terminating-endpoint specs start a pod per node
 * and probe every one (35-115 s), DNS and conntrack specs poll (~25 s),
 * session-affinity specs make dozens of requests (5-60 s), most others
 * take a few seconds.
 */
export function specWeight(name: string): number {
  if (/Granular Checks|should be able to reach pod on ipv4 and ipv6/.test(name)) return 5;
  if (/terminating|unready/.test(name)) return 5;
  if (/\[sig-network\] (DNS|Conntrack)/.test(name)) return 3;
  if (/session affinity/i.test(name)) return 2;
  return 1;
}

/** The sleepers (SLEEPERS) in a shard of their own, the rest longest
 * first onto the least-loaded of n shards; no empty shards. */
export function splitSpecs(names: readonly string[], n: number): string[][] {
  const sleepers = names.filter((s) => SLEEPERS.test(s));
  const rest = names.filter((s) => !SLEEPERS.test(s));
  const shards = Array.from({ length: Math.max(1, Math.min(n, rest.length)) }, () => ({ load: 0, names: [] as string[] }));
  const sorted = [...rest].sort((a, b) => specWeight(b) - specWeight(a) || a.localeCompare(b));
  for (const name of sorted) {
    const s = shards.reduce((best, x) => (x.load < best.load ? x : best));
    s.load += specWeight(name);
    s.names.push(name);
  }
  return [...shards.map((s) => s.names).filter((s) => s.length > 0), ...(sleepers.length ? [sleepers] : [])];
}

// ---------------------------------------------------------------------------
// Running e2e.test

const PROGRESS = [
  /^\s*STEP: /,
  /^\[sig-[\w-]+\] /, // a spec's full text (printed when it starts and ends)
  /^[•S]\s*\[[\d.]+ seconds\]/, // a spec's end: passed / skipped
  /\[(FAILED|PANICKED|TIMEDOUT|INTERRUPTED|SKIPPED)\]/,
  /^Ran \d+ of \d+ Specs/,
  /^(PASS|FAIL)\b/,
  /^(Summarizing|Will run|Running Suite)/,
  /^\s*I\d{4} [\d:.]+\s+\d+ e2e\.go:\d+\] /, // the suite's own checks before the specs
];

export function isProgressLine(line: string): boolean {
  return PROGRESS.some((re) => re.test(line));
}

interface ShardRun {
  shard: number;
  assigned: string[];
  dir: string;
  exitCode: number | null;
  signal: string | null;
  cases: JunitCase[] | undefined;
  error?: string;
}

function e2eArgs(cluster: Cluster, opts: ConformanceOptions, dir: string, focus: readonly string[]): string[] {
  return [
    '--kubeconfig',
    cluster.adminKubeconfig,
    '--provider',
    'local',
    '--kubectl-path',
    bin('kubectl'),
    '--num-nodes',
    String(cluster.nodes.length),
    '--report-dir',
    dir,
    '--e2e-output-dir',
    dir,
    // Nodes and kube-system are Ready already (checked before): fail fast if not.
    '--system-pods-startup-timeout',
    '2m',
    '--node-schedulable-timeout',
    '2m',
    '--allowed-not-ready-nodes',
    '0',
    // Log dumps of masters and nodes need ssh and a cloud provider.
    '--disable-log-dump',
    ...focus.flatMap((f) => ['--ginkgo.focus', f]),
    ...(opts.skip ? ['--ginkgo.skip', opts.skip] : []),
    '--ginkgo.timeout',
    opts.timeout,
    '--ginkgo.v',
    '--ginkgo.no-color',
  ];
}

async function runShard(
  cluster: Cluster,
  opts: ConformanceOptions,
  shard: number,
  assigned: string[],
  focus: readonly string[],
  out: (line: string) => void,
): Promise<ShardRun> {
  const dir = join(opts.artifacts, `shard-${shard}`);
  mkdirSync(dir, { recursive: true });
  const logFile = join(dir, 'e2e.log');
  const file: WriteStream = createWriteStream(logFile);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KUBECONFIG: cluster.adminKubeconfig,
    // kubectl (run by the framework) keeps its discovery cache in the run, not in ~/.kube.
    KUBECACHEDIR: join(cluster.dir, `kubectl-cache-${shard}`),
    HOME: join(cluster.dir, `home-${shard}`),
  };
  mkdirSync(env.HOME!, { recursive: true });
  const child = cluster.lab.spawn(cluster.net.outside.ns, bin('e2e.test'), e2eArgs(cluster, opts, dir, focus), {
    env,
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const tag = opts.parallel > 1 ? `s${shard} | ` : '';
  const lineReader = (stream: NodeJS.ReadableStream | null) => {
    let rest = '';
    stream?.on('data', (b: Buffer) => {
      file.write(b);
      const text = rest + b.toString('utf8');
      const lines = text.split('\n');
      rest = lines.pop() ?? '';
      for (const l of lines) if (opts.verbose || isProgressLine(l)) out(`${tag}${l}`);
    });
    stream?.on('end', () => {
      if (rest && (opts.verbose || isProgressLine(rest))) out(`${tag}${rest}`);
    });
  };
  lineReader(child.stdout);
  lineReader(child.stderr);
  await new Promise<void>((res) => (hasExited(child) ? res() : child.once('close', () => res())));
  await new Promise<void>((res) => file.end(res));
  const r: ShardRun = { shard, assigned, dir, exitCode: child.exitCode, signal: child.signalCode, cases: undefined };
  const junit = join(dir, 'junit_01.xml');
  if (existsSync(junit)) {
    r.cases = parseJunit(readFileSync(junit, 'utf8'));
  } else {
    r.error = `e2e.test ${child.signalCode ? `killed by ${child.signalCode}` : `exited ${child.exitCode}`} without ${junit}; see ${logFile}`;
  }
  return r;
}

// ---------------------------------------------------------------------------
// The run

function fmtSeconds(s: number): string {
  return s >= 100 ? `${Math.round(s)} s` : `${s.toFixed(1)} s`;
}

export async function runConformance(opts: ConformanceOptions): Promise<ConformanceSummary> {
  const t0 = Date.now();
  const elapsed = () => ((Date.now() - t0) / 1000).toFixed(1).padStart(6);
  const out = (line: string) => process.stdout.write(`[${elapsed()}s] ${line}\n`);
  const durations: Record<string, number> = {};
  const phase = async <T>(name: string, f: () => Promise<T>): Promise<T> => {
    const t = Date.now();
    try {
      return await f();
    } finally {
      durations[name] = (Date.now() - t) / 1000;
      out(`${name}: ${fmtSeconds(durations[name]!)}`);
    }
  };
  rmSync(opts.artifacts, { recursive: true, force: true });
  mkdirSync(opts.artifacts, { recursive: true });
  const summary: ConformanceSummary = {
    proxy: opts.proxy,
    focus: opts.focus,
    ...(opts.skip ? { skip: opts.skip } : {}),
    parallel: opts.parallel,
    startedAt: new Date(t0).toISOString(),
    durations,
    counts: { passed: 0, failed: 0, skipped: 0 },
    specs: [],
    suiteFailures: [],
    artifacts: opts.artifacts,
  };

  // Which specs, split how (before anything is built: a bad regex fails at once).
  const focusRe = jsRegex(opts.focus);
  const skipRe = opts.skip ? jsRegex(opts.skip) : undefined;
  const listed = await listSpecs();
  let selected: string[];
  let shardFocus: Array<{ assigned: string[]; focus: string[] }>;
  if (!focusRe || (opts.skip && !skipRe)) {
    // Not a JavaScript regex: one e2e.test with the expressions as given.
    out('the focus / skip expression is not valid in JavaScript: one e2e.test, selection by e2e.test itself');
    selected = [];
    shardFocus = [{ assigned: [], focus: [opts.focus] }];
  } else {
    // Specs the focus selects but --skip leaves out are reported as skipped.
    selected = listed.map((s) => s.name).filter((n) => focusRe.test(n));
    const runnable = selected.filter((n) => !skipRe?.test(n));
    if (runnable.length === 0) throw new Error(`no spec matches --focus '${opts.focus}'${opts.skip ? ` --skip '${opts.skip}'` : ''}`);
    shardFocus =
      opts.parallel <= 1
        ? [{ assigned: runnable, focus: [opts.focus] }]
        : splitSpecs(runnable, opts.parallel).map((names) => ({ assigned: names, focus: names.map(quoteRegex) }));
  }
  const nRun = shardFocus.reduce((n, s) => n + s.assigned.length, 0);
  out(
    `${selected.length || 'the'} specs matching '${opts.focus}'${opts.skip ? `, ${nRun} not matching '${opts.skip}'` : ''}; ${shardFocus.length} e2e.test process${shardFocus.length > 1 ? 'es' : ''}; proxy: ${opts.proxy}`,
  );

  const names = opts.proxy === 'svcmap' ? ([...CLUSTER_IMAGES, 'svcmap'] as const) : CLUSTER_IMAGES;
  const images = await phase('images', () => buildImages({ only: [...names], log: out }));
  const ref = (n: (typeof names)[number]) => {
    const img = images.get(n);
    if (!img) throw new Error(`buildImages did not return the ${n} image`);
    return img.ref;
  };
  // svcmap serves hostPorts itself (the chart's hostPort.enabled): its nodes' CNI has no portmap; kube-proxy's keep it, as kind's.
  const cluster = await phase('cluster', () =>
    Cluster.up({ nodes: 2, images: names.map((n) => images.get(n)!.archive), log: out, portmap: opts.proxy !== 'svcmap' }),
  );
  let proxies: KubeProxy[] = [];
  const diagnostics = async (): Promise<string> => {
    try {
      return opts.proxy === 'svcmap'
        ? await svcmapDiagnostics(cluster)
        : `${await kubeProxyDiagnostics(proxies)}\n${await clusterState(cluster)}`;
    } catch (e) {
      return `(diagnostics failed: ${(e as Error).message})`;
    }
  };
  try {
    try {
      if (opts.proxy === 'svcmap') {
        await phase('proxy', () => installSvcmap(cluster, splitRef(ref('svcmap'))));
      } else {
        proxies = await phase('proxy', () => startKubeProxies(cluster, { mode: 'nftables' }));
      }
      // CoreDNS reads the API through the kubernetes Service: Ready = ClusterIPs work.
      // Deployed after the proxy: started before it, CoreDNS would sit in its
      // client's retry backoff for another ~20 s once the Service works.
      await phase('coredns', async () => {
        await deployCoreDns(cluster.kubectl, ref('coredns'));
        await cluster.kubectl.run(['-n', 'kube-system', 'rollout', 'status', 'deployment/coredns', '--timeout=180s'], {
          timeoutMs: 190_000,
        });
      });
    } catch (e) {
      const d = await diagnostics();
      writeFileSync(join(opts.artifacts, 'diagnostics.txt'), `${d}\n`);
      out(`proxy setup failed: ${(e as Error).message}\n${d}`);
      throw e;
    }

    const runs = await phase('e2e', () => Promise.all(shardFocus.map((s, i) => runShard(cluster, opts, i + 1, s.assigned, s.focus, out))));
    const merged = mergeResults(
      runs.map((r) => ({ shard: r.shard, assigned: r.assigned, cases: r.cases, ...(r.error ? { error: r.error } : {}) })),
      selected,
    );
    for (const r of merged.specs) if (r.reason === 'not run' && skipRe?.test(r.name)) r.reason = `left out by --skip '${opts.skip}'`;
    summary.specs = merged.specs;
    summary.suiteFailures = merged.suiteFailures;
    summary.counts = counts(merged.specs);
    for (const r of runs) if (r.error) out(`shard ${r.shard}: ${r.error}`);
    if (summary.counts.failed > 0 || summary.suiteFailures.length > 0) {
      writeFileSync(join(opts.artifacts, 'diagnostics.txt'), `${await diagnostics()}\n`);
    }
  } catch (e) {
    summary.error = (e as Error).message;
  } finally {
    for (const r of cluster.kubeletRestarts()) out(`kubelet restart (upstream crash, started again as systemd would): ${r}`);
    try {
      cpSync(cluster.logDir, join(opts.artifacts, 'logs'), { recursive: true });
    } catch {
      /* best effort */
    }
    await phase('teardown', () => cluster.down());
  }
  durations.total = (Date.now() - t0) / 1000;
  return summary;
}

/** kube-system pods and events, for the kube-proxy reference's diagnostics. */
async function clusterState(cluster: Cluster): Promise<string> {
  const parts: string[] = [];
  for (const [title, args] of [
    ['pods', ['get', 'pods', '-A', '-o', 'wide']],
    ['events', ['get', 'events', '-A', '--sort-by=.lastTimestamp']],
  ] as const) {
    try {
      parts.push(`==== ${title}\n${(await cluster.kubectl.run(args)).trimEnd()}`);
    } catch (e) {
      parts.push(`==== ${title}\n(failed: ${(e as Error).message.split('\n')[0]})`);
    }
  }
  return parts.join('\n');
}

export function formatSummary(s: ConformanceSummary): string {
  const lines: string[] = [];
  const mark = { passed: 'PASS', failed: 'FAIL', skipped: 'SKIP' } as const;
  lines.push(`conformance with ${s.proxy}: '${s.focus}'${s.skip ? ` skip '${s.skip}'` : ''}`);
  for (const r of [...s.specs].sort((a, b) => a.name.localeCompare(b.name))) {
    lines.push(`  ${mark[r.state]} ${fmtSeconds(r.seconds).padStart(7)}  ${r.name}${r.reason ? `\n         ${r.reason}` : ''}`);
  }
  for (const r of s.suiteFailures) lines.push(`  FAIL (suite) ${r.name}: ${r.reason}`);
  if (s.error) lines.push(`  setup failed: ${s.error.split('\n')[0]}`);
  const d = s.durations;
  lines.push(
    `durations: ${['images', 'cluster', 'proxy', 'coredns', 'e2e', 'teardown', 'total']
      .filter((k) => d[k] !== undefined)
      .map((k) => `${k} ${fmtSeconds(d[k]!)}`)
      .join(', ')}`,
  );
  lines.push(`artifacts: ${s.artifacts}`);
  const failed = s.counts.failed + s.suiteFailures.length + (s.error ? 1 : 0);
  lines.push(`${s.counts.passed} passed, ${failed} failed, ${s.counts.skipped} skipped`);
  return lines.join('\n');
}

export function conformanceFailed(s: ConformanceSummary): boolean {
  return s.counts.failed > 0 || s.suiteFailures.length > 0 || s.error !== undefined;
}

// ---------------------------------------------------------------------------
// CLI

/** What a runner built on this CLI (make conformance, make e2e-network) selects and where it keeps its results. */
export interface RunnerDefaults {
  /** The command, for the usage text. */
  command: string;
  focus: string;
  skip?: string;
  parallel: number;
  timeout: string;
  /** The artifacts go to <artifactsRoot>/<proxy>. */
  artifactsRoot: string;
}

export const CONFORMANCE_DEFAULTS: RunnerDefaults = {
  command: 'node lab/cluster/conformance.ts',
  focus: DEFAULT_FOCUS,
  parallel: 4,
  timeout: '25m',
  artifactsRoot: join(REPO_ROOT, '.tools', 'conformance'),
};

const usage = (d: RunnerDefaults) => `usage: ${d.command} [--proxy svcmap|kube-proxy] [--focus REGEX] [--skip REGEX]
         [--report FILE] [--parallel N] [--timeout DURATION] [--artifacts DIR] [--verbose]
  --proxy      what proxies the Services: svcmap (its chart) or kube-proxy (nftables mode); default svcmap
  --focus      specs to run (e2e.test --ginkgo.focus); default '${d.focus}'
  --skip       specs to leave out (--ginkgo.skip)${d.skip ? `; default '${d.skip}'` : ''}
  --report     also write the summary (JSON) to FILE
  --parallel   e2e.test processes the specs are split over (default ${d.parallel}; one more for the sleeping affinity-timeout specs)
  --timeout    --ginkgo.timeout of each e2e.test (default ${d.timeout})
  --artifacts  where JUnit reports, logs and diagnostics go (default ${d.artifactsRoot}/<proxy>)
  --verbose    stream all of e2e.test's output, not only steps and results
`;

/** The CLI: runs, prints the summary (its last line the counts) and returns the exit status. */
export async function main(
  argv: readonly string[],
  d: RunnerDefaults = CONFORMANCE_DEFAULTS,
): Promise<{ code: number; summary?: ConformanceSummary }> {
  const USAGE = usage(d);
  const { values } = parseArgs({
    args: [...argv],
    options: {
      proxy: { type: 'string', default: 'svcmap' },
      focus: { type: 'string', default: d.focus },
      skip: { type: 'string', ...(d.skip ? { default: d.skip } : {}) },
      report: { type: 'string' },
      parallel: { type: 'string', default: String(d.parallel) },
      timeout: { type: 'string', default: d.timeout },
      artifacts: { type: 'string' },
      verbose: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return { code: 0 };
  }
  const proxy = values.proxy as ProxyKind;
  if (proxy !== 'svcmap' && proxy !== 'kube-proxy') {
    process.stderr.write(`--proxy must be svcmap or kube-proxy\n${USAGE}`);
    return { code: 2 };
  }
  const parallel = Number(values.parallel);
  if (!Number.isInteger(parallel) || parallel < 1) {
    process.stderr.write(`--parallel must be a positive integer\n${USAGE}`);
    return { code: 2 };
  }
  if (process.getuid?.() !== 0) {
    process.stderr.write('conformance: run as root (namespaces, cgroups, containerd, BPF)\n');
    return { code: 2 };
  }
  const opts: ConformanceOptions = {
    proxy,
    focus: values.focus!,
    ...(values.skip ? { skip: values.skip } : {}),
    parallel,
    timeout: values.timeout!,
    artifacts: resolve(values.artifacts ?? join(d.artifactsRoot, proxy)),
    verbose: values.verbose!,
  };
  let summary: ConformanceSummary;
  try {
    summary = await runConformance(opts);
  } catch (e) {
    // Before the cluster was up (spec listing, images, bring-up): still the count line CI reads.
    process.stderr.write(`conformance: ${(e as Error).stack ?? String(e)}\n`);
    process.stdout.write('0 passed, 1 failed, 0 skipped\n');
    return { code: 1 };
  }
  const text = `${JSON.stringify(summary, null, 2)}\n`;
  writeFileSync(join(opts.artifacts, 'summary.json'), text);
  if (values.report) writeFileSync(values.report, text);
  process.stdout.write(`\n${formatSummary(summary)}\n`);
  return { code: conformanceFailed(summary) ? 1 : 0, summary };
}

/** True when `moduleUrl` is the script node was started with. */
export function isMain(moduleUrl: string): boolean {
  return process.argv[1] !== undefined && moduleUrl === pathToFileURL(resolve(process.argv[1])).href;
}

if (isMain(import.meta.url)) {
  main(process.argv.slice(2)).then(
    ({ code }) => process.exit(code),
    (e: unknown) => {
      process.stderr.write(`conformance: ${(e as Error).stack ?? String(e)}\n`);
      process.exit(1);
    },
  );
}
