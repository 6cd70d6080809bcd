// shellcheck on every shell script in the repository, found at test time:
// *.sh / *.bash files and any file whose first line is a sh/bash/dash/ksh
// shebang (.ci/run, bin/svcmap, ...). shellcheck comes from Debian's
// package (installed by `make chart-deps`); a missing shellcheck fails.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { closeSync, openSync, readSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SHELLCHECK = process.env.SHELLCHECK ?? 'shellcheck';
// Not the project's own scripts: dependencies, installed tools, VCS data,
// tap's output, build output.
const SKIP_DIRS = new Set(['node_modules', '.tools', '.git', '.tap', 'dist', 'build', 'coverage', '.scratch']);
const SHEBANG = /^#!\s*(?:\/usr)?\/bin\/(?:env\s+(?:-\S+\s+)*)?(?:ba|da|k)?sh(?:\s|$)/;

function firstLine(path: string): string {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(128);
    const n = readSync(fd, buf, 0, buf.length, 0);
    return buf.subarray(0, n).toString('latin1').split('\n')[0] ?? '';
  } finally {
    closeSync(fd);
  }
}

function findShellScripts(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) {
        if (!SKIP_DIRS.has(e.name)) walk(p);
      } else if (e.isFile()) {
        if (/\.(sh|bash)$/.test(e.name) || SHEBANG.test(firstLine(p))) out.push(relative(root, p));
      }
    }
  };
  walk(root);
  return out.sort();
}

t.test('the shebang pattern', async (t) => {
  for (const yes of ['#!/bin/sh', '#!/bin/bash', '#!/usr/bin/env bash', '#!/usr/bin/env -S bash -e', '#! /bin/sh -e', '#!/bin/dash']) {
    t.match(yes, SHEBANG, yes);
  }
  for (const no of ['#!/usr/bin/env node', '#!/usr/bin/env python3', '#!/bin/shell', '// #!/bin/sh', '#!/usr/bin/zsh']) {
    t.notMatch(no, SHEBANG, no);
  }
});

t.test('shellcheck is installed (make chart-deps)', async (t) => {
  const r = spawnSync(SHELLCHECK, ['--version'], { encoding: 'utf8' });
  t.equal(r.error, undefined, `${SHELLCHECK} not runnable: install it with \`make chart-deps\` (Debian package shellcheck)`);
  t.equal(r.status, 0);
});

t.test('shellcheck passes on every shell script', async (t) => {
  const scripts = findShellScripts(ROOT);
  t.ok(scripts.includes('test/e2e/kind/run.sh'), `found the e2e script among: ${scripts.join(', ')}`);
  t.ok(scripts.includes('bin/svcmap'), 'found the scripts with a #! line and no .sh');
  for (const s of scripts) {
    // From the repository root; --external-sources follows sourced files.
    const r = spawnSync(SHELLCHECK, ['--external-sources', '--format=gcc', s], { cwd: ROOT, encoding: 'utf8' });
    t.equal(r.error, undefined, `${s}: shellcheck ran`);
    t.equal(r.status, 0, `${s}\n${r.stdout}${r.stderr}`);
  }
});
