// svcmap preflight on this machine, through the compiled CLI: every
// requirement is probed and present here (kernel 6.18 with BTF, root,
// cgroup v2, bpffs), the table has one line per requirement, nothing is
// pinned; a pin directory on no bpffs and a cgroup that is not cgroup v2 are
// each reported missing with exit 1 and a message naming the fix.
import { existsSync } from 'node:fs';
import t from 'tap';
import { assertBuilt } from '../../lab/agent-process.ts';
import { claimPinDir, ensureBpffs } from '../../lab/pins.ts';
import { BPF_PROGRAMS, compileBpf } from '../../src/bpf/compile.ts';
import { BpfObject } from '../../src/bpf/object.ts';
import { REQUIREMENTS, type Row } from '../../src/cli/preflight.ts';
import { tracingRefusal } from '../fixtures/tracing.ts';
import { runSvcmapAsync } from './run.ts';

assertBuilt();
ensureBpffs();

const claim = claimPinDir('preflight');
t.teardown(() => claim.release());
// Not made: preflight pins nothing, so it must not appear.
const pinDir = `${claim.dir}/pins`;

// Each run loads every program once: all four at once.
const [json, tableRun, noBpffs, notCgroup2, nobody] = await Promise.all([
  runSvcmapAsync(['preflight', '-o', 'json', '--pin-dir', pinDir]),
  runSvcmapAsync(['preflight', '--pin-dir', pinDir]),
  runSvcmapAsync(['preflight', '-o', 'json', '--pin-dir', '/nonexistent/svcmap']),
  runSvcmapAsync(['preflight', '-o', 'json', '--pin-dir', pinDir, '--cgroup', '/tmp']),
  runSvcmapAsync(['preflight', '-o', 'json', '--pin-dir', pinDir], { asNobody: true }),
]);

/** The requirements that are tracing programs (iterators). */
const TRACING_PROGRAMS = new Set(['program:term_udp', 'program:term_tcp', 'program:sk_recount', 'program:sk_recount6']);
/** Whether the kernel refuses tracing programs right now, as this test finds by loading one itself: then, and only then, those may be missing. */
const refusal = tracingRefusal();
const mayMiss = (id: string) => refusal !== undefined && TRACING_PROGRAMS.has(id);

const rowsOf = (stdout: string): Row[] => (JSON.parse(stdout) as { requirements: Row[] }).requirements;

t.test('-o json: every requirement is probed and present on this machine', async (t) => {
  t.equal(json.status, 0, `exit 0 (stderr: ${json.stderr.trim()})`);
  t.equal(json.stderr, '');
  const out = JSON.parse(json.stdout) as { canRun: boolean; requirements: Row[] };
  t.equal(out.canRun, true);
  t.same(
    out.requirements.map((r) => r.id),
    REQUIREMENTS.map((r) => r.id),
    'one entry per requirement, in order',
  );
  for (const r of out.requirements) {
    if (r.level === 'info') t.equal(r.status, 'info', `${r.requirement}: ${r.detail}`);
    else if (r.status === 'missing' && mayMiss(r.id))
      t.pass(`${r.requirement}: missing, as the kernel refuses tracing programs now (${refusal})`);
    else t.equal(r.status, 'ok', `${r.requirement}: ${r.detail}`);
    t.ok(r.usedBy && r.without && r.since, `${r.requirement}: says what uses it, what happens without it, since when`);
  }
  t.match(out.requirements.find((r) => r.id === 'kernel')!.detail, /^Linux \d+\.\d+/);
  t.notOk(existsSync(pinDir), 'nothing was pinned');
});

t.test('the table: a header and one line per requirement', async (t) => {
  t.equal(tableRun.status, 0);
  const lines = tableRun.stdout.trimEnd().split('\n');
  t.match(lines[0], /^ {2}STATUS +REQUIREMENT +LEVEL +SINCE +USED BY +DETAIL$/);
  t.equal(lines.length, REQUIREMENTS.length + 1);
  REQUIREMENTS.forEach((r, i) =>
    t.match(
      lines[i + 1],
      new RegExp(`^ {2}(ok|info${mayMiss(r.id) ? '|warn' : ''}) +${r.what.replace(/[()/.]/g, '\\$&')} +${r.level} `),
      r.id,
    ),
  );
});

t.test('a pin directory on no bpffs: missing, exit 1, the fix named', async (t) => {
  t.equal(noBpffs.status, 1);
  const bpffs = rowsOf(noBpffs.stdout).find((r) => r.id === 'bpffs')!;
  t.equal(bpffs.status, 'missing');
  t.match(bpffs.detail, /--pin-dir \/nonexistent\/svcmap is not on a bpffs/);
  t.match(noBpffs.stderr, /^svcmap preflight: this node cannot run svcmap: bpffs at --pin-dir is missing \(.*mount -t bpf bpf/);
  t.equal(rowsOf(noBpffs.stdout).filter((r) => r.status === 'missing' && !mayMiss(r.id)).length, 1, 'nothing else missing');
});

t.test('a cgroup that is not cgroup v2: missing, exit 1, the fix named', async (t) => {
  t.equal(notCgroup2.status, 1);
  const cg = rowsOf(notCgroup2.stdout).find((r) => r.id === 'cgroup2')!;
  t.equal(cg.status, 'missing');
  t.match(
    notCgroup2.stderr,
    /cgroup v2 at --cgroup is missing \(\/tmp is not a cgroup v2 directory; cgroup v2 is mounted at \/\S+; fix: .*pass --cgroup a cgroup v2 directory/,
  );
});

t.test('without capabilities (nobody): the capabilities, every program and every helper missing, exit 1', async (t) => {
  t.equal(nobody.status, 1);
  const rows = rowsOf(nobody.stdout);
  const missing = new Set(rows.filter((r) => r.status === 'missing').map((r) => r.id));
  for (const r of REQUIREMENTS) {
    if (r.id.startsWith('cap:') || r.probe.kind === 'program' || r.probe.kind === 'helper') t.ok(missing.has(r.id), `${r.id} missing`);
  }
  // libbpf's helper probe takes an EPERM for "supported": not here.
  t.match(
    rows.find((r) => r.id === 'helper:bpf_set_retval:cgroup_sock_addr')!.detail,
    /^not probed: not even a minimal cgroup_sock_addr program loads here/,
  );
  t.match(rows.find((r) => r.id === 'program:connect4')!.detail, /^EPERM/);
  t.match(
    nobody.stderr,
    /^svcmap preflight: this node cannot run svcmap: CAP_BPF \(or CAP_SYS_ADMIN\) is missing \(.*fix: run as root, or add the capability BPF/,
  );
});

t.test('every program of every compiled object has its requirement', async (t) => {
  const probed = new Set(REQUIREMENTS.flatMap((r) => (r.probe.kind === 'program' ? [`${r.probe.object}:${r.probe.program}`] : [])));
  for (const program of BPF_PROGRAMS) {
    const o = BpfObject.open(compileBpf({ program }).path);
    try {
      for (const p of o.programs()) t.ok(probed.has(`${program}:${p.name}`), `${program}:${p.name} (${p.section})`);
    } finally {
      o.close();
    }
  }
});
