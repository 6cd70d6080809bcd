// make flake-hunt FILES='test/a.test.ts test/b.test.ts' N=3: runs each test
// file N times, one at a time, while stress-ng keeps every core busy, and
// prints each failing check with its file and run, then one summary line. A
// test that waits for time instead of an event fails here sooner than on a
// quiet machine; that is the point. stress-ng runs in a process group of its
// own and is stopped on exit, on an error and on Ctrl-C.
//
// make flake-hunt TIERS='e2e conformance e2e-network' N=1: the same for whole
// make targets (the real-cluster tiers, which are not test files one can run
// alone): each target N times under the load, its failures read from its own
// report (tap's, or the conformance runners' PASS/FAIL list).
//
//   node lab/flake-hunt.ts [--n N] [--no-load] [--tier TARGET]... [FILE...]
//
// Exit 0 when every run passed, 1 otherwise.
import { type ChildProcess, spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const ROOT = join(import.meta.dirname, '..');
const BIN = join(ROOT, 'node_modules', '.bin');
const TAP = join(BIN, 'tap');

export interface Failure {
  /** The test file, or "make TARGET" for a tier. */
  file: string;
  run: number;
  /** The failing check, with the subtests around it: "subtest > check". */
  check: string;
}

const SUBTEST = /^(\s*)# Subtest: (.*)$/;
const RESULT = /^(\s*)(not ok|ok) \d+(?: - (.*?))?(?: # (?:time=|SKIP|TODO).*)?$/;

/**
 * The failing checks of one TAP stream (tap --reporter=tap): a `not ok` that
 * closes a subtest is the subtest's own result and is not counted again; a
 * file that failed with no failing check in it (a crash, a timeout, a plan
 * not met) is one failure named by what tap said last.
 */
export function failingChecks(tapOutput: string): string[] {
  const open: Array<{ indent: number; name: string }> = [];
  const out: string[] = [];
  let lastComment = '';
  const failedSubtests: string[] = [];
  let yaml = false; // inside a check's diagnostics (--- ... ...): its quoted source is not TAP
  for (const line of tapOutput.split('\n')) {
    if (yaml) {
      if (/^\s*\.\.\.$/.test(line)) yaml = false;
      continue;
    }
    if (/^\s*---$/.test(line)) {
      yaml = true;
      continue;
    }
    const s = SUBTEST.exec(line);
    if (s) {
      open.push({ indent: s[1]!.length, name: s[2]! });
      continue;
    }
    const r = RESULT.exec(line);
    if (r) {
      const indent = r[1]!.length;
      while (open.length && open.at(-1)!.indent > indent) open.pop();
      const top = open.at(-1);
      if (top && top.indent === indent && (r[3] ?? '') === top.name) {
        open.pop();
        if (r[2] === 'not ok') failedSubtests.push(top.name);
        continue;
      }
      // The outermost subtest is the file itself, printed beside the check already.
      if (r[2] === 'not ok') out.push([...open.filter((o) => o.indent > 0).map((o) => o.name), r[3] ?? '(unnamed)'].join(' > '));
      continue;
    }
    const c = /^\s*# (?!Subtest)(.*)$/.exec(line);
    if (c && !/^\{|^time=|^No coverage/.test(c[1]!)) lastComment = c[1]!;
  }
  if (out.length) return out;
  // A subtest (or the file) that failed with no failing check of its own: it crashed, timed out or missed its plan.
  const why = lastComment ? ` (${lastComment})` : '';
  return failedSubtests.length
    ? [`${failedSubtests[0]}: failed with no failing check${why}`]
    : [`no failing check reported${why || ' (tap exited non-zero)'}`];
}

/** stress-ng on every core, at the lowest priority (the tests keep the CPU they get, but never an idle core), in its own process group. */
function startLoad(): ChildProcess {
  const cpus = availableParallelism();
  const child = spawn('nice', ['-n', '19', 'stress-ng', '--cpu', String(cpus), '--cpu-load', '100', '--quiet'], {
    detached: true,
    stdio: 'ignore',
  });
  child.on('error', (err) => {
    process.stderr.write(`flake-hunt: stress-ng: ${err.message}\n`);
    process.exit(1);
  });
  return child;
}

function stopLoad(child: ChildProcess | undefined): void {
  if (!child?.pid || child.exitCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGTERM');
  } catch {
    /* already gone */
  }
}

/**
 * The failures of a conformance runner's report (lab/cluster/conformance.ts
 * formatSummary: "  FAIL <secs>  <spec>", "  FAIL (suite) ...", "  setup
 * failed: ..."), or of a tap run inside the target (make e2e); a target that
 * failed with neither is one failure.
 */
export function failingTierChecks(output: string): string[] {
  if (/^# \{ total: \d+/m.test(output) || /^not ok \d+/m.test(output)) return failingChecks(output);
  const out: string[] = [];
  for (const line of output.split('\n')) {
    const m = /^ {2}(?:FAIL +[\d.]+ s +(.*)|FAIL \(suite\) (.*)|setup failed: (.*))$/.exec(line);
    if (m) out.push((m[1] ?? m[2] ?? `setup failed: ${m[3]!}`).trim());
  }
  return out.length ? out : ['no failing check reported (the target exited non-zero)'];
}

/** The environment of a run of its own: tap's variables for its children are not passed on. */
function runEnv(): NodeJS.ProcessEnv {
  // The project's Node (node_modules/.bin/node) for the tests, whatever node is first on PATH;
  // a run of its own even when this process is itself a test under tap (test/lab/flake-hunt.test.ts):
  // tap's variables for its children (TAP*, _TAPJS_*, the loaders in NODE_OPTIONS) are not passed on.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(TAP|_TAPJS_|NODE_OPTIONS$)/.test(k)));
  env.PATH = `${BIN}:${process.env.PATH ?? ''}`;
  return env;
}

export function runFile(file: string): Promise<{ status: number | null; output: string }> {
  return run(TAP, ['--reporter=tap', '--jobs=1', file]);
}

/** make TARGET, its output also shown as it runs (a tier takes minutes). */
export function runTier(target: string): Promise<{ status: number | null; output: string }> {
  return run('make', ['--no-print-directory', target], true);
}

function run(cmd: string, args: string[], echo = false): Promise<{ status: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: ROOT, env: runEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const take = (d: Buffer) => {
      output += d.toString();
      if (echo) process.stderr.write(d);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, output }));
  });
}

