// lab/flake-hunt.ts reads tap's own output: each failing check is named with
// the subtests around it, once (not again as its subtest's result), and a
// file that fails without a failing check is still a failure. Run against a
// real tap run of a sample that fails on purpose.
import t from 'tap';
import { type ConformanceSummary, formatSummary } from '../../lab/cluster/conformance.ts';
import { failingChecks, failingTierChecks, runFile } from '../../lab/flake-hunt.ts';

const SAMPLE = 'test/lab/fixtures/flake-hunt-sample.ts';

t.test('a real tap run: each failing check, by its subtests, once', async (t) => {
  const r = await runFile(SAMPLE);
  t.not(r.status, 0, 'the sample fails');
  t.same(
    failingChecks(r.output),
    ['outer > inner > a failing check', 'a top-level check'],
    `the run's output:\n${r.output.slice(0, 4000)}`,
  );
});

t.test('a file that fails with no failing check (a crash, a timeout) is one failure', async (t) => {
  const crashed = 'TAP version 14\n1..1\n# Subtest: test/x.test.ts\n    1..0 # no tests found\nnot ok 1 - test/x.test.ts # time=3.1ms\n';
  t.same(failingChecks(crashed), ['test/x.test.ts: failed with no failing check']);
  t.same(failingChecks('TAP version 14\n# test count(2) != plan(null)\n'), ['no failing check reported (test count(2) != plan(null))']);
});

t.test("a tier's failures: from the conformance runners' own report, or from tap's inside it", async (t) => {
  const summary: ConformanceSummary = {
    proxy: 'svcmap',
    focus: 'x',
    parallel: 2,
    startedAt: '2026-12-02T00:00:00Z',
    durations: { total: 100 },
    counts: { passed: 1, failed: 2, skipped: 0 },
    specs: [
      { name: '[sig-network] Services should serve a basic endpoint', state: 'passed', seconds: 12.5, reason: '' },
      { name: '[sig-network] Services should be rejected', state: 'failed', seconds: 140, reason: 'timed out' },
      { name: '[sig-network] DNS should resolve', state: 'failed', seconds: 3.2, reason: 'no answer' },
    ],
    suiteFailures: [{ name: 'SynchronizedBeforeSuite', state: 'failed', seconds: 0, reason: 'boom' }],
    artifacts: '/tmp/x',
  };
  t.same(failingTierChecks(formatSummary(summary)), [
    '[sig-network] DNS should resolve',
    '[sig-network] Services should be rejected',
    'SynchronizedBeforeSuite: boom',
  ]);
  t.same(failingTierChecks(formatSummary({ ...summary, specs: [], suiteFailures: [], error: 'no cluster\nmore' })), [
    'setup failed: no cluster',
  ]);
  const tap = [
    'TAP version 14',
    '# Subtest: test/cluster/x.test.ts',
    '    # Subtest: a spec',
    '        not ok 1 - a check',
    '        1..1',
    '    not ok 1 - a spec',
    '    1..1',
    'not ok 1 - test/cluster/x.test.ts',
    '1..1',
    '# { total: 1, pass: 0, fail: 1 }',
  ].join('\n');
  t.same(failingTierChecks(tap), ['a spec > a check'], "make e2e's tap report (the file is the outermost subtest)");
  t.same(failingTierChecks('make: *** [e2e] Error 2\n'), ['no failing check reported (the target exited non-zero)']);
});
