// What a person sees when something is wrong: the compiled CLI's messages
// name the flag, the object, or the command that fixes it, and nothing is
// left attached or pinned after a refusal.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ROOT, assertBuilt } from '../../lab/agent-process.ts';
import { Lab } from '../../lab/index.ts';
import { labPinDir } from '../../lab/pins.ts';
import { BPF_CFLAGS, objectHash } from '../../src/bpf/compile.ts';
import { cleanupPins } from '../../src/cli/cleanup.ts';
import { runSvcmap } from './run.ts';

assertBuilt();

const run = runSvcmap;

/** One line on stderr, and no stack frame in it. */
const ONE_LINE = /^svcmap[^\n]*\n$/;
const FRAME = /^ {4}at /m;

const tmp = mkdtempSync(join(tmpdir(), 'svcmap-cli-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
writeFileSync(join(tmp, 'empty.yaml'), '');

t.test('bad flags are named', async (t) => {
  let r = run(['agent', '--manifests', tmp, '--metrics-bind-address', 'abc']);
  t.equal(r.status, 2);
  t.match(r.stderr, /svcmap agent: --metrics-bind-address: "abc": must be ADDRESS:PORT \(\[ADDRESS\]:PORT for IPv6\)/);
  r = run(['agent', '--manifests', tmp, '--healthz-bind-address', '[::]:70000']);
  t.match(r.stderr, /--healthz-bind-address: "\[::\]:70000": the port must be between 0 and 65535/);
  r = run(['agent', '--manifests', tmp, '--healthz-bind-address', '::1:10256']);
  t.match(r.stderr, /--healthz-bind-address: "::1:10256": must be ADDRESS:PORT/, 'an IPv6 address with a port needs brackets');
  r = run(['agent', '--manifests', tmp, '--bind-address', '127.0.0.1']);
  t.match(r.stderr, /svcmap agent: --bind-address was replaced by --metrics-bind-address and --healthz-bind-address/);
  r = run(['agent', '--manifests', tmp, '--metrics-port=0']);
  t.match(r.stderr, /svcmap agent: --metrics-port was replaced by --metrics-bind-address ADDR:PORT/);
  r = run(['agent', '--manifests', tmp, '--log-level', 'loud']);
  t.match(r.stderr, /--log-level: must be one of debug, info, warn, error/);
  r = run(['agent', '--manifests', tmp, '--no-such-flag']);
  t.match(r.stderr, /svcmap agent: unknown flag --no-such-flag \(see svcmap agent --help\)\n$/);
  r = run(['agent', '--manifests', tmp, '--nodeport-addresses', '10.0.0.0/8,192.168.1.0']);
  t.equal(r.status, 2);
  t.match(
    r.stderr,
    /svcmap agent: --nodeport-addresses: "192\.168\.1\.0" is not a CIDR \(e\.g\. 10\.0\.0\.0\/8 or fd00::\/64\) nor "primary"/,
  );
  r = run(['agent', '--manifests', tmp, '--nodeport-addresses', 'primary,10.0.0.0/8']);
  t.match(r.stderr, /--nodeport-addresses: "primary" stands alone: it cannot be combined with CIDRs/);
  r = run(['agent', '--manifests', tmp, '--localhost-nodeports', 'no']);
  t.match(r.stderr, /svcmap agent: --localhost-nodeports: must be true or false/);
  r = run(['agent', '--manifests', tmp, '--bind-protection=off']);
  t.match(r.stderr, /svcmap agent: --bind-protection: must be true or false/);
  r = run(['dump', '-o', 'xml']);
  t.match(r.stderr, /svcmap dump: --output: must be table, wide, json or yaml/);
  r = run(['frobnicate']);
  t.match(r.stderr, /unknown command "frobnicate"; run svcmap help/);
});

t.test('usage errors: one line naming the command, exit 2, for every command', async (t) => {
  const cases: string[][] = [
    ['frobnicate'],
    ['dump', '-o', 'xml'],
    ['dump', '--log-level', 'loud'],
    ['status', 'extra'],
    ['explain'],
    ['explain', '10.96.0.1'],
    ['explain', '10.96.0.1:80/SCTP'],
    ['explain', '10.96.0.1:80', '--from', 'somewhere'],
    ['explain', '10.96.0.1:80', '--from', 'fd00::1'],
    ['explain', '[fd00::a]:80', '--from', '192.0.2.1'],
    ['explain', '[::ffff:10.96.0.1]:80', '--from', '192.0.2.1'],
    ['explain', '10.96.0.1:80', '10.96.0.2:80'],
    ['version', '-o', 'yaml'],
    ['agent', '--no-such-flag'],
  ];
  for (const args of cases) {
    const r = run(args);
    t.equal(r.status, 2, `svcmap ${args.join(' ')}: exit 2`);
    t.match(r.stderr, ONE_LINE, `svcmap ${args.join(' ')}: ${r.stderr.trim()}`);
  }
  t.match(
    run(['explain', '10.96.0.1:80', '--from', 'somewhere']).stderr,
    /^svcmap explain: --from: must be an IPv4 or IPv6 address \(for an IPv4-mapped one, its IPv4 address\)\n$/,
  );
  t.match(
    run(['explain', '10.96.0.1:80', '--from', '::ffff:192.0.2.1']).stderr,
    /--from: must be an IPv4 or IPv6 address/,
    'an IPv4-mapped client is refused',
  );
  t.equal(
    run(['explain', '10.96.0.1:80/UDP', '--from', 'FD00:0::1']).stderr,
    'svcmap explain: --from: fd00::1 is an IPv6 address and 10.96.0.1:80/UDP an IPv4 frontend; tc translates a packet within its family, so the client must be IPv4\n',
  );
  t.equal(
    run(['explain', '[fd00::a]:80', '--from', '192.0.2.1']).stderr,
    'svcmap explain: --from: 192.0.2.1 is an IPv4 address and [fd00::a]:80/TCP an IPv6 frontend; tc translates a packet within its family, so the client must be IPv6\n',
  );
  t.match(
    run(['explain', '[::ffff:10.96.0.1]:80', '--from', '192.0.2.1']).stderr,
    /^svcmap explain: --from: \[::ffff:10\.96\.0\.1\]:80\/TCP is IPv4-mapped, which only the socket hooks translate; for tc ask for the IPv4 VIP\n$/,
  );
  t.match(
    run(['explain', '10.96.0.1:80/SCTP']).stderr,
    /^svcmap explain: VIP:PORT\/PROTO: "10\.96\.0\.1:80\/SCTP" is not a VIP:PORT\/PROTO \(e\.g\. 10\.96\.0\.10:53\/UDP or \[fd00:10:96::a\]:53\/UDP/,
  );
  t.match(
    run(['explain', 'fd00::1:80']).stderr,
    /^svcmap explain: VIP:PORT\/PROTO: "fd00::1:80" is not a VIP:PORT\/PROTO/,
    'an IPv6 VIP needs its brackets',
  );
  t.match(run(['explain']).stderr, /^svcmap explain: missing VIP:PORT\/PROTO \(see svcmap explain --help\)\n$/);
  t.match(run(['dump', '--log-level', 'loud']).stderr, /^svcmap dump: --log-level: must be one of debug, info, warn, error\n$/);
});

t.test('runtime errors: "svcmap: <message>", one line, exit 1; the stack only when asked for', async (t) => {
  const none = '/sys/fs/bpf/svcmap-cli-none';
  for (const args of [['dump'], ['status'], ['explain', '10.96.0.1:80/TCP']]) {
    const what = `svcmap ${args[0]}`;
    const r = run([...args, '--pin-dir', none]);
    t.equal(r.status, 1, `${what}: exit 1`);
    t.match(r.stderr, ONE_LINE, `${what}: one line`);
    t.match(r.stderr, /^svcmap: /, `${what}: prefixed svcmap:`);
    const debug = run([...args, '--pin-dir', none, '--log-level', 'debug']);
    t.equal(debug.status, 1);
    t.equal(debug.stderr.split('\n')[0], r.stderr.trim(), `${what} --log-level debug: the same line first`);
    t.match(debug.stderr, FRAME, `${what} --log-level debug: then the stack`);
    t.match(run([...args, `--log-level=debug`, '--pin-dir', none]).stderr, FRAME, `${what} --log-level=debug`);
    t.match(run([...args, '--pin-dir', none], { env: { SVCMAP_DEBUG: '1' } }).stderr, FRAME, `${what} with SVCMAP_DEBUG=1`);
    t.notMatch(run([...args, '--pin-dir', none, '--log-level', 'info']).stderr, FRAME, `${what} --log-level info: no stack`);
  }
  // The exact sentence of the example.
  const r = run(['dump', '--pin-dir', '/tmp/nothing']);
  t.equal(
    r.stderr,
    'svcmap: no svcmap datapath is pinned at /tmp/nothing (missing /tmp/nothing/svcmap_svc, /tmp/nothing/svcmap_be, /tmp/nothing/svcmap_revnat, /tmp/nothing/svcmap_sk_rnat): is the agent running, with --pin-dir /tmp/nothing?\n',
  );
});

t.test('without privileges: needs root or CAP_BPF and CAP_NET_ADMIN', async (t) => {
  const r = run(
    [
      'agent',
      '--manifests',
      tmp,
      '--pin-dir',
      '/sys/fs/bpf/svcmap-cli-nobody',
      '--metrics-bind-address',
      'off',
      '--healthz-bind-address',
      'off',
    ],
    { asNobody: true },
  );
  t.equal(r.status, 1);
  t.match(r.stderr, /needs root or CAP_BPF and CAP_NET_ADMIN/);
  t.match(r.stderr, ONE_LINE);
  t.notOk(existsSync('/sys/fs/bpf/svcmap-cli-nobody'), 'nothing pinned');
});

t.test('a pin directory that is not on bpffs', async (t) => {
  const r = run([
    'agent',
    '--manifests',
    tmp,
    '--pin-dir',
    join(tmp, 'pins'),
    '--metrics-bind-address',
    'off',
    '--healthz-bind-address',
    'off',
  ]);
  t.equal(r.status, 1);
  t.match(r.stderr, /is not on a bpffs, which pins need: use a directory under \/sys\/fs\/bpf, or mount -t bpf bpf/);
});

t.test('a cgroup that is not cgroup v2', async (t) => {
  const r = run([
    'agent',
    '--manifests',
    tmp,
    '--cgroup',
    tmp,
    '--pin-dir',
    '/sys/fs/bpf/svcmap-cli-cg',
    '--metrics-bind-address',
    'off',
    '--healthz-bind-address',
    'off',
  ]);
  t.equal(r.status, 1);
  t.match(r.stderr, /is not a cgroup v2 directory; cgroup v2 is mounted at /);
  if (existsSync('/sys/fs/bpf/svcmap-cli-cg')) cleanupPins('/sys/fs/bpf/svcmap-cli-cg');
});

t.test('dump and status without a running datapath say so', async (t) => {
  let r = run(['dump', '--pin-dir', '/sys/fs/bpf/svcmap-cli-none']);
  t.match(r.stderr, /no svcmap datapath is pinned at \/sys\/fs\/bpf\/svcmap-cli-none .*is the agent running/);
  r = run(['status', '--pin-dir', '/sys/fs/bpf/svcmap-cli-none']);
  t.match(r.stderr, /nothing is pinned at \/sys\/fs\/bpf\/svcmap-cli-none/);
});

t.test('a BPF object whose layout drifted from the codecs: the agent refuses to start, naming struct and field', async (t) => {
  // A copy of bpf/ with two fields of struct svc_key swapped, compiled with the
  // project's flags, placed where the agent looks for the object of the real sources.
  const src = join(tmp, 'bpf');
  cpSync(join(ROOT, 'bpf'), src, { recursive: true });
  const header = join(src, 'include', 'svcmap_maps.h');
  const text = readFileSync(header, 'utf8');
  // The first port-then-slot pair (struct svc_key's), however its comment is aligned.
  const swapped = text.replace(/\t__be16 port;( +\/\* frontend port \*\/)\n\t__u16 slot;/, '\t__u16 slot;\n\t__be16 port;$1');
  t.not(swapped, text, 'the header was changed');
  writeFileSync(header, swapped);
  const objDir = join(tmp, 'objects');
  execFileSync('mkdir', ['-p', objDir]);
  // The agent's flags but -Werror: the drifted header is the point.
  execFileSync('clang', [
    ...BPF_CFLAGS.filter((f) => f !== '-Werror'),
    '-I',
    join(src, 'include'),
    '-I',
    join(src, 'lib'),
    '-I',
    '/usr/include/x86_64-linux-gnu',
    '-c',
    join(src, 'sock.c'),
    '-o',
    join(objDir, `sock-${objectHash('sock')}.o`),
  ]);
  // A lab cgroup (under the detected cgroup2 mount) and a lab-named pin
  // directory: a sweep finds both if this process is killed.
  const lab = await Lab.create();
  const pinDir = labPinDir(lab.id, 'drift');
  t.teardown(async () => {
    try {
      if (existsSync(pinDir)) cleanupPins(pinDir);
    } finally {
      await lab.destroy();
    }
  });
  const cg = await lab.cgroup('drift');
  const r = run([
    'agent',
    '--manifests',
    tmp,
    '--cgroup',
    cg,
    '--pin-dir',
    pinDir,
    '--bpf-dir',
    objDir,
    '--metrics-bind-address',
    'off',
    '--healthz-bind-address',
    'off',
  ]);
  t.equal(r.status, 1);
  t.match(r.stderr, /the map codecs do not match the BPF object/);
  t.match(r.stderr, /struct svc_key: field port is at offset 6 in BTF, the codec says 4/);
  t.match(r.stderr, /refusing to start/);
  t.equal(execFileSync('bpftool', ['cgroup', 'show', cg], { encoding: 'utf8' }).trim(), '', 'nothing was attached to the cgroup');
});
