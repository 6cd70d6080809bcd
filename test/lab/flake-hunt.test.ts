// lab/flake-hunt.ts reads tap's own output: each failing check is named with
// the subtests around it, once (not again as its subtest's result), and a
// file that fails without a failing check is still a failure. Run against a
// real tap run of a sample that fails on purpose.
import t from 'tap';
import { failingChecks, runFile } from '../../lab/flake-hunt.ts';

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
