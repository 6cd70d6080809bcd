// svcmap mount-host-fs, as the chart's init container runs it, with real
// mounts: the "host" is a process in a private mount namespace of its own
// (unshare), whose /sys/fs/bpf is covered by a tmpfs, so it has no bpffs
// there; --host-proc is a directory whose "1" is that process's /proc entry.
// The command itself runs in another private mount namespace, so a mount
// that went to the wrong namespace would show up in neither the host's nor
// this machine's mount table. Killing the holder drops its namespace and
// every mount in it.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { assertBuilt, SVCMAP } from '../../lab/agent-process.ts';
import { AS_NOBODY } from './run.ts';

assertBuilt();

const tmp = mkdtempSync(join(tmpdir(), 'svcmap-mount-host-fs-'));
const holders: ChildProcess[] = [];

t.teardown(async () => {
  for (const h of holders) {
    if (h.exitCode === null && h.signalCode === null) {
      const gone = new Promise((r) => h.once('exit', r));
      h.kill('SIGKILL');
      await gone;
    }
  }
  rmSync(tmp, { recursive: true, force: true });
});

interface Host {
  proc: string;
  mountinfo(): string;
  /** The mounts at path in the host's table, as "FSTYPE ROOT". */
  at(path: string): string[];
}

const mountsAt = (mountinfo: string, path: string) =>
  mountinfo
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f[4] === path)
    .map((f) => `${f[f.indexOf('-', 6) + 1]} ${f[3]}`);

let hosts = 0;

