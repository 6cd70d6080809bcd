// Markdown tables of a run (printed, and the fragment the README embeds).
import { fmtDuration } from './budget.ts';
import { isOp, type Op } from './cp-netfilter.ts';
import { isSkipped, MODES } from './datapath.ts';
import { isFwdSkipped } from './forwarding.ts';
import { isRealSkipped, type RealKpResult, type RealProxyResult } from './kube-proxy-real.ts';
import { maglevDisruptionLine } from './maglev-disruption.ts';
import { type BenchResults, isAgentResult, modeResult } from './results.ts';
import { median, pairedMedianRatio } from './stats.ts';

const MiB = 2 ** 20;

export function fmtN(n: number): string {
  return n >= 1000 && n % 1000 === 0 ? `${n / 1000}k` : String(n);
}

function table(head: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}

function int(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

function op(o: Op | undefined, unit = ''): string {
  if (!o) return 'n/a';
  if (!isOp(o)) return `skipped${o.skipped.startsWith('predicted') ? ` (${o.skipped.replace(/ from smaller N.*/, '')})` : ''}`;
  return `${fmtDuration(o.ms)}${unit}`;
}

/** How much the floor itself moved between rounds: the noise to read the ratios against. */
function spreadNote(r: BenchResults): string[] {
  const spreads = r.datapath.flatMap((p) => {
    const d = modeResult(p, 'direct');
    if (!d || d.runs.length < 2) return [];
    const rates = d.runs.map((x) => x.connPerSec);
    return [{ n: p.n, lo: Math.min(...rates), hi: Math.max(...rates), runs: rates.length }];
  });
  if (!spreads.length) return [];
  const widest = spreads.reduce((a, b) => (b.hi / b.lo > a.hi / a.lo ? b : a));
  return [
    `Noise: the direct connect alone ranged from ${int(widest.lo)} to ${int(widest.hi)} conn/s over the ${widest.runs} one-second rounds at N=${fmtN(widest.n)} (x${(widest.hi / widest.lo).toFixed(2)}), the widest spread of this run; ratios are paired within rounds for that reason.`,
    '',
  ];
}

/**
 * The IPv6 rows beside the IPv4 rows of the same N: direct vs svcmap, conn/s
 * with svcmap's time per connection relative to direct (paired by round, as
 * for IPv4), and connect() p50 / p99 relative to direct.
 */
export function datapath6Table(r: BenchResults): string {
  const cell = (p: BenchResults['datapath'][number] | undefined, m: 'direct' | 'svcmap') => {
    const s = p && modeResult(p, m);
    if (!s) return 'n/a';
    return s.vsDirect ? `${int(s.connPerSec)} (**${s.vsDirect.perConn.toFixed(3)}x**)` : int(s.connPerSec);
  };
  const lat = (p: BenchResults['datapath'][number] | undefined) => {
    const s = p && modeResult(p, 'svcmap');
    return s?.vsDirect ? `${s.vsDirect.p50.toFixed(3)}x / ${s.vsDirect.p99.toFixed(3)}x` : 'n/a';
  };
  const rows = (r.datapath6 ?? []).map((p6) => {
    const p4 = r.datapath.find((p) => p.n === p6.n);
    return [fmtN(p6.n), cell(p4, 'direct'), cell(p4, 'svcmap'), lat(p4), cell(p6, 'direct'), cell(p6, 'svcmap'), lat(p6)];
  });
  return [
    "IPv6-only Services (N x 4 endpoints, the pods' IPv6 addresses) beside the IPv4 rows of the same N: conn/s to the last-programmed service, in brackets svcmap's time per connection relative to connecting to the pods directly over the same family; then svcmap's connect() p50 / p99 relative to direct. kube-proxy's rule shapes are IPv4 only here.",
    '',
    table(['N services', 'IPv4 direct', 'IPv4 svcmap', 'IPv4 p50 / p99', 'IPv6 direct', 'IPv6 svcmap', 'IPv6 p50 / p99'], rows),
    '',
  ].join('\n');
}

export function datapathTables(r: BenchResults): string {
  const skipNote = (p: BenchResults['datapath'][number], mode: string) => {
    const x = p.results.find((y) => y.mode === mode);
    return x && isSkipped(x) ? 'skipped' : 'n/a';
  };
  const cps = r.datapath.map((p) => [
    fmtN(p.n),
    ...MODES.map((m) => {
      const s = modeResult(p, m);
      if (!s) return skipNote(p, m);
      return s.vsDirect ? `${int(s.connPerSec)} (**${s.vsDirect.perConn.toFixed(2)}x**)` : int(s.connPerSec);
    }),
  ]);
  const lat = r.datapath.map((p) => [
    fmtN(p.n),
    ...MODES.map((m) => {
      const s = modeResult(p, m);
      if (!s) return skipNote(p, m);
      const base = `${s.p50Us.toFixed(1)} / ${s.p99Us.toFixed(1)}`;
      return s.vsDirect ? `${base} (${s.vsDirect.p50.toFixed(2)}x / ${s.vsDirect.p99.toFixed(2)}x)` : base;
    }),
  ]);
  const prog = r.datapath.map((p) => [
    fmtN(p.n),
    p.programming.svcmap ? fmtDuration(p.programming.svcmap.ms) : 'n/a',
    p.programming.iptables ? fmtDuration(p.programming.iptables.ms) : skipNote(p, 'iptables'),
    p.programming.nftables ? fmtDuration(p.programming.nftables.ms) : skipNote(p, 'nftables'),
  ]);
  const skips = r.datapath.flatMap((p) => p.results.filter(isSkipped).map((s) => `- N=${fmtN(p.n)}, ${s.mode}: ${s.skipped}`));
  const ept = r.datapath[0]?.endpointsPerService ?? 4;
  return [
    `**Connections per second** to the last-programmed service (N services x ${ept} endpoints); in brackets the time per connection relative to connecting to the pod IPs directly (1.00x = no cost; the median of that ratio within each round):`,
    '',
    table(['N services', 'direct to pod', 'svcmap', 'kube-proxy iptables', 'kube-proxy nftables'], cps),
    '',
    '**connect() latency, p50 / p99 in µs** (relative to direct):',
    '',
    table(['N services', 'direct to pod', 'svcmap', 'kube-proxy iptables', 'kube-proxy nftables'], lat),
    '',
    ...spreadNote(r),
    'Time to get the N services into each datapath before measuring (svcmap: agent start to first sync, file source; iptables: one `iptables-restore` of the whole tables; nftables: `nft -f`):',
    '',
    table(['N services', 'svcmap', 'iptables', 'nftables'], prog),
    ...(skips.length ? ['', 'Skipped:', '', ...skips] : []),
  ].join('\n');
}

/** The datapath cost of each algorithm, relative to random, where the datapath part measured it. */
export function algorithmCostTable(r: BenchResults): string {
  const points = r.datapath.filter((p) => p.algorithms?.length);
  if (!points.length) return '';
  const names = points[0]!.algorithms!.map((a) => a.algorithm);
  const cell = (p: (typeof points)[number], name: string) => {
    const a = p.algorithms!.find((x) => x.algorithm === name);
    return a ? `${int(a.connPerSec)} (**${a.vsRandom.perConn.toFixed(3)}x**, p50 ${a.vsRandom.p50.toFixed(3)}x)` : 'n/a';
  };
  const rows = points.map((p) => [
    fmtN(p.n),
    int(median(p.algorithms!.flatMap((a) => a.randomRuns.map((x) => x.connPerSec)))),
    ...names.map((n) => cell(p, n)),
  ]);
  const withNs = points.filter((p) => p.algorithms!.some((a) => a.bpfNs));
  const nsCell = (p: (typeof points)[number], name: string) => {
    const b = p.algorithms!.find((x) => x.algorithm === name)?.bpfNs;
    if (!b) return 'n/a';
    const extra = b.connect4 + b.sockRelease - (b.randomConnect4 + b.randomSockRelease);
    return `${int(b.connect4)} + ${int(b.sockRelease)} (${extra >= 0 ? '+' : ''}${int(extra)})`;
  };
  const randomNs = (p: (typeof points)[number]) => {
    const bs = p.algorithms!.flatMap((a) => (a.bpfNs ? [a.bpfNs] : []));
    return `${int(median(bs.map((b) => b.randomConnect4)))} + ${int(median(bs.map((b) => b.randomSockRelease)))}`;
  };
  return [
    `**Datapath cost per algorithm**: conn/s to a service of each algorithm (\`svcmap.io/lb-algorithm\`, the same ${r.datapath[0]?.endpointsPerService ?? 4} pods) among the N services, each run right beside a run of random (the svcmap column's service, the node default; the pair's order alternating); in brackets the time per connection and the connect() p50 relative to random (the median of the ratios within the ${points[0]!.algorithms![0]!.runs.length} pairs; 1.000x = no cost):`,
    '',
    table(['N services', 'random', ...names], rows),
    ...(withNs.length
      ? [
          '',
          "**BPF run time per connection** in the same runs (the kernel's BPF statistics, `bench/bpfstats.c`): the `connect4` program + the `sock_release` program, ns per call, medians over the runs; in brackets the difference from random. The programs only: what the kernel does around them (allocating and freeing a socket's storage is partly outside) is in the rates above.",
          '',
          table(
            ['N services', 'random', ...names],
            withNs.map((p) => [fmtN(p.n), randomNs(p), ...names.map((n) => nsCell(p, n))]),
          ),
        ]
      : []),
  ].join('\n');
}

export function controlPlaneTables(r: BenchResults): string {
  const cp = r.controlPlane;
  if (!cp) return '_control plane not run_';
  const e = cp.endpointsPerService;
  const agentAt = (n: number) => cp.agent.find((a) => a.n === n);
  const full = cp.netfilter.map((p) => {
    const a = agentAt(p.n);
    const eng = cp.engine.find((x) => x.n === p.n);
    return [
      fmtN(p.n),
      a && isAgentResult(a) ? fmtDuration(a.fullSyncMs) : a ? 'failed' : 'n/a',
      a && isAgentResult(a) ? fmtDuration(a.startToSyncMs) : 'n/a',
      eng ? fmtDuration(eng.fullSyncMs) : 'n/a',
      op(p.iptables.fullNoflush),
      op(p.iptables.fullReplace),
      op(p.nftables.full),
    ];
  });
  const change = cp.netfilter.map((p) => {
    const a = agentAt(p.n);
    const eng = cp.engine.find((x) => x.n === p.n);
    return [
      fmtN(p.n),
      a && isAgentResult(a) ? `${fmtDuration(a.change.wallP50)} / ${fmtDuration(a.change.wallP99)}` : 'n/a',
      a && isAgentResult(a) ? fmtDuration(a.change.syncP50) : 'n/a',
      eng ? fmtDuration(eng.changePartialMs.p50) : 'n/a',
      eng ? fmtDuration(eng.changeFullMs.p50) : 'n/a',
      op(p.iptables.changeFull),
      op(p.iptables.changePartial),
      op(p.nftables.changeDelta),
    ];
  });
  const mem = cp.agent.map((a) =>
    isAgentResult(a)
      ? [fmtN(a.n), int(a.n * e), `${(a.rssAfterSync / MiB).toFixed(0)} MiB`, `${(a.rssAfterChanges / MiB).toFixed(0)} MiB`]
      : [fmtN(a.n), int(a.n * e), a.skipped, ''],
  );
  const streamed = cp.agent.filter(isAgentResult).filter((a) => a.stream);
  const stream = streamed.map((a) => {
    const s = a.stream!;
    const q = (x: typeof s.p50) => (x ? `${(x.value * 1000).toFixed(2)} ms (bucket <= ${(x.bucketLe * 1000).toFixed(1)} ms)` : 'n/a');
    return [
      fmtN(a.n),
      `${s.changes} at ${s.ratePerSec}/s`,
      String(s.observed),
      q(s.p50),
      q(s.p99),
      `${s.syncMs.p50.toFixed(2)} / ${s.syncMs.p99.toFixed(2)} ms (${s.syncMs.syncs} syncs)`,
    ];
  });
  const rules = cp.netfilter.map((p) => [fmtN(p.n), int(p.iptables.rules), `${int(p.nftables.chains)} / ${int(p.nftables.rules)}`]);
  const skips = cp.netfilter.flatMap((p) => {
    const ops: Array<[string, Op]> = [
      ['iptables-restore --noflush', p.iptables.fullNoflush],
      ['iptables-restore replace', p.iptables.fullReplace],
      ['iptables full restore (one change)', p.iptables.changeFull],
      ['iptables partial restore (one change)', p.iptables.changePartial],
      ['nft -f', p.nftables.full],
      ['nft delta (one change)', p.nftables.changeDelta],
    ];
    return ops.filter(([, o]) => !isOp(o)).map(([name, o]) => `- N=${fmtN(p.n)}, ${name}: ${isOp(o) ? '' : o.skipped}`);
  });
  return [
    `**Program N services x ${e} endpoints from empty.** svcmap agent: its "sync done" (plan + batched map writes) and from process start to synced (BPF load, informer lists from the API server, model, sync); engine: src/sync against real maps in-process, no source. iptables: kube-proxy's \`iptables-restore --noflush\` of every KUBE-* chain (nft backend, as on this host), and a plain replace of the tables as a lower bound. nftables: \`nft -f\` of kube-proxy's table.`,
    '',
    table(
      [
        'N services',
        'svcmap agent sync',
        'svcmap agent start -> synced',
        'svcmap engine',
        'iptables-restore --noflush (kube-proxy)',
        'iptables-restore replace',
        'nft -f',
      ],
      full,
    ),
    '',
    "**One endpoint change.** svcmap agent: an EndpointSlice update on the API server until the agent logs the partial sync (p50 / p99), and that sync's own duration; engine: a partial sync of one Service in-process, and a full plan over all N (what the file source and the periodic resync do). iptables: a full `--noflush` restore with one KUBE-SEP replaced (kube-proxy < 1.27, and its periodic full resync), and a partial restore (kube-proxy >= 1.27: KUBE-SERVICES in full plus the changed chains). nftables: kube-proxy's delta transaction.",
    '',
    table(
      [
        'N services',
        'svcmap agent (wall p50 / p99)',
        'svcmap agent sync',
        'svcmap engine partial',
        'svcmap full plan',
        'iptables full restore',
        'iptables partial restore',
        'nft delta',
      ],
      change,
    ),
    '',
    '**svcmap agent memory** (VmRSS):',
    '',
    table(['N services', 'endpoints', 'RSS after full sync', 'RSS after the changes'], mem),
    '',
    ...(stream.length
      ? [
          "**Network programming latency** (`svcmap_network_programming_duration_seconds`, from the EndpointSlice's last-change-trigger-time to the map write; histogram quantiles interpolated inside Prometheus buckets) under a stream of endpoint changes to distinct services:",
          '',
          table(['N services', 'changes', 'observed', 'p50', 'p99', 'partial sync p50 / p99'], stream),
          '',
        ]
      : []),
    "Size of kube-proxy's rulesets:",
    '',
    table(['N services', 'iptables rules', 'nftables chains / rules'], rules),
    ...(skips.length ? ['', 'Skipped:', '', ...skips] : []),
  ].join('\n');
}

const REAL_LABEL: Record<string, string> = {
  nftables: 'kube-proxy nftables',
  iptables: 'kube-proxy iptables',
  ipvs: 'kube-proxy ipvs',
  svcmap: 'svcmap agent',
};

/** The real kube-proxy (its own binary, its own metrics) beside svcmap under one real kube-apiserver. */
export function realKubeProxyTables(r: BenchResults & { realKubeProxy?: RealKpResult }): string {
  const k = r.realKubeProxy;
  if (!k) return '_the real kube-proxy was not run_';
  const ms = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? 'n/a' : fmtDuration(x));
  // +Inf is null once through JSON (latest.json, --render).
  const q = (x: { value: number; bucketLe: number | null } | undefined) =>
    x
      ? `${fmtDuration(x.value * 1000)} (<= ${x.bucketLe === null || x.bucketLe === Infinity ? '+Inf' : fmtDuration(x.bucketLe * 1000)})`
      : 'n/a';
  const rows: string[][] = [];
  const skips: string[] = [];
  for (const p of k.points) {
    for (const x of p.proxies) {
      const name = REAL_LABEL[x.proxy] ?? x.proxy;
      if (isRealSkipped(x)) {
        rows.push([fmtN(p.n), name, 'skipped', '', '', '', '', '', '']);
        skips.push(`- N=${fmtN(p.n)}, ${name}: ${x.skipped}`);
        continue;
      }
      const y: RealProxyResult = x;
      const s = y.stream;
      const sync = s
        ? y.proxy === 'svcmap'
          ? `${ms(s.syncs.p50Ms)} / ${ms(s.syncs.p99Ms)} (${s.syncs.count})`
          : `${ms(s.syncs.p50Ms)} / ${ms(s.syncs.p99Ms)} (<= ${ms(s.syncs.p50BucketLeMs)} / <= ${ms(s.syncs.p99BucketLeMs)}; ${s.syncs.count}, mean ${ms(s.syncs.meanMs)})`
        : 'n/a';
      const dp = y.datapath;
      rows.push([
        fmtN(p.n),
        name,
        `${fmtDuration(y.startToSyncedMs)} (sync ${fmtDuration(y.firstSyncMs)})`,
        `${(y.rssAfterSync / MiB).toFixed(0)} / ${(y.rssAfterChanges / MiB).toFixed(0)} MiB`,
        sync,
        s ? q(s.p50) : 'n/a',
        s ? `${q(s.p99)}; ${s.observed}/${s.changes}` : 'n/a',
        dp ? `${int(dp.connPerSec)} (**${dp.vsDirect.perConn.toFixed(2)}x**)` : 'n/a',
        dp ? `${int(median(dp.directRuns.map((d) => d.connPerSec)))}` : 'n/a',
      ]);
    }
  }
  const loads = k.points.map((p) =>
    'skipped' in p.load
      ? `- N=${fmtN(p.n)}: not loaded: ${p.load.skipped}`
      : `- N=${fmtN(p.n)}: ${int(p.load.objects)} objects in ${fmtDuration(p.load.ms)} (${int(p.load.perSec)}/s, ${p.load.concurrency} concurrent requests)`,
  );
  const stream = k.points.flatMap((p) => p.proxies).find((x): x is RealProxyResult => !isRealSkipped(x) && x.stream !== undefined)?.stream;
  return [
    `${k.kubernetesVersion} (its own binary) and the svcmap agent, one after the other, each against the same kube-apiserver + etcd holding N Services x ${k.endpointsPerService} endpoints (written through the API; a fresh etcd per N), in the bench's node namespace. **synced**: process start to its first full sync of the N services (that sync's own duration in brackets: kube-proxy's \`kubeproxy_sync_proxy_rules_duration_seconds\`, svcmap's "sync done"). **RSS** after that sync / after the changes. Under ${stream ? `${stream.changes} EndpointSlice changes to distinct services at ${stream.ratePerSec}/s` : 'a stream of EndpointSlice changes'} (each carrying \`endpoints.kubernetes.io/last-change-trigger-time\`): the syncs (kube-proxy: its sync histogram, interpolated inside its buckets, bucket bound after "<="; svcmap: exact, from its log) and the **network programming latency** (\`kubeproxy_network_programming_duration_seconds\` / \`svcmap_network_programming_duration_seconds\`, histogram quantiles; observed/changes). **conn/s** to the last service from a client pod on the node (4 backend pods), in brackets the time per connection relative to the same client connecting to the pods directly, paired round by round; kube-proxy with its default settings (e.g. min sync period 1 s).`,
    '',
    table(
      [
        'N services',
        'proxy',
        'synced (first sync)',
        'RSS sync / changes',
        'syncs under changes p50 / p99',
        'programming p50',
        'programming p99',
        'conn/s (vs direct)',
        'direct conn/s',
      ],
      rows,
    ),
    '',
    'Loading the API server (Services and EndpointSlices, from empty):',
    '',
    ...loads,
    ...(k.ipvs ? ['', `ipvs mode: not run: ${k.ipvs}.`] : []),
    ...(skips.length ? ['', 'Skipped:', '', ...skips] : []),
    '',
    `Isolation: kube-proxy ran only in the bench's node namespace (and a mount namespace of its own); the root namespace's nftables ruleset was ${k.safety.rootRulesetUnchanged ? 'unchanged' : '**changed**'} after the run and the kernel-wide conntrack settings ${k.safety.sysctlsUnchanged ? 'unchanged' : `**changed** (restored: ${k.safety.restored.join(', ')})`}.`,
    ...k.notes.map((n) => `\n${n}`),
  ].join('\n');
}

