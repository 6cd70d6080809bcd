// A user who may not read the pins is told so, not that nothing is pinned.
// Real pins on the real bpffs (a claimed lab directory, removed in
// teardown), read by the compiled CLI as root and as nobody (uid 65534, no
// groups, no capabilities).
import { chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { assertBuilt } from '../../lab/agent-process.ts';
import { claimPinDir, ensureBpffs } from '../../lab/pins.ts';
import { BpfMap } from '../../src/bpf/map.ts';
import { IPPROTO_TCP, SVC_F_CLUSTERIP, SVC_SCOPE_EXT } from '../../src/maps/constants.ts';
import { type MapSpec, backendsMap, revNatMap, servicesMap, skRevNatMap } from '../../src/maps/registry.ts';
import { TypedMap } from '../../src/maps/typed-map.ts';
import { runSvcmap } from './run.ts';

assertBuilt();
ensureBpffs();

const BPF_MAP_TYPE_HASH = 1;

// outer/ stands for a bpffs mount point, pins/ for the agent's --pin-dir.
const claim = claimPinDir('perm');
t.teardown(() => claim.release());
const outer = claim.dir;
const pinDir = join(outer, 'pins');
mkdirSync(pinDir, { recursive: true, mode: 0o755 });
chmodSync(outer, 0o755);

/** Creates and pins one of the datapath's maps, as the agent would (root-owned, mode 0600). */
function pin<K, V>(spec: MapSpec<K, V>): TypedMap<K, V> {
  const m = BpfMap.create(BPF_MAP_TYPE_HASH, spec.name, spec.key.layout.size, spec.value.layout.size, 16);
  m.pin(join(pinDir, spec.name));
  return new TypedMap(spec, m);
}
const maps = [pin(servicesMap), pin(backendsMap), pin(revNatMap), pin(skRevNatMap)] as const;
t.teardown(() => { for (const m of maps) m.raw.close(); });
// One ClusterIP with one backend, so that a reader that gets through sees something.
const [services, backends, revNat] = maps;
const vip = { addr: '10.96.7.1', port: 80, proto: IPPROTO_TCP, scope: SVC_SCOPE_EXT };
backends.put(1, { addr: '10.244.7.1', port: 8080, proto: IPPROTO_TCP, state: 0, flags: 0, zone: 0 });
revNat.put(1, { addr: vip.addr, port: vip.port });
services.put({ ...vip, slot: 1 }, { backend_id: 1, rev_nat_id: 0, count: 0, flags: 0, algorithm: 0, affinity_timeout: 0 });
services.put({ ...vip, slot: 0 }, { backend_id: 0, rev_nat_id: 1, count: 1, flags: SVC_F_CLUSTERIP, algorithm: 0, affinity_timeout: 0 });

const COMMANDS = [['dump'], ['status'], ['explain', '10.96.7.1:80/TCP']];
const needs = (dir: string) => new RegExp(`^svcmap: [^\\n]*: EACCES: needs root \\(or CAP_BPF and read access to ${dir.replace(/[.]/g, '\\.')}\\)\\n$`);

t.test('root reads the pins', async (t) => {
  t.match(runSvcmap(['dump', '--pin-dir', pinDir]).stdout, /^10\.96\.7\.1:80\/TCP\s+ClusterIP\s+random\s+1\s+10\.244\.7\.1:8080$/m);
  t.match(runSvcmap(['status', '--pin-dir', pinDir]).stdout, /svcmap_svc\s+hash\s+2\/16/);
  t.match(runSvcmap(['explain', '10.96.7.1:80', '--pin-dir', pinDir]).stdout, /^Verdict: {4}random among 1$/m);
});

t.test('pins this user may not open (mode 0600): the bpf syscall\'s EACCES', async (t) => {
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
  const names = [servicesMap, backendsMap, revNatMap, skRevNatMap].map((s) => join(pinDir, s.name));
  for (const p of names) chmodSync(p, 0o666);
  t.teardown(() => { for (const p of names) chmodSync(p, 0o600); });
  const r = runSvcmap(['dump', '--pin-dir', pinDir], { asNobody: true });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /^10\.96\.7\.1:80\/TCP\s+ClusterIP\s+random\s+1\s+10\.244\.7\.1:8080$/m);
});
