// svcmap version: the compiled CLI names its version, commit, Node, libbpf,
// the kernel release and whether the kernel has BTF, as text and as JSON,
// and still answers (exit 0) when the build information or libbpf is
// missing, as it may be in an image or on a bare machine.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ROOT, SVCMAP, assertBuilt } from '../../lab/agent-process.ts';
import { renderVersion } from '../../src/cli/version.ts';
import { runSvcmap } from './run.ts';

assertBuilt();

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
const info = JSON.parse(readFileSync(join(ROOT, 'dist', 'build-info.json'), 'utf8')) as { commit: string | null; built: string };

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 60_000, env: { ...process.env, ...env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const LINES = new RegExp(
  [
    '^svcmap {2}(\\S+) \\(commit (\\S+?)(?:, built (\\S+))?\\)',
    'node {4}(v\\d+\\.\\d+\\.\\d+)',
    'libbpf {2}(\\d+\\.\\d+|unavailable)',
    'kernel {2}(\\S+), (BTF at /sys/kernel/btf/vmlinux|no BTF \\(/sys/kernel/btf/vmlinux is missing\\))\\n$',
  ].join('\n'),
);

t.test('version, commit, build time, node, libbpf, kernel and its BTF, one per line', async (t) => {
  const r = run(SVCMAP, ['version']);
  t.equal(r.status, 0, r.stderr);
  const m = LINES.exec(r.stdout);
  t.ok(m, `matches the format: ${r.stdout}`);
  t.equal(m?.[1], pkg.version, 'version from package.json');
  t.equal(m?.[2], info.commit ?? 'unknown', 'commit from dist/build-info.json');
  t.equal(m?.[3], info.built);
  t.equal(m?.[4], process.version, 'the Node it runs on (bin/svcmap and tap use the pinned one)');
  t.match(m?.[5], /^\d+\.\d+$/, 'libbpf loads on this machine (make deps installs libbpf1)');
  t.equal(m?.[6], release(), 'the kernel release, as uname -r');
  t.equal(m?.[7], existsSync('/sys/kernel/btf/vmlinux') ? 'BTF at /sys/kernel/btf/vmlinux' : 'no BTF (/sys/kernel/btf/vmlinux is missing)');
  t.equal(execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim(), m?.[6]);
  t.equal(run(SVCMAP, ['--version']).stdout, r.stdout, '--version is the same command');
});

t.test('-o json: the same fields', async (t) => {
  const text = LINES.exec(run(SVCMAP, ['version']).stdout)!;
  const r = run(SVCMAP, ['version', '-o', 'json']);
  t.equal(r.status, 0, r.stderr);
  const v = JSON.parse(r.stdout);
  t.same(v, {
    version: text[1],
    commit: text[2],
    built: text[3],
    node: text[4],
    libbpf: text[5],
    kernel: text[6],
    kernelBtf: text[7] === 'BTF at /sys/kernel/btf/vmlinux',
  });
  t.equal(v.kernelBtf, true, "this machine's kernel has BTF (DESIGN.md: kernel 6.18 with BTF)");
});

t.test('a kernel without BTF is named as such', async (t) => {
  const v = { version: '1.2.3', commit: 'abc1234', built: '2026-12-01T04:00:00Z', node: 'v24.1.0', libbpf: null, kernel: '5.4.0-old' };
  t.equal(
    renderVersion({ ...v, kernelBtf: false }),
    [
      'svcmap  1.2.3 (commit abc1234, built 2026-12-01T04:00:00Z)',
      'node    v24.1.0',
      'libbpf  unavailable',
      'kernel  5.4.0-old, no BTF (/sys/kernel/btf/vmlinux is missing)',
      '',
    ].join('\n'),
  );
  t.match(renderVersion({ ...v, kernelBtf: true }), /^kernel {2}5\.4\.0-old, BTF at \/sys\/kernel\/btf\/vmlinux\n$/m);
});

t.test('the build wrote the commit git names', async (t) => {
  const head = execFileSync('git', ['rev-parse', '--short=7', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  t.match(info.commit, new RegExp(`^${head}(-dirty)?$`), 'or make build has not run since the last commit');
  t.match(info.built, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  const tmp = mkdtempSync(join(tmpdir(), 'svcmap-buildinfo-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  const out = join(tmp, 'info.json');
  // The Node `make dist` runs it with (tap itself may run on another).
  execFileSync(join(ROOT, 'node_modules', '.bin', 'node'), [join(ROOT, 'src', 'cli', 'build-info.ts'), out], {
    cwd: ROOT,
    env: { ...process.env, SOURCE_DATE_EPOCH: '1796097600' },
  });
  const fresh = JSON.parse(readFileSync(out, 'utf8'));
  t.match(fresh.commit, new RegExp(`^${head}(-dirty)?$`));
  t.equal(fresh.built, '2026-12-01T04:00:00Z', 'SOURCE_DATE_EPOCH fixes the build time');
});

t.test('no build information (a build without git, or the file lost): commit unknown, exit 0', async (t) => {
  // A copy of the package without dist/build-info.json; node_modules and the
  // shim are the repository's.
  const tmp = mkdtempSync(join(tmpdir(), 'svcmap-version-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  cpSync(join(ROOT, 'dist'), join(tmp, 'dist'), { recursive: true, filter: (src) => !src.endsWith('build-info.json') });
  cpSync(join(ROOT, 'package.json'), join(tmp, 'package.json'));
  cpSync(join(ROOT, 'bin'), join(tmp, 'bin'), { recursive: true });
  mkdirSync(join(tmp, 'bpf'));
  symlinkSync(join(ROOT, 'node_modules'), join(tmp, 'node_modules'));
  const r = run(join(tmp, 'bin', 'svcmap'), ['version'], { SVCMAP_SHIM: join(ROOT, 'native', 'build', 'libsvcmap_shim.so') });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /^svcmap {2}\S+ \(commit unknown\)\nnode {4}v\d+/);
  const j = JSON.parse(run(join(tmp, 'bin', 'svcmap'), ['version', '-o', 'json']).stdout);
  t.equal(j.commit, null);
  t.equal(j.built, null);
});

t.test('libbpf or the shim cannot be loaded: "libbpf unavailable", exit 0', async (t) => {
  const r = run(SVCMAP, ['version'], { SVCMAP_SHIM: '/nonexistent/libsvcmap_shim.so' });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /^libbpf {2}unavailable$/m);
  t.equal(JSON.parse(run(SVCMAP, ['version', '-o', 'json'], { SVCMAP_SHIM: '/nonexistent/libsvcmap_shim.so' }).stdout).libbpf, null);
});

t.test('without privileges', async (t) => {
  const r = runSvcmap(['version'], { asNobody: true });
  t.equal(r.status, 0, r.stderr);
  t.equal(r.stderr, '');
  t.match(r.stdout, LINES);
  t.notMatch(r.stdout, /unavailable/, 'loading libbpf needs no BPF privileges');
});

t.test('flags and help', async (t) => {
  const r = run(SVCMAP, ['version', '-o', 'yaml']);
  t.equal(r.status, 2);
  t.match(r.stderr, /svcmap version: --output: must be table or json/);
  t.match(run(SVCMAP, ['version', 'extra']).stderr, /svcmap version: unexpected argument "extra"/);
  t.match(run(SVCMAP, ['help']).stdout, /^ +version +\S/m, 'svcmap help lists it');
  t.match(run(SVCMAP, ['version', '--help']).stdout, /^ {2}-o, --output FORMAT +how to print it \(table or json; default table\)$/m);
});
