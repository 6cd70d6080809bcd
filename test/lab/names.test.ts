// Pure helpers: names that fit, CIDR arithmetic, the command line of a lab process.

import t from 'tap';
import {
  ShortNames,
  cgroupName,
  checkIfName,
  cidrContains,
  netnsPattern,
  newRunId,
  nthHost,
  parseCidr,
  parseIfAddr,
} from '../../lab/names.ts';
import { spawnArgv } from '../../lab/processes.ts';
import { cgroup2Mount } from '../../lab/cgroup.ts';
// Type-only imports of the helper programs: erased at run time (they would start
// running), but they make `tsc -p tsconfig.json` check those files too.
import type {} from '../../lab/client.ts';
import type {} from '../../lab/echo-server.ts';
import type {} from '../../lab/sweep.ts';

t.test('run ids and netns names', async (t) => {
  const ids = new Set(Array.from({ length: 50 }, newRunId));
  for (const id of ids) t.match(id, /^[0-9a-f]{6}$/);
  const short = new ShortNames(6);
  const got = ['client', 'backend-1', 'backend-2', 'Backend_3', 'x', 'x', '!!!', 'a-very-long-pod-name'].map((n) => short.take(n));
  t.same(got, ['client', 'backen', 'backe1', 'backe2', 'x', 'x1', 'x2', 'averyl']);
  for (const s of got) t.ok(`sm123456-${s}`.length <= 15, `sm123456-${s} fits`);
  t.ok(netnsPattern('sm').test('sm1a2b3c-client'));
  t.notOk(netnsPattern('sm').test('sm1a2b3c'));
  t.notOk(netnsPattern('sm').test('other'));
  t.throws(() => netnsPattern('toolong'));
  t.equal(cgroupName('1a2b3c'), 'svcmap-1a2b3c');
  t.equal(cgroupName('1a2b3c', 'Agent Pods'), 'svcmap-1a2b3c-agent-pods');
  t.throws(() => checkIfName('sixteen-chars-xx'));
  t.equal(checkIfName('fifteen-chars-x'), 'fifteen-chars-x');
});

t.test('cidr arithmetic', async (t) => {
  t.same(parseCidr('10.244.1.7/24'), { network: '10.244.1.0', prefix: 24 });
  t.equal(nthHost(parseCidr('10.244.1.0/24'), 1), '10.244.1.1');
  t.equal(nthHost(parseCidr('10.244.0.0/16'), 256), '10.244.1.0');
  t.ok(cidrContains(parseCidr('10.244.1.0/24'), '10.244.1.255'));
  t.notOk(cidrContains(parseCidr('10.244.1.0/24'), '10.244.2.1'));
  t.ok(cidrContains(parseCidr('0.0.0.0/0'), '192.0.2.1'));
  t.same(parseIfAddr('10.0.0.1/30'), { ip: '10.0.0.1', prefix: 30 });
  t.throws(() => parseCidr('10.0.0.256/24'));
  t.throws(() => parseCidr('10.0.0.0/33'));
  t.throws(() => parseIfAddr('10.0.0.01/24'));
});

t.test('lab processes join the cgroup before entering the netns', async (t) => {
  const cg = `${cgroup2Mount()}/svcmap-abcdef`;
  const argv = spawnArgv('smabcdef-pod', 'echo', ["it's"], { cgroup: cg, cpu: 0 });
  t.same(argv, [
    'sh',
    '-c',
    'echo $$ > "$1" || exit 125; shift; exec "$@"',
    'sh',
    `${cg}/cgroup.procs`,
    'setpriv',
    '--pdeathsig',
    'KILL',
    '--',
    'taskset',
    '-c',
    '0',
    'nsenter',
    '--net=/run/netns/smabcdef-pod',
    '--',
    'echo',
    "it's",
  ]);
  t.throws(() => spawnArgv('x', 'true', [], { cgroup: cgroup2Mount() }), /not a child cgroup/, 'never the root cgroup');
  t.throws(() => spawnArgv('x', 'true', [], { cgroup: `${cgroup2Mount()}/../x` }), /not a child cgroup/);
  t.throws(() => spawnArgv('../x', 'true', []), /bad netns name/);
});