async function main(): Promise<number> {
  const { values, positionals: files } = parseArgs({
    options: {
      n: { type: 'string', default: '3' },
      'no-load': { type: 'boolean', default: false },
      tier: { type: 'string', multiple: true, default: [] },
    },
    allowPositionals: true,
  });
  const n = Number(values.n);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--n: must be a whole number above 0, not ${JSON.stringify(values.n)}`);
  const tiers = values.tier;
  if (files.length === 0 && tiers.length === 0)
    throw new Error('no test files and no tiers (make flake-hunt FILES="test/x.test.ts ..." or TIERS="e2e ..." N=3)');
  const items = [
    ...files.map((f) => ({ name: f, run: () => runFile(f), checks: failingChecks })),
    ...tiers.map((x) => ({ name: `make ${x}`, run: () => runTier(x), checks: failingTierChecks })),
  ];
  const load = values['no-load'] ? undefined : startLoad();
  const stop = () => stopLoad(load);
  process.on('exit', stop);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      stop();
      process.exit(130);
    });
  }
  const failures: Failure[] = [];
  let runs = 0;
  let failedRuns = 0;
  for (let run = 1; run <= n; run++) {
    for (const item of items) {
      runs++;
      const r = await item.run();
      if (r.status === 0) {
        process.stdout.write(`ok    ${item.name} (run ${run}/${n})\n`);
        continue;
      }
      failedRuns++;
      for (const check of item.checks(r.output)) {
        failures.push({ file: item.name, run, check });
        process.stdout.write(`FAIL  ${item.name} (run ${run}/${n}): ${check}\n`);
      }
    }
  }
  // Stopped here, not only on exit: the child would keep the process (and its 'exit') from coming.
  stop();
  process.stdout.write(
    `flake-hunt: ${runs} runs of ${[files.length ? `${files.length} files` : '', tiers.length ? `${tiers.length} tiers` : ''].filter(Boolean).join(' and ')} (N=${n}${load ? ', under stress-ng' : ''}): ${failedRuns} failed runs, ${failures.length} failing checks\n`,
  );
  return failedRuns === 0 ? 0 : 1;
}

if (import.meta.main) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`flake-hunt: ${(err as Error).message}\n`);
      process.exitCode = 2;
    },
  );
}
