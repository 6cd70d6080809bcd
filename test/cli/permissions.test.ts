// A user who may not read the pins is told so, not that nothing is pinned.
// Real pins on the real bpffs (a claimed lab directory, removed in
// teardown), read by the compiled CLI as root and as nobody (uid 65534, no
// groups, no capabilities).
import { chmodSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import t from 'tap';
import { assertBuilt } from '../../lab/agent-process.ts';
import { PINNED_SPECS, pinOneService } from './one-service-pins.ts';
import { runSvcmap } from './run.ts';

assertBuilt();

// outer/ stands for a bpffs mount point, pins/ for the agent's --pin-dir.
const pinDir = pinOneService(t, 'perm', (outer) => {
  const dir = join(outer, 'pins');
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  chmodSync(outer, 0o755);
  return dir;
});
const outer = dirname(pinDir);

const COMMANDS = [['dump'], ['status'], ['explain', '10.96.7.1:80/TCP']];
const needs = (dir: string) =>
  new RegExp(`^svcmap: [^\\n]*: EACCES: needs root \\(or CAP_BPF and read access to ${dir.replace(/[.]/g, '\\.')}\\)\\n$`);

t.test('root reads the pins', async (t) => {
  t.match(runSvcmap(['dump', '--pin-dir', pinDir]).stdout, /^10\.96\.7\.1:80\/TCP\s+ClusterIP\s+random\s+1\s+10\.244\.7\.1:8080$/m);
  t.match(runSvcmap(['status', '--pin-dir', pinDir]).stdout, /svcmap_svc\s+hash\s+2\/16/);
  t.match(runSvcmap(['explain', '10.96.7.1:80', '--pin-dir', pinDir]).stdout, /^Verdict: {4}random among 1$/m);
});

t.test("pins this user may not open (mode 0600): the bpf syscall's EACCES", async (t) => {
  for (const args of COMMANDS) {
    const r = runSvcmap([...args, '--pin-dir', pinDir], { asNobody: true });
    t.equal(r.status, 1, `${args[0]}: exit 1`);
    t.match(r.stderr, needs(pinDir), `${args[0]}: ${r.stderr.trim()}`);
    t.match(r.stderr, /open pinned map .*\/svcmap_svc/, 'names the pin');
  }
});

t.test('a pin directory this user may not search (mode 0700): not "nothing is pinned"', async (t) => {
  chmodSync(pinDir, 0o700);
  t.teardown(() => chmodSync(pinDir, 0o755));
  for (const args of COMMANDS) {
    const r = runSvcmap([...args, '--pin-dir', pinDir], { asNobody: true });
    t.equal(r.status, 1);
    t.match(r.stderr, needs(pinDir), `${args[0]}: ${r.stderr.trim()}`);
    t.match(r.stderr, new RegExp(`^svcmap: cannot read ${pinDir}/svcmap_svc:`));
  }
});

t.test('a bpffs this user may not search (mounted 0700): the same', async (t) => {
  chmodSync(outer, 0o700);
  t.teardown(() => chmodSync(outer, 0o755));
  for (const args of COMMANDS) {
    const r = runSvcmap([...args, '--pin-dir', pinDir], { asNobody: true });
    t.equal(r.status, 1);
    t.match(r.stderr, needs(pinDir), `${args[0]}: ${r.stderr.trim()}`);
    t.match(r.stderr, new RegExp(`^svcmap: cannot read ${pinDir}:`));
  }
});

t.test('what is really missing is still reported as missing, to anyone', async (t) => {
  const none = join(outer, 'none');
  const dump = runSvcmap(['dump', '--pin-dir', none], { asNobody: true });
  t.equal(dump.status, 1);
  t.match(dump.stderr, /^svcmap: no svcmap datapath is pinned at .*none /);
  t.match(runSvcmap(['status', '--pin-dir', none], { asNobody: true }).stderr, /^svcmap: nothing is pinned at /);
});

t.test('access is what matters: pins this user may open (mode 0666) are read without root', async (t) => {
  // bpf_obj_get opens a pin read-write unless asked otherwise: 0666 for this check.
  const names = PINNED_SPECS.map((s) => join(pinDir, s.name));
  for (const p of names) chmodSync(p, 0o666);
  t.teardown(() => {
    for (const p of names) chmodSync(p, 0o600);
  });
  const r = runSvcmap(['dump', '--pin-dir', pinDir], { asNobody: true });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /^10\.96\.7\.1:80\/TCP\s+ClusterIP\s+random\s+1\s+10\.244\.7\.1:8080$/m);
});
