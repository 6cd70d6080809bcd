// The client in a lab cgroup: it joins the cgroup before it enters the namespace.

import t from 'tap';
import { readFileSync, existsSync } from 'node:fs';
import { basename } from 'node:path';
import { Lab, cgroup2Mount, cgroupProcs } from '../../lab/index.ts';
import { alive } from './fixtures/helpers.ts';

t.test('cgroup2 mount comes from /proc/self/mounts', async (t) => {
  const mounts = readFileSync('/proc/self/mounts', 'utf8');
  t.ok(
    mounts.split('\n').some((l) => l.split(' ')[1] === cgroup2Mount() && l.split(' ')[2] === 'cgroup2'),
    cgroup2Mount(),
  );
});

t.test('client and spawned processes in a lab cgroup', async (t) => {
  const lab = await Lab.create();
  t.teardown(() => lab.destroy());
  const node = await lab.node('n', { cidr: '10.250.0.0/24' });
  const pod = await lab.pod(node, 'client', '10.250.0.2');
  const cg = await lab.cgroup('client');
  t.equal(cg, `${cgroup2Mount()}/svcmap-${lab.id}-client`);
  const bare = await lab.cgroup();
  t.equal(basename(bare), `svcmap-${lab.id}`);
  await t.rejects(lab.cgroup('client'), /already exists/);

  const client = await lab.client(pod, { cgroup: cg });
  const who = await client.whoami();
  t.equal(who.pid, client.pid);
  t.equal(who.cgroup, `/svcmap-${lab.id}-client`, 'client reports the lab cgroup in /proc/self/cgroup');
  t.ok((await cgroupProcs(cg)).includes(client.pid), 'its pid is in cgroup.procs');
  const podNetns = await lab.exec(pod, 'readlink', ['/proc/self/ns/net']);
  t.equal(who.netns, podNetns.trim(), 'and it runs in the pod namespace');

  const sleeper = lab.spawn(pod, 'sleep', ['30'], { cgroup: bare });
  await new Promise((r) => sleeper.once('spawn', r));
  // sh -> setpriv -> nsenter -> sleep all exec: the pid Node knows is sleep's.
  let procs: number[] = [];
  for (let i = 0; i < 50 && !procs.includes(sleeper.pid!); i++) {
    procs = await cgroupProcs(bare);
    await new Promise((r) => setTimeout(r, 10));
  }
  t.same(procs, [sleeper.pid], 'spawned process joined the bare cgroup');

  const pids = [client.pid, sleeper.pid!];
  await lab.destroy();
  t.notOk(existsSync(cg), 'cgroup removed');
  t.notOk(existsSync(bare), 'bare cgroup removed');
  t.same(pids.filter(alive), [], 'members are gone');
  await lab.destroy();
  t.pass('destroy twice is fine');
  await t.rejects(lab.cgroup('late'), /destroyed/);
});
