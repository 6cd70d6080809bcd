// .ci/run's summary, run over a stand-in `make` (first on PATH) that prints
// what each tier's runner prints: CI shows only the output's tail, so the
// failing checks must be named there, above the "N passed, N failed" line.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

type Tiers = Record<string, { out: string; rc: number }>;

// Per target: the output and the exit code of the stand-in make.
const FAILING: Tiers = {
  test: { out: 'ok 1 - test/a.test.ts\n# { total: 3, pass: 3 }\n', rc: 0 },
  e2e: {
    out: [
      '# Subtest: test/cluster/x.test.ts',
      '    not ok 1 - node1: 40 connections answered',
      'not ok 1 - test/cluster/x.test.ts',
      '# { total: 5, pass: 4, fail: 1 }',
      '',
    ].join('\n'),
    rc: 1,
  },
  conformance: { out: '  PASS 1.0 s  [sig-network] a\n17 passed, 0 failed, 0 skipped\n', rc: 0 },
  'e2e-network': { out: '  FAIL 2.0 s  [sig-network] Services b\n136 passed, 1 failed, 107 skipped\n', rc: 1 },
};

const GREEN: Tiers = {
  ...FAILING,
  e2e: { out: '# { total: 2, pass: 2 }\n', rc: 0 },
  'e2e-network': { out: '137 passed, 0 failed, 107 skipped\n', rc: 0 },
};

/** .ci/run in dir, over a stand-in make answering each target as tiers say. */
function ciRun(dir: string, tiers: Tiers) {
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  const cases = Object.entries(tiers)
    .map(([target, { out, rc }]) => `${target}) printf '%s' '${out.replaceAll("'", "'\\''")}'; exit ${rc} ;;`)
    .join('\n  ');
  writeFileSync(join(bin, 'make'), `#!/bin/sh\ncase "$1" in\n  ${cases}\nesac\nexit 2\n`);
  chmodSync(join(bin, 'make'), 0o755);
  mkdirSync(join(dir, '.ci'));
  copyFileSync(join(ROOT, '.ci', 'run'), join(dir, '.ci', 'run'));
  return spawnSync('bash', [join(dir, '.ci', 'run')], {
    encoding: 'utf8',
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
  });
}

t.test('the tail names what failed, then sums the tiers', async (t) => {
  const r = ciRun(t.testdir({}), FAILING);
  t.equal(r.status, 1, 'exit 1 when a tier failed');
  const lines = r.stdout.trimEnd().split('\n');
  t.equal(lines.at(-1), '160 passed, 2 failed, 107 skipped', 'the last line sums the tiers');
  const tail = lines.slice(lines.lastIndexOf('failed:'));
  t.same(
    tail.slice(0, -1),
    [
      'failed:',
      'make e2e:',
      '  not ok 1 - node1: 40 connections answered',
      '  not ok 1 - test/cluster/x.test.ts',
      '  (exit 1)',
      'make e2e-network:',
      '  FAIL 2.0 s  [sig-network] Services b',
      '  (exit 1)',
    ],
    'each failed tier, its failing checks by name, its exit code',
  );
});

t.test('a green run prints no failure section', async (t) => {
  const r = ciRun(t.testdir({}), GREEN);
  t.equal(r.status, 0);
  t.notMatch(r.stdout, /^failed:$/m, 'no "failed:" section');
  t.equal(r.stdout.trimEnd().split('\n').at(-1), '159 passed, 0 failed, 107 skipped');
});