/** A "host": a process in a private mount namespace without bpffs at /sys/fs/bpf (and with a tmpfs at each of tmpfsAt). */
async function host(tmpfsAt: string[] = []): Promise<Host> {
  const script = ['mount -t tmpfs svcmap-test /sys/fs/bpf', ...tmpfsAt.map((d) => `mkdir -p ${d} && mount -t tmpfs svcmap-test ${d}`)];
  const h = spawn(
    'unshare',
    ['--mount', '--propagation', 'private', '--', 'sh', '-c', `${script.join(' && ')} && echo ready && exec sleep infinity`],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  holders.push(h);
  await new Promise<void>((resolve, reject) => {
    h.stdout!.setEncoding('utf8').on('data', (d: string) => d.includes('ready') && resolve());
    h.once('exit', (code) => reject(new Error(`the host namespace's shell exited (${code})`)));
  });
  const proc = join(tmp, `hostproc-${++hosts}`);
  mkdirSync(proc);
  symlinkSync(`/proc/${h.pid}`, join(proc, '1'));
  const mountinfo = () => readFileSync(`/proc/${h.pid}/mountinfo`, 'utf8');
  return { proc, mountinfo, at: (path) => mountsAt(mountinfo(), path) };
}

/** svcmap mount-host-fs in a private mount namespace of its own. */
function run(args: string[], opts: { asNobody?: boolean } = {}) {
  const { NODE_OPTIONS: _, SVCMAP_DEBUG: __, ...env } = process.env;
  // env -u: tap's hook puts NODE_OPTIONS back into every spawn's environment.
  const argv = [
    '--mount',
    '--propagation',
    'private',
    '--',
    'env',
    '-u',
    'NODE_OPTIONS',
    ...(opts.asNobody ? ['setpriv', ...AS_NOBODY] : []),
    SVCMAP,
    'mount-host-fs',
    ...args,
  ];
  const r = spawnSync('unshare', argv, { encoding: 'utf8', env });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const own = (path: string) => mountsAt(readFileSync('/proc/self/mountinfo', 'utf8'), path);

t.test('mounts bpffs and cgroup v2 (creating its directory) in the host namespace only; a second run finds both', async (t) => {
  const h = await host();
  const cg = join(tmp, 'a', 'cgroupv2');
  const ownBpf = own('/sys/fs/bpf');
  t.same(h.at('/sys/fs/bpf').at(-1), 'tmpfs /', 'the host starts with a tmpfs, not bpffs, on top at /sys/fs/bpf');

  const r = run(['--host-proc', h.proc, '--cgroup-root', cg]);
  t.equal(r.status, 0, r.stderr);
  t.equal(
    r.stdout,
    `svcmap mount-host-fs: mounted bpffs at /sys/fs/bpf on the host (found: tmpfs)\nsvcmap mount-host-fs: mounted cgroup v2 at ${cg} on the host\n`,
  );
  t.same(h.at('/sys/fs/bpf').at(-1), 'bpf /', 'bpffs on top at /sys/fs/bpf in the host namespace');
  t.same(h.at(cg), ['cgroup2 /'], "cgroup v2 at --cgroup-root, the hierarchy's root");
  t.ok(existsSync(cg), '--cgroup-root created');
  t.same(own('/sys/fs/bpf'), ownBpf, "nothing new at /sys/fs/bpf in this machine's namespace");
  t.same(own(cg), [], 'nor at --cgroup-root');

  const before = h.at('/sys/fs/bpf');
  const again = run(['--host-proc', h.proc, '--cgroup-root', cg]);
  t.equal(again.status, 0, again.stderr);
  t.equal(
    again.stdout,
    `svcmap mount-host-fs: bpffs is mounted at /sys/fs/bpf on the host\nsvcmap mount-host-fs: cgroup v2 is mounted at ${cg} on the host\n`,
  );
  t.same(h.at('/sys/fs/bpf'), before, 'no second bpffs');
  t.same(h.at(cg), ['cgroup2 /'], 'no second cgroup v2');
});

t.test('--no-mount-bpffs / --no-mount-cgroup: exit 1 naming the path and the fix, nothing mounted', async (t) => {
  const h = await host();
  const cg = join(tmp, 'b', 'cgroupv2');
  const r = run(['--host-proc', h.proc, '--cgroup-root', cg, '--no-mount-bpffs']);
  t.equal(r.status, 1);
  t.equal(r.stdout, '');
  t.match(r.stderr, /^svcmap mount-host-fs: the host has no bpffs at \/sys\/fs\/bpf \(found: tmpfs\).*bpf\.autoMount=true\n$/);
  t.same(h.at('/sys/fs/bpf').at(-1), 'tmpfs /', 'bpffs not mounted');

  const c = run(['--host-proc', h.proc, '--cgroup-root', cg, '--no-mount-cgroup']);
  t.equal(c.status, 1);
  t.match(c.stdout, /^svcmap mount-host-fs: mounted bpffs at \/sys\/fs\/bpf/);
  t.match(
    c.stderr,
    new RegExp(`^svcmap mount-host-fs: the host has no cgroup v2 mount at ${cg} .*cgroup\\.hostRoot.*cgroup\\.autoMount=true\\n$`),
  );
  t.same(h.at(cg), [], 'cgroup v2 not mounted');
});

t.test('--cgroup-root holding another file system: exit 1, names it and cgroup.hostRoot', async (t) => {
  const cg = join(tmp, 'c', 'cgroupv2');
  const h = await host([cg]);
  const r = run(['--host-proc', h.proc, '--cgroup-root', cg]);
  t.equal(r.status, 1);
  t.match(r.stderr, new RegExp(`^svcmap mount-host-fs: ${cg} on the host holds a tmpfs mount, not cgroup v2; set cgroup\\.hostRoot`));
  t.same(h.at(cg), ['tmpfs /'], 'left as it was');
});

t.test("without the host's /proc: exit 1 naming the mountinfo path and the fix", async (t) => {
  const r = run(['--host-proc', join(tmp, 'nowhere')]);
  t.equal(r.status, 1);
  t.match(
    r.stderr,
    new RegExp(`^svcmap mount-host-fs: cannot read ${tmp}/nowhere/1/mountinfo \\(ENOENT\\): mount the host's /proc at .*--host-proc\\n$`),
  );
});

t.test('without root and capabilities: exit 1 naming the capabilities', async (t) => {
  const h = await host();
  const r = run(['--host-proc', h.proc, '--cgroup-root', join(tmp, 'd')], { asNobody: true });
  t.equal(r.status, 1);
  // The host's mountinfo is the first thing it cannot open (a root process's: ptrace access).
  t.match(
    r.stderr,
    /^svcmap mount-host-fs: cannot read .*\/1\/mountinfo \(EACCES\): run it as root with SYS_ADMIN, SYS_CHROOT and SYS_PTRACE .*\n$/,
  );
  t.same(h.at('/sys/fs/bpf').at(-1), 'tmpfs /', 'nothing mounted');
});

t.test('a relative path: usage error, exit 2', async (t) => {
  const r = run(['--cgroup-root', 'relative/dir']);
  t.equal(r.status, 2);
  t.match(r.stderr, /^svcmap mount-host-fs: --cgroup-root: must be an absolute path\n$/);
});
