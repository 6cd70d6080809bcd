// The upstream `[sig-network]` specs of Kubernetes' e2e.test against the lab
// cluster (make e2e-network, make e2e-network-kube-proxy): conformance.ts's
// runner with a wider selection, every [sig-network] spec but the ones
// SKIPS names (each with why), and a per-spec table of the two proxies.
//
//   node lab/cluster/e2e-network.ts [--proxy svcmap|kube-proxy] [conformance.ts's flags]
//   node lab/cluster/e2e-network.ts table     only (re)write the table
//
// Each run keeps its artifacts in .tools/e2e-network/<proxy>/ (summary.json,
// JUnit, logs, diagnostics) and then writes .tools/e2e-network/table.md and
// table.json from whichever of the two summaries exist: one row per spec,
// the state and seconds with svcmap and with kube-proxy, and the failure.
// The last line printed is conformance.ts's "N passed, N failed, N skipped".

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isMain, main, type ConformanceSummary, type ProxyKind, type RunnerDefaults } from './conformance.ts';
import type { SpecResult } from './conformance-junit.ts';
import { REPO_ROOT } from './paths.ts';

export const NETWORK_FOCUS = String.raw`\[sig-network\]`;

/** What is left out, and why: a pattern (RE2 and JavaScript alike) per reason. */
export const SKIPS: ReadonlyArray<{ pattern: string; why: string }> = [
  { pattern: 'Alpha|Beta|Experimental|Federation', why: 'not generally available' },
  { pattern: 'Disruptive|Serial', why: 'disrupt the cluster or need it to themselves (the run is parallel)' },
  { pattern: 'Slow|Flaky', why: 'marked slow or flaky upstream' },
  {
    pattern: 'LoadBalancers|GCE|NEG|Firewall|Feature:Ingress',
    why: 'need a cloud provider (load balancers, GCE, network endpoint groups, firewalls, ingress controllers)',
  },
  { pattern: 'NetworkPolicy|Netpol', why: "NetworkPolicy is the network plugin's job, not the service proxy's" },
  { pattern: 'SCTPConnectivity', why: 'this kernel has no SCTP' },
  { pattern: 'KubeProxy|kube-proxy', why: 'about the kube-proxy binary itself (its metrics, its conntrack settings, restarting it)' },
  { pattern: 'IPerf2', why: 'a bandwidth benchmark' },
  { pattern: 'PerformanceDNS', why: 'a DNS scale benchmark' },
  { pattern: 'Internet connection', why: 'need the internet (connect to 8.8.8.8:53 and google.com:80); the lab has no route out' },
];

export const NETWORK_SKIP = SKIPS.map((s) => s.pattern).join('|');

export const ARTIFACTS_ROOT = join(REPO_ROOT, '.tools', 'e2e-network');

export const NETWORK_DEFAULTS: RunnerDefaults = {
  command: 'node lab/cluster/e2e-network.ts',
  focus: NETWORK_FOCUS,
  skip: NETWORK_SKIP,
  parallel: 4,
  timeout: '60m',
  artifactsRoot: ARTIFACTS_ROOT,
};

// ---------------------------------------------------------------------------
// The table of both runs

const PROXIES: readonly ProxyKind[] = ['svcmap', 'kube-proxy'];

export interface TableRow {
  name: string;
  /** Per proxy: absent when that run has no summary or did not list the spec. */
  results: Partial<Record<ProxyKind, Pick<SpecResult, 'state' | 'seconds' | 'reason'>>>;
}

export interface Table {
  runs: Partial<Record<ProxyKind, { startedAt: string; counts: ConformanceSummary['counts']; seconds: number; error?: string }>>;
  rows: TableRow[];
}

/** One row per spec that ran in either run (specs left out by --skip in both are not rows). */
export function mergeTable(summaries: Partial<Record<ProxyKind, ConformanceSummary>>): Table {
  const table: Table = { runs: {}, rows: [] };
  const rows = new Map<string, TableRow>();
  for (const p of PROXIES) {
    const s = summaries[p];
    if (!s) continue;
    table.runs[p] = { startedAt: s.startedAt, counts: s.counts, seconds: s.durations.total ?? 0, ...(s.error ? { error: s.error } : {}) };
    for (const r of s.specs) {
      if (r.state === 'skipped' && r.reason.startsWith('left out by --skip')) continue;
      const row = rows.get(r.name) ?? { name: r.name, results: {} };
      row.results[p] = { state: r.state, seconds: r.seconds, reason: r.reason };
      rows.set(r.name, row);
    }
  }
  table.rows = [...rows.values()].sort((a, b) => a.name.localeCompare(b.name));
  return table;
}

const cell = (r: TableRow['results'][ProxyKind]) =>
  r ? `${r.state === 'passed' ? 'pass' : r.state === 'failed' ? '**FAIL**' : 'skip'} (${r.seconds.toFixed(1)})` : '-';
const escape = (s: string) => s.replace(/\|/g, '\\|').replace(/\s+/g, ' ').trim();

export function tableMarkdown(t: Table): string {
  const lines = ['| proxy | passed | failed | skipped | run |', '| --- | --- | --- | --- | --- |'];
  for (const p of PROXIES) {
    const r = t.runs[p];
    if (r)
      lines.push(
        `| ${p} | ${r.counts.passed} | ${r.counts.failed} | ${r.counts.skipped} | ${r.startedAt}, ${Math.round(r.seconds)} s${r.error ? `, setup failed: ${escape(r.error.split('\n')[0]!)}` : ''} |`,
      );
  }
  lines.push('', '| spec | svcmap | kube-proxy | failure |', '| --- | --- | --- | --- |');
  for (const row of t.rows) {
    const failure = PROXIES.map((p) => (row.results[p]?.state === 'failed' ? `${p}: ${escape(row.results[p]!.reason).slice(0, 300)}` : ''))
      .filter(Boolean)
      .join('; ');
    lines.push(`| ${escape(row.name)} | ${cell(row.results.svcmap)} | ${cell(row.results['kube-proxy'])} | ${failure} |`);
  }
  return `${lines.join('\n')}\n`;
}

/** Reads .tools/e2e-network/<proxy>/summary.json of both proxies and writes table.md and table.json. */
export function writeTable(root = ARTIFACTS_ROOT): { md: string; json: string } {
  const summaries: Partial<Record<ProxyKind, ConformanceSummary>> = {};
  for (const p of PROXIES) {
    const f = join(root, p, 'summary.json');
    if (existsSync(f)) summaries[p] = JSON.parse(readFileSync(f, 'utf8')) as ConformanceSummary;
  }
  const t = mergeTable(summaries);
  const md = join(root, 'table.md');
  const json = join(root, 'table.json');
  writeFileSync(md, tableMarkdown(t));
  writeFileSync(json, `${JSON.stringify(t, null, 2)}\n`);
  return { md, json };
}

if (isMain(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args[0] === 'table') {
    const { md, json } = writeTable();
    process.stdout.write(`${md}\n${json}\n`);
    process.exit(0);
  }
  main(args, NETWORK_DEFAULTS).then(
    ({ code, summary }) => {
      if (summary) {
        const { md } = writeTable();
        // On stderr: .ci/run finds the count line on stdout by its pattern.
        process.stderr.write(`per-spec table: ${md}\n`);
      }
      process.exit(code);
    },
    (e: unknown) => {
      process.stderr.write(`e2e-network: ${(e as Error).stack ?? String(e)}\n`);
      process.exit(1);
    },
  );
}
