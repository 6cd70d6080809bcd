// make bench-smoke, as a test: runs `node bench/run.ts --smoke` (tiny sizes,
// every code path: the C client and server, svcmap, kube-proxy's iptables
// and nftables shapes, the sync engine, the agent with the Kubernetes source
// and its latency metric, the rolling-update scenario, the SNAT rate beside
// MASQUERADE, forwarded packets beside kube-proxy, the report and the chart) into a temporary directory and checks the shape of what it wrote.
// Timings are never asserted: this is a shared 2-vCPU VM.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { type ScriptResult, runNodeScript } from '../../lab/processes.ts';
import type { BenchResults } from '../../bench/results.ts';

// Every part at tiny sizes, each agent started and synced for real: minutes, past .taprc's 240 s per file.
t.setTimeout(15 * 60_000);

const RUN = fileURLToPath(new URL('../../bench/run.ts', import.meta.url));

function runBench(args: string[]): Promise<ScriptResult> {
  return runNodeScript(RUN, args);
}

t.test('bench --smoke runs every part and writes results, chart and summary', { timeout: 600_000 }, async (t) => {
  const out = mkdtempSync(join(tmpdir(), 'svcmap-bench-smoke-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  const r = await runBench(['--smoke', '--out', out]);
  t.equal(r.code, 0, `exit code 0; stderr tail:\n${r.stderr.slice(-3000)}`);
  if (r.code !== 0) return;

  const files = readdirSync(out);
  t.ok(files.includes('latest.json'), 'latest.json');
  t.ok(
    files.some((f) => /^\d{4}-\d\d-\d\dT.*Z\.json$/.test(f)),
    'a timestamped results file',
  );
  t.ok(files.includes('chart.svg') && files.includes('summary.md'), 'chart.svg and summary.md');

  const res = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')) as BenchResults;
  t.equal(res.schema, 'svcmap-bench/1');
  t.equal(res.mode, 'smoke');
  t.match(res.machine, { cpuModel: String, kernel: String, vcpus: Number });

  t.same(
    res.datapath.map((p) => p.n),
    [1, 100],
    'datapath at N = 1 and 100',
  );
  for (const p of res.datapath) {
    t.same(
      p.results.map((m) => m.mode),
      ['direct', 'svcmap', 'iptables', 'nftables'],
      `N=${p.n}: every mode reported`,
    );
    for (const m of p.results) {
      t.notOk('skipped' in m, `N=${p.n} ${m.mode} ran (smoke sizes are far below the budget)`);
      if ('skipped' in m) continue;
      t.ok(m.connPerSec > 0 && m.p50Us > 0 && m.p99Us >= m.p50Us, `N=${p.n} ${m.mode}: rate and latencies`);
      t.ok(
        m.runs.every((run) => run.ok > 0),
        `N=${p.n} ${m.mode}: connections succeeded`,
      );
      if (m.mode !== 'direct') t.ok(m.vsDirect && m.vsDirect.perConn > 0, `N=${p.n} ${m.mode}: ratio to direct`);
    }
    t.ok(p.programming.svcmap && p.programming.iptables && p.programming.nftables, `N=${p.n}: programming times`);
  }
  t.same(
    res.datapath6?.map((p) => [p.n, p.family]),
    [
      [1, 6],
      [100, 6],
    ],
    'the IPv6 rows at N = 1 and 100',
  );
  for (const p of res.datapath6 ?? []) {
    for (const m of p.results) {
      if (m.mode === 'iptables' || m.mode === 'nftables') {
        t.ok('skipped' in m, `IPv6 N=${p.n} ${m.mode}: not run (IPv4 rule shapes)`);
        continue;
      }
      t.ok(!('skipped' in m) && m.runs.every((run) => run.ok > 0), `IPv6 N=${p.n} ${m.mode}: connections succeeded`);
      if (!('skipped' in m) && m.mode === 'svcmap') t.ok(m.vsDirect && m.vsDirect.perConn > 0, `IPv6 N=${p.n} svcmap: ratio to direct`);
    }
  }
  t.same(
    res.datapath[0]!.algorithms?.map((a) => a.algorithm),
    ['lc', 'maglev'],
    'N=1: the algorithms beside random',
  );
  for (const a of res.datapath[0]!.algorithms ?? []) {
    t.ok(
      a.runs.length === 1 && a.randomRuns.length === 1 && a.runs.every((run) => run.ok > 0) && a.vsRandom.perConn > 0,
      `N=1 ${a.algorithm}: connections succeeded, a ratio to random`,
    );
  }
  t.notOk(res.datapath[1]!.algorithms, 'N=100: no algorithm rows (not asked for)');
  const ipt = res.datapath[1]!.results.find((m) => m.mode === 'iptables');
  t.ok(
    ipt && !('skipped' in ipt) && ipt.runs.some((run) => run.conntrackFlushed >= 0),
    'conntrack is active for the iptables runs (ctflush read nf_conntrack_count, not -1)',
  );

  const cp = res.controlPlane!;
  t.ok(cp, 'control plane ran');
  t.same(
    cp.engine.map((e) => e.n),
    [1, 100],
  );
  t.same(
    cp.engine.map((e) => e.entries.services),
    [11, 1100],
    'engine: a master and 10 slots per service',
  );
  t.same(
    cp.agent.map((a) => a.n),
    [1, 100],
  );
  for (const a of cp.agent) {
    t.notOk('skipped' in a, `agent ran at N=${a.n}`);
    if ('skipped' in a) continue;
    t.ok(a.fullSyncMs >= 0 && a.startToSyncMs > 0 && a.rssAfterSync > 0, `agent N=${a.n}: sync, start and RSS`);
    t.equal(a.change.reps, 3, `agent N=${a.n}: single changes`);
  }
  const streamed = cp.agent.find((a) => !('skipped' in a) && a.stream);
  t.ok(
    streamed && !('skipped' in streamed) && streamed.stream!.observed >= 1 && streamed.stream!.p99,
    'the latency metric observed the stream',
  );
  for (const p of cp.netfilter) {
    for (const [name, o] of Object.entries({ ...p.iptables, ...p.nftables })) {
      if (typeof o === 'number') continue;
      t.ok('ms' in o, `N=${p.n} ${name} measured${'skipped' in o ? `: ${o.skipped}` : ''}`);
    }
  }

  t.same(
    res.lb.map((l) => l.algorithm),
    ['random', 'lc'],
    'one load-balancing row per algorithm the smoke run asks for',
  );
  t.equal(res.lb[0]!.trials.length, 2, 'two trials (the second starts where the first ended)');
  t.ok(res.lb[1]!.maxOverMean <= 1.1, `lc: the reconnecting clients go to the new backend (max/mean ${res.lb[1]!.maxOverMean})`);
  const trial = res.lb[0]!.trials[0]!;
  t.equal(
    Object.values(trial.after).reduce((a, b) => a + b, 0),
    res.lb[0]!.connections,
    'every connection is open again after the rolling update',
  );
  t.notOk(trial.replaced in trial.after, 'nothing is left on the replaced backend');

  const snat = res.snat;
  t.ok(snat, 'the SNAT rate part ran');
  t.same(
    snat?.modes.map((m) => m.mode),
    ['svcmap', 'iptables'],
    "svcmap and kube-proxy's MASQUERADE",
  );
  for (const m of snat?.modes ?? []) {
    t.equal(m.runs.length, 1, `${m.mode}: one round`);
    t.ok(
      m.ok > 0 && m.connPerSec > 0,
      `${m.mode}: SNATed connections succeeded (the backend's node has no route to the client: only SNATed flows are answered)`,
    );
  }
  t.ok(
    res.targets.some((x) => x.what.startsWith('New SNATed TCP flows') && x.met === undefined),
    'the SNAT target is reported, not judged at smoke durations',
  );

  const fwd = res.forwarding;
  t.ok(fwd, 'the forwarding part ran');
  t.same(
    fwd?.rows.map((x) => x.row),
    ['routing', 'svcmap-tc', 'svcmap-xdp', 'kube-proxy-nftables', 'kube-proxy-iptables'],
    'one forwarding row per datapath, the ceiling first',
  );
  for (const x of fwd?.rows ?? []) {
    if ('skipped' in x) {
      // Only what this checkout cannot run is skipped, and it says why.
      t.ok(x.row === 'svcmap-xdp' || x.row.startsWith('kube-proxy'), `${x.row}: skipped only where a part is missing (${x.skipped})`);
      t.match(x.skipped, /not built|binaries are missing/, `${x.row}: says why`);
      continue;
    }
    t.equal(x.runs.length, 1, `${x.row}: one round`);
    t.ok(
      x.runs.every((run) => run.packets > 0 && run.nodeCpuNs > 0 && run.sent >= run.packets),
      `${x.row}: packets reached the backend, counted there (no more than were sent), and the node CPU ran them`,
    );
    t.ok(x.nsPerPacket > 0 && x.perCorePps > 0, `${x.row}: CPU per packet and packets per core`);
  }
  const ran = (name: string) => fwd?.rows.some((x) => x.row === name && !('skipped' in x));
  t.ok(ran('routing') && ran('svcmap-tc'), 'plain routing and svcmap tc always run');
  if (ran('kube-proxy-nftables')) t.ok(fwd!.ratios.tcVsNftables! > 0, 'tc per core over kube-proxy nftables, paired');
  t.ok(fwd!.ratios.tcCpuVsRouting! > 0, "tc's CPU per packet over routing's, paired");
  for (const what of ['svcmap tc over kube-proxy nftables', 'svcmap XDP over kube-proxy nftables', 'svcmap XDP over plain routing']) {
    t.ok(
      res.targets.some((x) => x.what.includes(what) && x.met === undefined),
      `forwarding target "${what}" reported, not judged at smoke durations`,
    );
  }
  t.ok(
    res.targets.some((x) => x.what.includes('over kube-proxy') && x.what.includes('MASQUERADE') && x.met === undefined),
    'the SNAT ratio target is reported',
  );

  t.ok(res.targets.length >= 4, 'targets evaluated');
  const svg = readFileSync(join(out, 'chart.svg'), 'utf8');
  t.match(svg, /^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  t.match(svg, /Datapath: connections per second/);
  t.match(svg, /One endpoint change/);
  t.ok((svg.match(/<path /g) ?? []).length >= 8, 'lines drawn');
  const md = readFileSync(join(out, 'summary.md'), 'utf8');
  t.match(md, /## Benchmarks/);
  t.match(md, /Linux \S+/);
  t.match(md, /### Where svcmap is behind/);
  t.match(md, /\| N services \| direct to pod \| svcmap \| kube-proxy iptables \| kube-proxy nftables \|/);
  t.match(md, /### SNAT rate beside MASQUERADE/);
  t.match(md, /### Forwarding beside kube-proxy/);
  t.match(md, /\| plain routing, no Service \(the ceiling\) \| [\d,]+ \|/);
  t.match(r.stdout, /## Datapath/);

  // --render rebuilds the same summary and chart from latest.json alone.
  rmSync(join(out, 'summary.md'));
  rmSync(join(out, 'chart.svg'));
  const again = await runBench(['--render', '--out', out]);
  t.equal(again.code, 0, `--render exit code 0; stderr tail:\n${again.stderr.slice(-3000)}`);
  t.equal(readFileSync(join(out, 'summary.md'), 'utf8'), md, '--render: the same summary');
  t.equal(readFileSync(join(out, 'chart.svg'), 'utf8'), svg, '--render: the same chart');
});