export function lbTable(r: BenchResults): string {
  if (!r.lb.length) return '_load-balancing scenario not run_';
  const rows = r.lb.map((l) => [
    l.algorithm,
    String(l.connections),
    String(l.trials.length),
    `${(l.keptShare * 100).toFixed(0)}%`,
    `${(l.addedShare * 100).toFixed(0)}%`,
    `${l.maxOverMean.toFixed(2)}`,
  ]);
  return [
    '**Rolling update** (kube-proxy docs scenario): backends X and Y hold the long-lived connections; X is replaced by Z and its clients reconnect through the VIP. Share of open connections afterwards (even = 50% / 50%, max/mean 1.00):',
    '',
    table(['selection', 'connections', 'trials', 'kept backend Y', 'new backend Z', 'max/mean'], rows),
    ...(r.maglev ? ['', maglevDisruptionLine(r.maglev)] : []),
  ].join('\n');
}

export function snatTable(r: BenchResults): string {
  const s = r.snat;
  if (!s) return '';
  const label: Record<string, string> = {
    svcmap: "svcmap (tc, SNAT to the egress device's address)",
    iptables: 'kube-proxy iptables (MASQUERADE --random-fully)',
  };
  const rows = s.modes.map((m) => [
    label[m.mode] ?? m.mode,
    int(m.connPerSec),
    int(Math.min(...m.runs.map((x) => x.connPerSec))),
    int(Math.max(...m.runs.map((x) => x.connPerSec))),
    int(m.ok),
    `${m.failed}${
      m.failed
        ? ` (${Object.entries(m.errors)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')})`
        : ''
    }`,
  ]);
  return [
    `**New SNATed TCP connections per second** from outside to a NodePort whose one backend is on another node (externalTrafficPolicy Cluster: DNAT + SNAT on the node), ${s.processes} client processes at once, each opening one connection after another (RST on close), ${s.durationMs / 1000} s per run, ${s.reps} rounds (median; min and max of the rounds). svcmap is ${s.svcmapVsIptables.toFixed(2)}x MASQUERADE's rate (median of the per-round ratios); svcmap dropped ${s.snatPortsExhausted} SYNs for want of a SNAT port.`,
    '',
    table(['datapath', 'conn/s (median)', 'min', 'max', 'connections', 'failed'], rows),
  ].join('\n');
}

export function forwardingTable(r: BenchResults): string {
  const f = r.forwarding;
  if (!f) return '';
  const label: Record<string, string> = {
    routing: 'plain routing, no Service (the ceiling)',
    'svcmap-tc': 'svcmap tc',
    'svcmap-xdp': 'svcmap XDP (--acceleration native)',
    'kube-proxy-nftables': 'kube-proxy nftables',
    'kube-proxy-iptables': 'kube-proxy iptables',
  };
  const routing = f.rows.find((x) => x.row === 'routing');
  const rows = f.rows.map((x) => {
    if (isFwdSkipped(x)) return [label[x.row] ?? x.row, x.skipped, '', '', '', ''];
    const vsRouting =
      routing && !isFwdSkipped(routing) && x.row !== 'routing'
        ? `${pairedMedianRatio(
            x.runs.map((y) => y.nsPerPacket),
            routing.runs.map((y) => y.nsPerPacket),
          ).toFixed(2)}x`
        : '';
    return [
      label[x.row] ?? x.row,
      int(x.pps),
      `${Math.round(x.nsPerPacket)}`,
      int(x.perCorePps),
      vsRouting,
      `${Math.round(x.nodeBusy * 100)}%`,
    ];
  });
  const ratio = (v: number | undefined) => (v === undefined ? 'n/a' : `${v.toFixed(2)}x`);
  return [
    `**Forwarded packets** of UDP (${f.frameBytes}-byte frames, ${f.flows} flows) from a generator outside the cluster to a NodePort whose one backend is on another node (externalTrafficPolicy Cluster: DNAT + SNAT on the node), counted at the backend; the node's work runs on CPU ${f.nodeCpu} (its ingress veth's threaded NAPI kthread, SCHED_FIFO), the generator on CPU ${f.genCpu}. CPU per packet: that kthread's and ksoftirqd's run time over the packets counted; packets per core: its inverse. ${f.durationMs / 1000} s per run, ${f.reps} rounds, every row once per round, the order alternating (medians; ratios are medians of the per-round ratios). Per core, svcmap tc is ${ratio(f.ratios.tcVsNftables)} and XDP ${ratio(f.ratios.xdpVsNftables)} kube-proxy nftables'.${f.kubernetesVersion ? ` kube-proxy ${f.kubernetesVersion.replace(/^Kubernetes /, '')}.` : ''}`,
    '',
    table(
      ['datapath', 'packets/s at the backend', 'node CPU ns/packet', 'packets/s per core', 'CPU/packet vs routing', 'node CPU busy'],
      rows,
    ),
    ...f.rows.flatMap((x) =>
      !isFwdSkipped(x) && x.bpf
        ? [
            '',
            `${label[x.row] ?? x.row}, one more run with the kernel's BPF statistics on (\`bench/bpfstats.c\`): its programs ran ${Math.round(x.bpf.bpfNsPerPacket)} ns of the ${Math.round(x.bpf.nsPerPacket)} ns of node CPU per packet (${x.bpf.programs.map((p) => `${p.name} ${Math.round(p.nsPerRun)} ns x ${p.runsPerPacket.toFixed(2)} per packet`).join(', ')}); the rest is the kernel around them.`,
          ]
        : [],
    ),
  ].join('\n');
}

export function targetsTable(r: BenchResults): string {
  return table(
    ['target', 'goal', 'measured', 'met'],
    r.targets.map((t) => [t.what, t.target, t.measured, t.met === undefined ? 'n/a' : t.met ? 'yes' : '**no**']),
  );
}

/** Plain statements of where svcmap is behind, derived from the numbers. */
export function behind(r: BenchResults): string[] {
  const out: string[] = [];
  for (const t of r.targets) if (t.met === false) out.push(`Target missed - ${t.what}: ${t.measured} (goal ${t.target}).`);
  const close = r.datapath.flatMap((p) => {
    const v = modeResult(p, 'svcmap')?.vsDirect;
    return v && v.perConn <= 1.05 && v.perConn > 1.04 ? [`N=${fmtN(p.n)} (${v.perConn.toFixed(3)}x)`] : [];
  });
  if (close.length)
    out.push(`Datapath: within the 1.05x target but only just at ${close.join(', ')}; another run on this VM can land on either side.`);
  for (const p of r.datapath) {
    const s = modeResult(p, 'svcmap');
    if (!s) continue;
    for (const m of ['iptables', 'nftables'] as const) {
      const k = modeResult(p, m);
      if (k && k.connPerSec > s.connPerSec * 1.02)
        out.push(
          `At N=${fmtN(p.n)} the ${m} shape set up more connections per second than svcmap (${int(k.connPerSec)} vs ${int(s.connPerSec)}).`,
        );
      if (k && k.p50Us < s.p50Us * 0.98)
        out.push(
          `At N=${fmtN(p.n)} the ${m} shape had a lower p50 connect latency than svcmap (${k.p50Us.toFixed(1)} vs ${s.p50Us.toFixed(1)} µs).`,
        );
    }
  }
  const slowSetups = r.datapath.flatMap((p) => {
    const sm = p.programming.svcmap?.ms;
    const others = (['iptables', 'nftables'] as const).filter((m) => sm !== undefined && p.programming[m] && p.programming[m].ms < sm);
    return others.length
      ? [`N=${fmtN(p.n)}: ${fmtDuration(sm!)} vs ${others.map((m) => `${m} ${fmtDuration(p.programming[m]!.ms)}`).join(', ')}`]
      : [];
  });
  if (slowSetups.length)
    out.push(
      `Getting the datapath benchmark's services in place (svcmap: agent start with the file source to its first sync; the others: one restore of the whole ruleset) took svcmap longer: ${slowSetups.join('; ')}.`,
    );
  const cp = r.controlPlane;
  if (cp) {
    const agents = cp.agent.filter(isAgentResult);
    for (const p of cp.netfilter) {
      const a = agents.find((x) => x.n === p.n);
      if (a && isOp(p.nftables.changeDelta) && p.nftables.changeDelta.ms < a.change.wallP50)
        out.push(
          `At N=${fmtN(p.n)} an nftables delta (${fmtDuration(p.nftables.changeDelta.ms)}) applied one endpoint change faster than the agent reflected it (${fmtDuration(a.change.wallP50)} p50, API server to map write).`,
        );
    }
    // Cold start against a one-shot restore, at every N where both ran.
    const slowStarts = cp.netfilter.flatMap((p) => {
      const a = agents.find((x) => x.n === p.n);
      return a && isOp(p.iptables.fullReplace) && p.iptables.fullReplace.ms < a.startToSyncMs
        ? [`${fmtDuration(a.startToSyncMs)} vs ${fmtDuration(p.iptables.fullReplace.ms)} at N=${fmtN(p.n)}`]
        : [];
    });
    if (slowStarts.length) {
      out.push(
        `Cold start: from process start to synced (runtime and BPF load, informer lists, model, sync), the agent took longer than one iptables-restore of the same rules: ${slowStarts.join(', ')}. kube-proxy pays its start once too, but its first sync is not slower than its restore.`,
      );
    }
    const largest = agents.at(-1);
    const tenK = agents.find((a) => a.n === 10_000);
    if (largest && tenK && largest.n > tenK.n && largest.fullSyncMs / tenK.fullSyncMs > (largest.n / tenK.n) * 1.3) {
      out.push(
        `The full sync grows faster than N: ${fmtDuration(tenK.fullSyncMs)} at 10k services, ${fmtDuration(largest.fullSyncMs)} at ${fmtN(largest.n)} (x ${cp.endpointsPerService} endpoints).`,
      );
    }
    const slow = agents.filter((a) => a.change.wallP99 > 10);
    if (slow.length) {
      out.push(
        `Single endpoint changes, from the API server write to the agent's sync, reached ${slow.map((a) => `${fmtDuration(a.change.wallP99)} at N=${fmtN(a.n)}`).join(', ')} at p99 (p50 ${slow.map((a) => fmtDuration(a.change.wallP50)).join(' / ')}), while the syncs themselves took at most ${fmtDuration(Math.max(...slow.map((a) => a.change.syncP99)))} at p99: the tail is outside the map writes (watch delivery, informer, event loop; the bench's in-process API server included).`,
      );
    }
    const rss = agents.map((a) => `${(a.rssAfterSync / MiB).toFixed(0)} MiB at ${fmtN(a.n)}`).join(', ');
    const smallest = agents[0];
    if (agents.some((a) => a.rssAfterSync > 150 * MiB)) {
      out.push(
        `Memory: agent RSS ${rss} services (x ${cp.endpointsPerService} endpoints)${smallest && smallest.rssAfterSync > 100 * MiB ? `; even with ${smallest.n} service${smallest.n === 1 ? '' : 's'} it holds ${(smallest.rssAfterSync / MiB).toFixed(0)} MiB` : ''}.`,
      );
    }
    const eng = cp.engine.find((e) => e.n === 10_000) ?? cp.engine.at(-1);
    if (eng && eng.changeFullMs.p50 > 10)
      out.push(
        `A full pass (the periodic full resync of either source, --sync-period; and reading every manifest at start) costs validating every object (${fmtDuration(eng.validateMs)} at N=${fmtN(eng.n)}), building the model (${fmtDuration(eng.modelMs)}) and a full plan over all frontends (${fmtDuration(eng.changeFullMs.p50)}); a change syncs only the Services it touched, with either source.`,
      );
    for (const a of cp.agent) if (!isAgentResult(a)) out.push(`The agent did not complete at N=${fmtN(a.n)}: ${a.skipped}.`);
  }
  const real = (r as BenchResults & { realKubeProxy?: RealKpResult }).realKubeProxy;
  for (const p of real?.points ?? []) {
    const ok = p.proxies.filter((x): x is RealProxyResult => !isRealSkipped(x));
    const sm = ok.find((x) => x.proxy === 'svcmap');
    const kps = ok.filter((x) => x.proxy !== 'svcmap');
    if (!sm || kps.length === 0) continue;
    const leaner = kps.filter((k) => k.rssAfterSync < sm.rssAfterSync);
    if (leaner.length)
      out.push(
        `Memory beside the real kube-proxy at N=${fmtN(p.n)} (x ${p.endpointsPerService}): svcmap agent ${(sm.rssAfterSync / MiB).toFixed(0)} MiB vs ${leaner.map((k) => `kube-proxy ${k.proxy} ${(k.rssAfterSync / MiB).toFixed(0)} MiB`).join(', ')} (RSS after the first sync, same API server).`,
      );
    const faster = kps.filter((k) => k.startToSyncedMs < sm.startToSyncedMs);
    if (faster.length)
      out.push(
        `Start to synced beside the real kube-proxy at N=${fmtN(p.n)}: svcmap agent ${fmtDuration(sm.startToSyncedMs)} vs ${faster.map((k) => `kube-proxy ${k.proxy} ${fmtDuration(k.startToSyncedMs)}`).join(', ')}.`,
      );
    const more = kps.filter((k) => k.datapath && sm.datapath && k.datapath.vsDirect.perConn < sm.datapath.vsDirect.perConn * 0.98);
    if (more.length)
      out.push(
        `Datapath beside the real kube-proxy at N=${fmtN(p.n)}: ${more.map((k) => `kube-proxy ${k.proxy} ${k.datapath!.vsDirect.perConn.toFixed(2)}x`).join(', ')} vs svcmap ${sm.datapath!.vsDirect.perConn.toFixed(2)}x the time per connection of direct.`,
      );
  }
  for (const p of r.datapath) {
    const over = (p.algorithms ?? []).filter((a) => a.vsRandom.perConn > 1.03);
    if (over.length)
      out.push(
        `Datapath cost per algorithm at N=${fmtN(p.n)}: ${over.map((a) => `${a.algorithm} ${a.vsRandom.perConn.toFixed(3)}x`).join(', ')} the time per connection of random, over the issue's 3% target.`,
      );
  }
  // sh, maglev and dh hash the client or the frontend: with the scenario's one client pod they are no balancing at all, by design.
  const lc = r.lb.find((l) => l.algorithm === 'lc');
  for (const l of r.lb) {
    if (l.algorithm === 'sh' || l.algorithm === 'dh' || l.algorithm === 'maglev' || l.maxOverMean <= 1.1) continue;
    const fix =
      l.algorithm === 'lc' || l.algorithm === 'sed' || l.algorithm === 'nq'
        ? 'the least-connection choice missed its target (1.10)'
        : lc && lc.maxOverMean <= 1.1
          ? `lc gives ${lc.maxOverMean.toFixed(2)} in the same scenario (svcmap.io/lb-algorithm: lc)`
          : 'a least-connections scheduler is needed to fix it';
    out.push(
      `Load-balancing quality: with ${l.algorithm} selection a rolling update leaves the kept backend with ${(l.keptShare * 100).toFixed(0)}% of the connections (max/mean ${l.maxOverMean.toFixed(2)}); ${fix}.`,
    );
  }
  return out;
}

export function summaryMarkdown(r: BenchResults, chartPath: string): string {
  const m = r.machine;
  const date = r.startedAt.slice(0, 10);
  const behindList = behind(r);
  return [
    '## Benchmarks',
    '',
    `Measured by \`make bench\` (\`node bench/run.ts\`) on ${date}: ${m.cpuModel}, ${m.vcpus} vCPUs, ${m.memoryGiB} GiB, Linux ${m.kernel} (${m.os}), Node ${m.node}, ${m.iptables}, ${m.nft}. Load average ${m.loadavgAtStart.toFixed(2)} at the start and ${m.loadavgAtEnd.toFixed(2)} at the end of the run (${fmtDuration(r.durationS * 1000)}). Everything runs in network namespaces the bench creates; client and servers are pinned to one CPU; conntrack is flushed before each run. Ratios are within this one run.`,
    '',
    `![svcmap benchmarks](${chartPath})`,
    '',
    `Reproduce with \`make bench\` (${fmtDuration(r.durationS * 1000)} here; \`make bench-smoke\` runs every part at tiny sizes in well under a minute). Raw numbers: \`bench/results/latest.json\`.`,
    '',
    '### Targets',
    '',
    targetsTable(r),
    '',
    '### Where svcmap is behind',
    '',
    ...(behindList.length ? behindList.map((b) => `- ${b}`) : ['- Nowhere in this run.']),
    '',
    '### Datapath',
    '',
    datapathTables(r),
    ...(algorithmCostTable(r) ? ['', algorithmCostTable(r)] : []),
    '',
    '### Control plane',
    '',
    controlPlaneTables(r),
    '',
    '### Load-balancing quality',
    '',
    lbTable(r),
    ...(r.snat ? ['', '### SNAT rate beside MASQUERADE', '', snatTable(r)] : []),
    ...(r.forwarding ? ['', '### Forwarding beside kube-proxy', '', forwardingTable(r)] : []),
    ...((r as BenchResults & { realKubeProxy?: RealKpResult }).realKubeProxy
      ? ['', '### The real kube-proxy beside svcmap', '', realKubeProxyTables(r)]
      : []),
    ...(r.notes.length ? ['', '### Notes', '', ...r.notes.map((n) => `- ${n}`)] : []),
    '',
  ].join('\n');
}
