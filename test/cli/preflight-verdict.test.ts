// svcmap preflight's judgement, on made-up probe outcomes: required items
// decide the exit code, optional ones are warnings with the feature they
// turn off, info is never judged; the helper ids match the kernel's header.
import { existsSync, readFileSync } from 'node:fs';
import t from 'tap';
import type { ProbeOutcome } from '../../src/bpf/probe.ts';
import { REQUIREMENTS, cannotRunMessage, preflightTable, verdict } from '../../src/cli/preflight.ts';

const all = (ok: boolean, except: Record<string, ProbeOutcome> = {}) =>
  new Map(REQUIREMENTS.map((r) => [r.id, except[r.id] ?? { ok, detail: ok ? 'found' : 'not found' }]));

t.test('everything present: exit 0, no warnings', async (t) => {
  const v = verdict(REQUIREMENTS, all(true));
  t.equal(v.exitCode, 0);
  t.equal(v.canRun, true);
  t.same(v.warnings, []);
  t.ok(v.rows.every((r) => (r.level === 'info' ? r.status === 'info' : r.status === 'ok') && r.fix === undefined));
});

t.test('an optional item missing: a warning naming the feature it turns off, still exit 0', async (t) => {
  const v = verdict(
    REQUIREMENTS,
    all(true, { 'kfunc:bpf_sock_destroy': { ok: false, detail: "the kernel's BTF has no function bpf_sock_destroy" } }),
  );
  t.equal(v.exitCode, 0);
  t.same(
    v.warnings.map((r) => r.id),
    ['kfunc:bpf_sock_destroy'],
  );
  t.match(v.warnings[0]!.without, /socket termination is off/);
  t.match(
    preflightTable(v),
    /^ {2}warn +kfunc bpf_sock_destroy +optional +6\.5 .*has no function bpf_sock_destroy; without it: socket termination is off.*; fix: /m,
  );
});

t.test('a required item missing: exit 1, the message names it and its fix', async (t) => {
  const v = verdict(
    REQUIREMENTS,
    all(true, {
      'helper:bpf_set_retval:cgroup_sock_addr': {
        ok: false,
        detail: 'the kernel does not offer bpf_set_retval to cgroup_sock_addr programs',
      },
    }),
  );
  t.equal(v.exitCode, 1);
  t.equal(v.canRun, false);
  t.same(
    v.missingRequired.map((r) => r.id),
    ['helper:bpf_set_retval:cgroup_sock_addr'],
  );
  t.match(
    cannotRunMessage(v),
    /^svcmap preflight: this node cannot run svcmap: helper bpf_set_retval in cgroup_sock_addr is missing \(the kernel does not offer .*; fix: a kernel that has it/,
  );
  t.match(preflightTable(v), /^ {2}MISSING +helper bpf_set_retval in cgroup_sock_addr +required +5\.18 /m);
});

t.test('nothing present (e.g. not root): every required item missing, info still info', async (t) => {
  const v = verdict(REQUIREMENTS, all(false));
  t.equal(v.exitCode, 1);
  t.equal(v.missingRequired.length, REQUIREMENTS.filter((r) => r.level === 'required').length);
  t.equal(v.rows.find((r) => r.id === 'kernel')!.status, 'info');
});

t.test('a requirement without an outcome is missing, not ok', async (t) => {
  const outcomes = all(true);
  outcomes.delete('cgroup2');
  const v = verdict(REQUIREMENTS, outcomes);
  t.equal(v.exitCode, 1);
  t.equal(v.rows.find((r) => r.id === 'cgroup2')!.detail, 'not probed');
});

t.test('requirement ids are unique; each has a level, a since, a use and a consequence', async (t) => {
  t.equal(new Set(REQUIREMENTS.map((r) => r.id)).size, REQUIREMENTS.length);
  for (const r of REQUIREMENTS) t.ok(r.since && r.usedBy && r.without && r.fix, r.id);
});

const header = '/usr/include/linux/bpf.h';
t.test('helper ids are those of enum bpf_func_id', { skip: existsSync(header) ? false : `no ${header}` }, async (t) => {
  const text = readFileSync(header, 'utf8');
  const mapper = /#define __BPF_FUNC_MAPPER\(FN\)([\s\S]*?)\n\n/.exec(text)?.[1] ?? '';
  const ids = [...mapper.matchAll(/FN\((\w+)/g)].map((m) => m[1]!);
  for (const r of REQUIREMENTS) {
    if (r.probe.kind !== 'helper') continue;
    t.equal(ids.indexOf(r.probe.name.replace(/^bpf_/, '')), r.probe.helper, `${r.probe.name} is ${r.probe.helper}`);
  }
});

t.test('docs/compatibility.md has one row per requirement, as the list says it', async (t) => {
  const doc = readFileSync(new URL('../../docs/compatibility.md', import.meta.url), 'utf8');
  const rows = doc.split('\n').filter((l) => /^\| .* \| (required|optional) \|/.test(l));
  const esc = (s: string) => s.replace(/\|/g, '\\|');
  t.same(
    rows,
    REQUIREMENTS.filter((r) => r.level !== 'info').map(
      (r) => `| ${esc(r.what)} | ${r.level} | ${r.since} | ${esc(r.usedBy)} | ${esc(r.without)} |`,
    ),
  );
});
